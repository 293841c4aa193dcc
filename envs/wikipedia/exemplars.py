"""Few-shot prompts in the original ReAct prompt-file layout.

The built-in prompts (data/prompts.json) are *built*, not typed: the corpus helper wrote
thoughts and actions (corpus/exemplar_plans.json); `build_prompts` executes each action on
the built-in wiki and records the real observation, so every exemplar observation is what
the environment really says. Two files, as the original's two: data/prompts.json (HotpotQA,
keys and layout of prompts_naive.json: `webthink_simple6`, `webact_simple6`) and
data/fever_prompts.json (FEVER, like fever.json: `webthink_simple3`, `webact_simple3`).
"""

from __future__ import annotations

import json
from pathlib import Path

from envs.base import EnvError
from envs.wikipedia.paths import PROMPTS_FILES
from trajectory.formats import FEVER_HEADER, render_wiki
from trajectory.records import Step

FEVER_INSTRUCTION = FEVER_HEADER[1:]  # the header without its leading newline
REFERENCE_FILES = {"hotpotqa": "prompts_naive.json", "fever": "fever.json"}


def _run_example(env, task, plan: list[dict], think: bool) -> str:
    """One trajectory in the prompt-file layout, with the observations the env gives now;
    the closing Finish has no Observation line, as in the paper's files."""
    env.reset(task)
    steps: list[Step] = []
    for i, step in enumerate(plan, 1):
        action = step["action"]
        result = env.step(action)
        if result.done:
            if i != len(plan):
                raise EnvError(f"exemplar {task.text[:60]!r}: step {i} finished the episode early")
            steps.append(Step(index=i, thought=step["thought"] if think else None, action=action))
            return render_wiki(task.text, steps)
        obs = result.observation
        # `miss: true` marks a search expected to find nothing; a disambiguation page reads
        # "Could not find [X]" and may appear unflagged, a plain miss may not
        plain_miss = obs.startswith("Could not find") and not obs.startswith("Could not find [")
        missed = obs.startswith("Could not find")
        if action[:1].lower() == "s" and (missed if step.get("miss") else not plain_miss) is False:
            raise EnvError(
                f"exemplar {task.text[:60]!r} step {i} {action!r}: expected "
                f"{'a miss' if step.get('miss') else 'a page'}, got {obs[:80]!r}"
            )
        steps.append(Step(index=i, thought=step["thought"] if think else None, action=action, observation=obs))
    raise EnvError(f"exemplar {task.text[:60]!r} does not end with Finish[...]")


def build_prompts(plans: dict, make_env, check_answers: bool = True) -> dict[str, dict[str, str]]:
    """`plans` in the exemplar_plans.json format; `make_env(kind)` -> a WikiEnv on the
    built-in wiki. Returns {kind: {key: prompt}} keyed like the original files."""
    from envs.wikipedia.tasks import custom_task

    result: dict[str, dict[str, str]] = {}
    for kind, key in (("hotpotqa", "question"), ("fever", "claim")):
        examples = plans.get(kind) or []
        if not examples:
            continue
        env = make_env(kind)
        think, act = [], []
        for ex in examples:
            gold = ex["answer"] if kind == "hotpotqa" else ex["label"]
            task = custom_task(kind, question=ex[key], answer=gold)
            think.append(_run_example(env, task, ex["steps"], think=True))
            if check_answers and env._score(env.answer or "")[0] != 1:
                raise EnvError(f"exemplar {task.text[:60]!r} finishes with {env.answer!r}, gold {gold!r}")
            act.append(_run_example(env, task, ex["steps"], think=False))
        n = len(examples)
        out = result[kind] = {}
        if kind == "hotpotqa":
            out[f"webthink_simple{n}"] = "\n" + "".join(think)
            out[f"webact_simple{n}"] = "".join(act) + "\n"
        else:  # FEVER's file: its instruction, then examples separated by a blank line
            out[f"webthink_simple{n}"] = FEVER_HEADER + "".join(e + "\n" for e in think)
            out[f"webact_simple{n}"] = FEVER_HEADER + "".join(e + "\n" for e in act)
        if all(ex.get("cot") for ex in examples):
            out.update(_qa_blocks(kind, key, examples))
    return result


