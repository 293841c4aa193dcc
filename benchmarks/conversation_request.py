"""What the messages and tools styles cost to build per step (issue 42). Prints, last, one JSON object.

The conversation styles rebuild their whole request (system message, the exemplars as prior turns,
the task and every step; the tool schemas) as JSON at each step, and the client hashes it; the text
styles append to a prefix built once. For an ALFWorld task with the built-in exemplars and a version
of N steps (thought turns and `look` actions alternating), the median time to build the next
request (build + JSON + sha256) in each style, and the request's size.

Usage: python benchmarks/conversation_request.py [--steps 1,10,25,50] [--repeat 20]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import time

from _root import ROOT  # noqa: E402,F401  (repo root on sys.path; see _root.py)

from agent import conversing  # noqa: E402
from agent.exemplars import builtin_prompt_dict  # noqa: E402
from envs.registry import family  # noqa: E402
from trajectory.records import Step  # noqa: E402


def steps_of(n: int) -> list[Step]:
    return [
        Step(
            index=i,
            thought="I should look around the room again." if i % 2 else None,
            action=None if i % 2 else "look",
            observation="OK."
            if i % 2
            else "You are in the middle of a room. Looking quickly around you, you see a desk 1 and a shelf 1.",
        )
        for i in range(1, n + 1)
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", default="1,10,25,50")
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    fam = family("alfworld")
    tr = fam.transcript
    task = next(t for t in fam.list_tasks(source="builtin") if t.type == "pick_and_place_simple")
    prompts = builtin_prompt_dict("alfworld")
    out: dict = {"task": task.id, "repeat": args.repeat, "styles": {}}
    for style in ("completions", "messages", "tools"):
        rows = {}
        fixed = (
            tr.fixed_prefix(prompts, task, "react")
            if style == "completions"
            else conversing.fixed_messages(tr, prompts, task, "react", style)
        )
        for n in (int(x) for x in args.steps.split(",")):
            steps = steps_of(n)
            times = []
            for _ in range(args.repeat):
                t = time.perf_counter()
                text_req = tr.request(
                    prompts, task, steps, "react", None, fixed=fixed if style == "completions" else None
                )
                prompt = (
                    text_req.prompt
                    if style == "completions"
                    else conversing.request(tr, fixed, task, steps, style, text_req).model.prompt
                )
                hashlib.sha256(prompt.encode()).hexdigest()
                times.append(time.perf_counter() - t)
            rows[n] = {"ms_p50": round(statistics.median(times) * 1000, 3), "chars": len(prompt)}
        out["styles"][style] = rows
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
