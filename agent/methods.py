"""The paper's prompting methods (section 3-4, Tables 1 and 3), run on one episode each.

- `react`, `act`: the step engine with the react / act prompt style (ALFWorld, HotpotQA, FEVER).
- `standard`, `cot`: one call with the `webqa_*` / `cotqa_*` examples; the answer is stored
  as one step (the thought and `Finish[answer]`), scored by the environment.
- `cot-sc`: n CoT samples at temperature 0.7 (the paper: n = 21), the majority answer.
- `react-cot-sc`: ReAct; when it gives no answer within its step budget (7 HotpotQA,
  5 FEVER), back off to CoT-SC. `cot-sc-react`: CoT-SC; when the majority answer has fewer
  than n/2 votes, back off to ReAct.
A hybrid's phases are versions of the same episode, named after the phase when created and
recorded on the experiment item (renaming a version changes nothing); the last phase run is
the episode's current version. Each phase is resumable: a finished phase is kept, an
unfinished ReAct phase continues in place, a CoT phase is one atomic step.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable

from agent import exemplars as ex
from agent.client import ModelError
from agent.engine import Engine, EngineError
from envs.wikipedia.scoring import normalize_answer
from sessions.store import StoreError
from trajectory.answer_formats import majority, parse_qa
from trajectory.prompt_files import ALFWORLD_PREFIXES
from trajectory.records import ModelCall, Version

WIKI_METHODS = ("standard", "cot", "cot-sc", "act", "react", "react-cot-sc", "cot-sc-react")
METHODS: dict[str, tuple[str, ...]] = {"alfworld": ("react", "act"), "hotpotqa": WIKI_METHODS, "fever": WIKI_METHODS}
PHASES: dict[str, tuple[str, ...]] = {
    "react": ("react",), "act": ("act",), "standard": ("standard",), "cot": ("cot",), "cot-sc": ("cot-sc",),
    "react-cot-sc": ("react", "cot-sc"), "cot-sc-react": ("cot-sc", "react"),
}
# ReAct -> CoT-SC backs off when ReAct gives no answer within these steps (the paper, 3.3).
BACKOFF_STEPS = {"hotpotqa": 7, "fever": 5}
DEFAULT_SAMPLES = 21
SC_TEMPERATURE = 0.7
QA_CHAT = {
    "standard": "Continue the transcript above: reply with only the answer to the last question, on one line.",
    "cot": "Continue the transcript above: reply with the reasoning on one line, then 'Answer: ' and the answer.",
}


class MethodError(EngineError):
    """A method that does not apply (one line)."""


def check_method(env: str, method: str) -> None:
    known = METHODS.get(env)
    if known is None:
        raise MethodError(f"unknown environment {env!r}")
    if method not in known:
        raise MethodError(f"method {method!r} does not apply to {env}; use one of {', '.join(known)}")


def check_exemplars(env: str, method: str, exemplar_set: str | None, store) -> None:
    """Fail before anything runs when the exemplar set lacks what the method's prompts need."""
    try:
        prompts = ex.prompt_dict(env, exemplar_set, store)
        for phase in PHASES[method]:
            if phase in ("react", "act"):
                if env == "alfworld":
                    for task_type in ALFWORLD_PREFIXES:
                        ex.alfworld_exemplars(prompts, task_type, phase)
                else:
                    ex.wiki_exemplars(prompts, env, phase)
            else:
                ex.qa_exemplars(prompts, env, "standard" if phase == "standard" else "cot")
    except (ex.ExemplarError, StoreError) as exc:
        raise MethodError(str(exc)) from None


def prompt_style(method: str) -> str:
    """The episode's prompt style (the engine's `react` / `act`)."""
    return "act" if method == "act" else "react"


@dataclass
class ItemOutcome:
    version_id: int
    done: bool
    success: bool | None
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    stopped: bool = False


def run_item(
    engine: Engine, episode_id: int, method: str, *, samples: int = DEFAULT_SAMPLES,
    sc_temperature: float = SC_TEMPERATURE, should_stop: Callable[[], bool] | None = None,
    phases: dict[str, int] | None = None, on_phase: Callable[[str, int], None] | None = None,
) -> ItemOutcome:
    """Run (or continue) `method` on the episode; return where its final version stands.
    `phases` ({phase: version id}, the experiment item's record) says which version ran
    each phase; `on_phase` records a phase's version whenever it starts or moves (a run on
    a version frozen meanwhile goes on in a child, and the phase follows it there)."""
    store = engine.store
    names = PHASES[method]
    known = dict(phases or {})
    if not known:  # an item recorded before phases were kept: fall back to the version names
        known = {v.name: v.id for v in store.versions(episode_id) if v.name in names}
    v: Version | None = None
    for n, phase in enumerate(names):
        v = _phase_version(store, episode_id, phase, known.get(phase), v)
        if on_phase and known.get(phase) != v.id:
            on_phase(phase, v.id)
        if not v.outcome.done:
            moved = functools.partial(on_phase, phase) if on_phase else None
            error, stopped, ran = _run_phase(engine, v, phase, samples, sc_temperature, should_stop, moved)
            v = store.version(ran)
            if on_phase and ran != known.get(phase):
                on_phase(phase, ran)
            if error or stopped:
                return ItemOutcome(v.id, False, None, dict(v.outcome.metrics), error=error, stopped=stopped)
        known[phase] = v.id
        if n + 1 < len(names) and not _backs_off(engine, v, phase):
            break
    assert v is not None
    metrics = {**v.outcome.metrics, "answered_by": _phase_of(known, v.id)}
    return ItemOutcome(v.id, True, v.outcome.success, metrics)