def _qa_blocks(kind: str, key: str, examples: list[dict]) -> dict[str, str]:
    """The Standard (`webqa_*`) and CoT (`cotqa_*`) blocks, laid out as the original
    prompts_naive.json / fever.json: HotpotQA's CoT thoughts start "Let's think step by step."."""
    gold = "answer" if kind == "hotpotqa" else "label"
    head = "Question" if kind == "hotpotqa" else "Claim"
    lead = "Let's think step by step. " if kind == "hotpotqa" else ""
    qa = [f"{head}: {ex[key]}\nAnswer: {ex[gold]}\n" for ex in examples]
    cot = [f"{head}: {ex[key]}\nThought: {lead}{ex['cot']}\nAnswer: {ex[gold]}\n" for ex in examples]
    n = len(examples)
    if kind == "hotpotqa":
        return {f"cotqa_simple{n}": "".join(cot), f"webqa_simple{n}": "".join(qa)}
    return {
        f"cotqa_simple{n}": FEVER_INSTRUCTION + "\n".join(cot),
        f"webqa_simple{n}": FEVER_INSTRUCTION + "\n".join(qa),
    }


def build_builtin_prompts(corpus_dir: Path | None = None) -> dict[str, dict[str, str]]:
    from envs.wikipedia import make_env
    from envs.wikipedia.builtin import CORPUS_DIR

    plans_path = Path(corpus_dir or CORPUS_DIR) / "exemplar_plans.json"
    if not plans_path.is_file():
        raise EnvError(f"missing data file: {plans_path}")
    plans = json.loads(plans_path.read_text(encoding="utf-8"))
    options = {"wiki": "builtin", "corpus_dir": corpus_dir}
    return build_prompts(plans, lambda kind: make_env(kind, None, options, None))


def dump(prompts: dict[str, str]) -> str:
    return json.dumps(prompts, ensure_ascii=False, indent=2) + "\n"


def write_builtin_prompts(corpus_dir: Path | None = None, files: dict[str, Path] | None = None) -> list[Path]:
    built = build_builtin_prompts(corpus_dir)
    written = []
    for kind, path in (files or PROMPTS_FILES).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dump(built[kind]), encoding="utf-8")
        written.append(path)
    return written


def builtin_prompts(kind: str) -> dict[str, str]:
    path = PROMPTS_FILES[kind]
    if not path.is_file():
        raise EnvError(f"built-in prompts missing: {path} (run `react-editor wiki prompts --write`)")
    return json.loads(path.read_text(encoding="utf-8"))


def builtin_prompt(kind: str, style: str = "react") -> str:
    prefix = "webthink_simple" if style == "react" else "webact_simple"
    prompts = builtin_prompts(kind)
    for k, v in prompts.items():
        if k.startswith(prefix):
            return v
    raise EnvError(f"no {style} prompt in {PROMPTS_FILES[kind]}")


def reference_prompt(kind: str, style: str = "react", prompts_dir: Path | None = None) -> str:
    """The paper's own prompt (webthink_simple6 / webact_simple3, ...) from a checkout of the
    ReAct repository's prompts/ dir, when present."""
    from envs.wikipedia.tasks import react_dir

    d = Path(prompts_dir) if prompts_dir else react_dir().parent / "prompts"
    f = d / REFERENCE_FILES[kind]
    if not f.is_file():
        raise EnvError(f"ReAct prompt file not found: {f}")
    prompts = json.loads(f.read_text(encoding="utf-8"))
    want = {
        "hotpotqa": {"react": "webthink_simple6", "act": "webact_simple6"},
        "fever": {"react": "webthink_simple3", "act": "webact_simple3"},
    }[kind][style]
    return prompts[want]
