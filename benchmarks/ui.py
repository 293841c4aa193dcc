"""UI speed: server time of an Editor rerun on a 50-step version of an episode with 10
versions, and of opening Compare on two 50-step versions (streamlit AppTest, in-process).

    python benchmarks/ui.py [--runs 15]

Builds a fresh database on a built-in ALFWorld game (real environment; a person's steps,
so no model is needed), then prints a few lines and, LAST, one JSON object:
{"editor_rerun_ms": ..., "compare_ms": ...}   (targets: <= 300 ms each)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

# benchmarks/alfworld.py would shadow the alfworld package: drop this script's folder
from _root import ROOT  # noqa: E402  (repo root on sys.path; see _root.py)

STEPS = 50
VERSIONS = 10


def build(db: Path) -> tuple[int, int, int]:
    """One episode, a 50-step version, and 9 more versions (thought edits that keep the
    later steps, so they are 50 steps long too). Returns (episode, first, last version)."""
    from agent.engine import Engine
    from envs.registry import family
    from trajectory.records import AgentConfig
    from sessions.store import Store

    eng = Engine(Store(db))
    task = next(t for t in family("alfworld").list_tasks() if t.type == "pick_and_place_simple")
    ep, v = eng.start_episode(task, AgentConfig(model="gpt-3.5-turbo-instruct", max_steps=60), {"wording": "paper"})
    i = 0
    while len(eng.store.version_steps(v.id)) < STEPS:
        acts = [a for a in eng.admissible_actions(v.id) or [] if a.startswith("go to ")] or ["look"]
        cmd = acts[i % len(acts)]
        i += 1
        eng.human_step(v.id, thought=f"Step {i}: I will try {cmd} and look for the object there.", action=cmd)
    last = v
    for j in range(VERSIONS - 1):
        k = 1 + 2 * (j * 2 + 1)  # thought steps (odd indices)
        last = eng.edit(last.id, k, "rewrite_thought", f"Edited thought {j}: search more carefully.", keep_rest=True)
    assert len(eng.store.versions(ep.id)) == VERSIONS
    assert len(eng.store.version_steps(last.id)) == STEPS
    eng.store.close()
    return ep.id, v.id, last.id


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="react-editor-bench-")
    db = Path(tmp) / "bench.db"
    os.environ["REACT_EDITOR_DB"] = str(db)
    t0 = time.perf_counter()
    ep, first, last = build(db)
    print(f"built episode {ep}: {VERSIONS} versions, v{first} and v{last} have {STEPS} steps "
          f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr)

    from streamlit.testing.v1 import AppTest

    app = str(ROOT / "app.py")

    def page(name: str, **query) -> AppTest:
        at = AppTest.from_file(app, default_timeout=120)
        at.switch_page(f"app_pages/{name}.py")
        for k, val in query.items():
            at.query_params[k] = str(val)
        return at

    # Editor: the first run builds the environment (replay); then reruns are what a person waits for
    ed = page("editor", episode=ep, version=last)
    first_ms = timed(ed.run)
    assert not ed.exception, ed.exception
    assert sum(1 for t in ed.text if t.value.startswith("Obs ")) == STEPS
    editor = [timed(ed.run) for _ in range(args.runs)]
    print(f"editor: first open {first_ms:.0f} ms; rerun median {statistics.median(editor):.0f} ms, "
          f"max {max(editor):.0f} ms", file=sys.stderr)

    # Compare: opening the page fresh each time (a new session), two 50-step versions
    def open_compare() -> None:
        at = page("compare", episode=ep, left=first, right=last)
        at.run()
        assert not at.exception, at.exception
        assert at.get("html")[0].proto.body.count("<tr class=") == STEPS

    open_compare()  # warm the imports of the page module
    compare = [timed(open_compare) for _ in range(args.runs)]
    print(f"compare: open median {statistics.median(compare):.0f} ms, max {max(compare):.0f} ms", file=sys.stderr)
    print(json.dumps({"editor_rerun_ms": round(statistics.median(editor), 1),
                      "compare_ms": round(statistics.median(compare), 1)}))


if __name__ == "__main__":
    main()
