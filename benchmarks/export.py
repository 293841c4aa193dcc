"""Benchmark: export 10,000 versions of 30 steps to jsonl.

Builds a database through the Store API (5,000 episodes, each with a 30-step version and a
branch at step 15 with 15 new steps: 10,000 versions of 30 steps, one model call per model
step), then exports everything as jsonl in a child process that measures the wall time and
the peak-RSS growth of the export (ru_maxrss after minus the RSS before it starts).
Prints, last, one JSON object: {"export_10k_s": ..., "export_peak_mb": ...}
(targets: <= 20 s, <= 200 MB).

    python benchmarks/export.py [--episodes 5000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _root import ROOT  # noqa: E402  (repo root on sys.path; see _root.py)

STEPS = 30
BRANCH_AT = 15


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build(db: Path, episodes: int) -> None:
    from trajectory.records import AgentConfig, ModelCall, Step, Task, Usage
    from sessions.store import Store

    store = Store(db)
    config = AgentConfig(model="bench-model", base_url="http://127.0.0.1:1/v1")
    room = ("You are in the middle of a room. Looking quickly around you, you see a cabinet 6, a cabinet 5, "
            "a cabinet 4, a cabinet 3, a cabinet 2, a cabinet 1, a countertop 1, a drawer 1, and a fridge 1.")

    def steps(ep: int, start: int, n: int, tag: str) -> tuple[list[Step], list[ModelCall]]:
        out, calls = [], []
        for i in range(start, start + n):
            calls.append(ModelCall(model="bench-model", api_style="completions", params={"temperature": 0.0, "stop": ["\n"]},
                                   prompt_hash=f"{ep:08d}{i:04d}{tag}", prompt_chars=4000 + 40 * i,
                                   completion=f" go to cabinet {i % 6 + 1}", latency_ms=412.5,
                                   usage=Usage(prompt_tokens=1000 + 10 * i, completion_tokens=6)))
            if i % 3 == 1:
                out.append(Step(index=i, thought=f"I need to check cabinet {i % 6 + 1} for the mug ({tag}).",
                                observation="OK.", source="human" if tag == "b" else "model", call_ids=[-len(calls)]))
            else:
                out.append(Step(index=i, action=f"go to cabinet {i % 6 + 1}",
                                observation=f"The cabinet {i % 6 + 1} is open. In it, you see a cup {i}, a plate 2, "
                                f"and a spoon 1. ({tag} {ep})", info={"won": False}, call_ids=[-len(calls)]))
        return out, calls

    batch = 500
    for start in range(0, episodes, batch):
        with store.transaction():
            for ep_n in range(start, min(start + batch, episodes)):
                task = Task(env="alfworld", id=f"bench/{ep_n}", type="pick_and_place_simple",
                            text=room + f"\nYour task is to: put a mug {ep_n} in fridge.")
                ep, v = store.create_episode(task, config, {"wording": "paper"})
                s1, c1 = steps(ep_n, 1, STEPS, "a")
                rows, v = store.append_steps(v.id, s1, c1)
                s2, c2 = steps(ep_n, BRANCH_AT + 1, STEPS - BRANCH_AT, "b")
                v2, _ = store.branch(v, at_step=rows[BRANCH_AT - 1], steps=[])
                store.append_steps(v2.id, s2, c2)
    store.close()


def child(db: str, out: str) -> None:
    from sessions.exchange import Filters, export
    from sessions.store import Store

    store = Store(db)
    base = _rss_mb()
    t0 = time.perf_counter()
    rep = export(store, "jsonl", out, filters=Filters(all_versions=True))
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": dt, "peak_mb": peak, "delta_mb": max(0.0, peak - base), "versions": rep.versions,
                      "records": rep.records, "steps": rep.steps, "bytes": rep.bytes}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=5000)
    ap.add_argument("--keep", default=None, help="keep the database and output here")
    ap.add_argument("--child", nargs=2, metavar=("DB", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-export-"))
    work.mkdir(parents=True, exist_ok=True)
    db, out = work / "bench.db", work / "out.jsonl"
    if db.exists():
        db.unlink()
    t0 = time.perf_counter()
    build(db, args.episodes)
    print(f"built {args.episodes * 2} versions in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    res = subprocess.run([sys.executable, __file__, "--child", str(db), str(out)], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    child_out = json.loads(res.stdout.strip().splitlines()[-1])
    print(f"exported {child_out['versions']} versions, {child_out['steps']} steps, "
          f"{child_out['bytes'] / 2**20:.0f} MB", file=sys.stderr)
    if not args.keep:
        for p in work.iterdir():
            p.unlink()
        work.rmdir()
    # peak: the exporting process's whole peak RSS (interpreter and libraries included);
    # delta: what the export itself added on top of the process before it started
    print(json.dumps({"export_10k_s": round(child_out["seconds"], 2), "export_peak_mb": round(child_out["peak_mb"], 1),
                      "export_peak_delta_mb": round(child_out["delta_mb"], 1), "versions": child_out["versions"]}))


if __name__ == "__main__":
    main()
