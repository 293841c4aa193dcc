"""What a proven fix costs: `suggest --experiment` over the built-in HotpotQA and ALFWorld
failures with a scripted critic and a scripted agent. Prints, last, one JSON object.

- HotpotQA: the agent searches, then answers wrongly - unless its thought says "Check the
  question word by word.", after which it answers right. The critic proposes that thought
  (at step 1, where a search miss raises the first signal), a thought that does nothing
  (after step 1), and a thought stating the gold answer (flagged, never verified).
- ALFWorld: the agent visits the receptacles in turn until the step limit; the critic
  proposes a hint at the first failure signal, which changes nothing (no proven fix: the
  cost per failure is what such a run pays for a "not shown").

Per environment: failures, proven fixes, wall seconds, model calls (critic and rollouts),
billed tokens, and calls/tokens/seconds per proven fix; where the best proven fix sat
relative to the first failure signal (at / before / after).

Usage: python benchmarks/suggest.py [--failures 6] [--verify 10]
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import tempfile
import time
from contextlib import redirect_stdout
from pathlib import Path

from _root import ROOT  # noqa: F401  (repo root on sys.path; see _root.py)

CRITIC_MARK = "You review the trajectory"
MAGIC = "Check the question word by word."
CORPUS = ROOT / "envs" / "wikipedia" / "corpus"


def hotpot_agent():
    from tests.experiment_agents import wiki_agent
    from tests.scripted_server import prompt_text

    gold = {
        json.loads(line)["question"]: json.loads(line)["answer"]
        for line in (CORPUS / "hotpotqa.jsonl").read_text().splitlines()
        if line.strip()
    }
    plain = wiki_agent({}, react_steps=2, search="Search[Qwxyz Vbnm]")  # a miss: the first signal
    fixed = wiki_agent(gold, react_steps=1)

    def respond(body):
        text = prompt_text(body)
        if CRITIC_MARK in text:
            q = re.search(r"^Question: (.*)$", text, re.MULTILINE).group(1)
            return json.dumps(
                {
                    "candidates": [
                        {"step": 1, "kind": "rewrite_thought", "text": MAGIC, "rationale": "read it again"},
                        {
                            "step": 1,
                            "kind": "insert_thought_after",
                            "text": "Maybe search again.",
                            "rationale": "retry",
                        },
                        {
                            "step": 1,
                            "kind": "rewrite_thought",
                            "text": f"The answer is {gold.get(q, 'x')}.",
                            "rationale": "leaks",
                        },
                    ]
                }
            )
        return fixed(body) if MAGIC in text.rpartition("Question:")[2] else plain(body)

    return respond


def alfworld_agent():
    from tests.experiment_agents import alfworld_agent as walker
    from tests.scripted_server import prompt_text

    walk = walker()

    def respond(body):
        text = prompt_text(body)
        if CRITIC_MARK in text:
            first = re.search(r"first step that raised a failure signal is step (\d+)", text)
            step = min(int(first.group(1)) if first else 3, 3)  # (the step limit's signal leaves no room)
            return json.dumps(
                {
                    "candidates": [
                        {
                            "step": step,
                            "kind": "insert_thought_before",
                            "text": "I should check the places I have not seen.",
                            "rationale": "it loops",
                        }
                    ]
                }
            )
        return walk(body)

    return respond


def cli(*argv) -> dict:
    from react_editor.main import main

    buf = io.StringIO()
    with redirect_stdout(buf):
        code = main([*map(str, argv), "--json"])
    if code != 0:
        raise SystemExit(f"react-editor {' '.join(map(str, argv))} failed ({code})")
    return json.loads(buf.getvalue().strip().splitlines()[-1])


def measure(llm, env: str, responder, failures: int, verify: int, work: Path) -> dict:
    db = work / f"{env}.db"
    llm.set_responder(responder)
    cli(
        "experiment",
        "run",
        "--env",
        env,
        "--limit",
        failures,
        "--name",
        env,
        "--model",
        "m",
        "--base-url",
        llm.base_url,
        "--db",
        db,
        *(["--max-steps", "8"] if env == "alfworld" else []),
    )
    llm.requests.clear()
    t0 = time.perf_counter()
    out = cli(
        "suggest",
        "--experiment",
        env,
        "--where",
        "failed",
        "--verify",
        verify,
        "--concurrency",
        4,
        "--temperature",
        "0.7",
        "--db",
        db,
    )
    wall = time.perf_counter() - t0
    calls = len(llm.completion_requests)
    proven = out["proven"]
    tokens = out["cost"]["tokens"]
    where = {}
    for r in out["failures"]:
        if r["proven"]:
            where[r["where"] or "no signal"] = where.get(r["where"] or "no signal", 0) + 1
    verdicts = [r["verdict"] for r in out["failures"]]

    def per(x: float) -> float | None:
        return round(x / proven, 2) if proven else None

    return {
        "env": env,
        "failures": len(out["failures"]),
        "proven": proven,
        "wall_s": round(wall, 2),
        "model_calls": calls,
        "tokens": tokens,
        "calls_per_proven_fix": per(calls),
        "tokens_per_proven_fix": per(tokens),
        "wall_s_per_proven_fix": per(wall),
        "best_fix_where": where,
        "verdicts": verdicts[:3],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--failures", type=int, default=6)
    ap.add_argument("--verify", type=int, default=10)
    args = ap.parse_args()
    from tests.scripted_server import ScriptedLLM

    results = []
    with tempfile.TemporaryDirectory() as tmp, ScriptedLLM() as llm:
        for env, responder in (("hotpotqa", hotpot_agent()), ("alfworld", alfworld_agent())):
            results.append(measure(llm, env, responder, args.failures, args.verify, Path(tmp)))
            print(f"{env}: {results[-1]}", file=sys.stderr)
    print(json.dumps({"verify": args.verify, "results": results}))


if __name__ == "__main__":
    main()