def _phase_of(known: dict[str, int], version_id: int) -> str:
    return next((p for p, vid in known.items() if vid == version_id), "")


def _phase_version(store, episode_id: int, phase: str, recorded: int | None, prev: Version | None) -> Version:
    """The version that runs `phase`: the recorded one, else the episode's first version
    (first phase), else a fresh path from the task's start named after the phase."""
    if recorded is not None:
        return store.version(recorded)
    if prev is None:
        return store.update_version(store.versions(episode_id)[0].id, name=phase)
    found, _ = store.branch(prev, at_step=None, steps=[], name=phase)
    return found


def _run_phase(engine: Engine, v: Version, phase: str, samples: int, sc_temperature: float,
               should_stop: Callable[[], bool] | None,
               moved: Callable[[int], None] | None = None) -> tuple[str | None, bool, int]:
    """(error, stopped, id of the version that ran) after running one phase on version v:
    a ReAct run on a version frozen meanwhile goes on in a child version, and `moved` hears
    of it at once (a crash right after must not leave the item on the frozen version)."""
    if phase in ("react", "act"):
        def on_step(rep) -> None:
            if rep.frozen and moved:
                moved(rep.version.id)

        rep = engine.run(v.id, should_stop=should_stop, on_step=on_step)
        return rep.error, rep.stopped, rep.version
    try:
        if phase == "cot-sc":
            _answer_sc(engine, v, samples, sc_temperature)
        else:
            _answer_once(engine, v, phase)
    except (EngineError, StoreError) as exc:
        return str(exc), False, v.id
    return None, False, v.id


def _qa_prompt(engine: Engine, v: Version, method: str) -> tuple[str, list[str]]:
    """The version's pinned config and exemplar revision, as ReAct steps use them."""
    try:
        return engine.qa_prompt(v.id, method)
    except EngineError as exc:
        raise MethodError(str(exc)) from None


def _sample(engine: Engine, v: Version, config, method: str, n: int) -> tuple[list[str], list[str | None], list[ModelCall]]:
    """n completions of one Standard / CoT prompt: (answers, thoughts, calls). A failed
    call keeps the calls made so far in the log and fails the phase."""
    prompt, stop = _qa_prompt(engine, v, method)
    client = engine.client(engine.model_config(engine.store.episode(v.episode_id), config))
    answers, thoughts, calls = [], [], []
    for _ in range(n):
        try:
            text, call = client.complete(prompt, stop, purpose="step", chat_instruction=QA_CHAT[method])
        except ModelError as exc:
            engine.store.record_calls(v.episode_id, [*calls, exc.call])
            raise MethodError(f"model call failed: {exc}") from None
        parsed = parse_qa(text, method)
        answers.append(parsed.answer)
        thoughts.append(parsed.thought)
        calls.append(call)
    return answers, thoughts, calls


def _answer_once(engine: Engine, v: Version, method: str) -> None:
    config = engine.store.version_config(v.id)
    answers, thoughts, calls = _sample(engine, v, config, method, 1)
    engine.answer(v.id, thoughts[0], answers[0], calls, info={"method": method})


def _answer_sc(engine: Engine, v: Version, samples: int, temperature: float) -> None:
    config = engine.store.version_config(v.id).model_copy(update={"temperature": temperature})
    answers, thoughts, calls = _sample(engine, v, config, "cot", samples)
    best, votes = majority(answers, normalize_answer)
    thought = next((t for a, t in zip(answers, thoughts) if best and normalize_answer(a) == normalize_answer(best)),
                   thoughts[0] if thoughts else None)
    info = {"method": "cot-sc", "votes": votes, "samples": samples, "answers": answers}
    engine.answer(v.id, thought, best, calls, info=info)


def _backs_off(engine: Engine, v: Version, phase: str) -> bool:
    """The paper's heuristics: ReAct -> CoT-SC when ReAct returned no answer within its
    step budget; CoT-SC -> ReAct when the majority answer has fewer than n/2 votes."""
    metrics = v.outcome.metrics
    if phase == "react":
        return bool(metrics.get("limit")) or not str(metrics.get("answer") or "").strip()
    last = engine.store.version_steps(v.id)[-1]
    votes, n = last.info.get("votes", 0), last.info.get("samples", 1)
    return votes < n / 2
