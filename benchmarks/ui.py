"""UI speed: server time of an Editor rerun on a 50-step version of an episode with 10
versions, on a 22-step version of an episode with 5 versions (and of a click on a step's Edit
and on Cancel there), and on a 200-step version, of opening Compare on two 50-step versions, of Compare on
two 50-step versions with a thought deleted in the middle, and of the Episodes and
Experiments pages on a database of 20 experiments x 500 tasks (streamlit AppTest, in-process).

    python benchmarks/ui.py [--runs 15] [--experiments 20 --tasks 500]

Builds fresh databases: one on a built-in ALFWorld game (real environment; a person's
steps, so no model is needed), one of experiments written through the store API
(benchmarks/_experiments_db.py). Prints a few lines and, LAST, one JSON object:
{"editor_rerun_ms", "editor_22_rerun_ms", "editor_22_rerun_cpu_ms", "edit_click_ms", "edit_click_cpu_ms",
 "editor_200_rerun_ms", "compare_ms", "compare_deletion_ms", "episodes_page_ms",
 "experiments_page_ms", ...}   (targets: <= 300 ms p50 each). `*_cpu_ms`: the CPU time of the
script thread alone, which other work on a shared machine barely moves."""

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
import _experiments_db  # noqa: E402,I001  (before _root, like _bulk)
from _app_timing import ScriptCPU, share_script_cache  # noqa: E402
from _root import ROOT  # noqa: E402  (repo root on sys.path; see _root.py)

STEPS = 50
SMALL_STEPS, SMALL_VERSIONS = 22, 5
VERSIONS = 10


def build(db: Path, steps: int = STEPS, versions: int = VERSIONS) -> tuple[int, int, int, int]:
    """One episode, a 50-step version, and 9 more versions: 8 thought edits that keep the
    later steps (50 steps long too) and one that deletes the thought at step 25, keeps the
    rest and takes one more step (50 steps). Returns (episode, first, last, deletion).
    `steps` (half of it a thought step) and `versions` (>= 2) size it otherwise."""
    from agent.engine import Engine
    from envs.registry import family
    from sessions.store import Store
    from trajectory.records import AgentConfig

    eng = Engine(Store(db))
    task = next(t for t in family("alfworld").list_tasks() if t.type == "pick_and_place_simple")
    ep, v = eng.start_episode(task, AgentConfig(model="gpt-3.5-turbo-instruct", max_steps=60), {"wording": "paper"})
    i = 0
    while len(eng.store.versions.steps(v.id)) < steps:
        acts = [a for a in eng.envs.admissible_actions(v.id) or [] if a.startswith("go to ")] or ["look"]
        cmd = acts[i % len(acts)]
        i += 1
        eng.human_step(v.id, thought=f"Step {i}: I will try {cmd} and look for the object there.", action=cmd)
    last = v
    for j in range(versions - 2):
        k = 1 + 2 * (j * 2 + 1)  # thought steps (odd indices)
        last = eng.editor.edit(
            last.id, k, "rewrite_thought", f"Edited thought {j}: search more carefully.", keep_rest=True
        )
    gone = eng.editor.edit(v.id, steps // 2, "delete_thought", keep_rest=True)  # step 25: a thought
    eng.human_step(gone.id, thought="One more thought after the deletion.")
    assert len(eng.store.versions.of_episode(ep.id)) == versions
    assert len(eng.store.versions.steps(last.id)) == len(eng.store.versions.steps(gone.id)) == steps
    eng.store.close()
    return ep.id, v.id, last.id, gone.id


def build_long(db: Path, steps: int) -> tuple[int, int]:
    """One episode with one version of `steps` person steps (thought + action) on the game."""
    from agent.engine import Engine
    from envs.registry import family
    from sessions.store import Store
    from trajectory.records import AgentConfig

    eng = Engine(Store(db))
    task = next(t for t in family("alfworld").list_tasks() if t.type == "pick_and_place_simple")
    ep, v = eng.start_episode(
        task, AgentConfig(model="gpt-3.5-turbo-instruct", max_steps=steps + 10), {"wording": "paper"}
    )
    acts = [a for a in eng.envs.admissible_actions(v.id) or [] if a.startswith("go to ")] or ["look"]
    for i in range(steps):
        eng.human_step(v.id, action=acts[i % len(acts)])
    eng.store.close()
    return ep.id, v.id


def shown_obs(at) -> int:
    """Observations on the page: the live steps' text elements and the earlier steps' block."""
    return sum(1 for t in at.text if t.value.startswith("Obs ")) + sum(
        h.proto.body.count('<div class="ov-line">Obs ') for h in at.get("html")
    )


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


def editor_small(page, db: Path, runs: int) -> dict:
    """A 22-step version of an episode with 5 versions (the size the app's tests draw): a
    warm rerun, and a click on a step's Edit then on Cancel (what a person waits for)."""
    ep, _, last, _ = build(db, SMALL_STEPS, SMALL_VERSIONS)
    cpu = ScriptCPU()
    ed = page("editor", episode=ep, version=last)
    ed.run()
    assert not ed.exception, ed.exception
    assert shown_obs(ed) == SMALL_STEPS
    cpu.runs.clear()
    walls = [timed(ed.run) for _ in range(runs)]
    reruns = list(cpu.runs)
    clicks, k = [], SMALL_STEPS - 1
    cpu.runs.clear()
    for _ in range(runs):
        clicks.append(timed(lambda: ed.button(key=f"editbtn_{last}_{k}").click().run()))
        assert not ed.exception and ed.radio(key=f"ed_kind_{last}_{k}"), ed.exception
        clicks.append(timed(lambda: ed.button(key=f"ed_cancel_{last}_{k}").click().run()))
        assert not ed.exception and not [r for r in ed.radio if r.key == f"ed_kind_{last}_{k}"]
    print(
        f"editor, {SMALL_STEPS}-step version of {SMALL_VERSIONS}: rerun median {statistics.median(walls):.0f} ms "
        f"(script CPU {statistics.median(reruns):.0f} ms); Edit or Cancel click median "
        f"{statistics.median(clicks):.0f} ms (script CPU {statistics.median(cpu.runs):.0f} ms)",
        file=sys.stderr,
    )
    return {
        "editor_22_rerun_ms": round(statistics.median(walls), 1),
        "editor_22_rerun_cpu_ms": round(statistics.median(reruns), 1),
        "edit_click_ms": round(statistics.median(clicks), 1),
        "edit_click_cpu_ms": round(statistics.median(cpu.runs), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--experiments", type=int, default=20)
    ap.add_argument("--tasks", type=int, default=500)
    ap.add_argument("--long", type=int, default=200, help="steps of the long Editor version")
    ap.add_argument("--editor-only", action="store_true", help="time the Editor only (no Compare, Episodes, ...)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="react-editor-bench-")
    db = Path(tmp) / "bench.db"
    os.environ["REACT_EDITOR_DB"] = str(db)
    t0 = time.perf_counter()
    ep, first, last, gone = build(db)
    print(
        f"built episode {ep}: {VERSIONS} versions, v{first}, v{last} and v{gone} (a deletion) have {STEPS} steps "
        f"({time.perf_counter() - t0:.1f} s)",
        file=sys.stderr,
    )

    from streamlit.testing.v1 import AppTest

    share_script_cache()

    app = str(ROOT / "app.py")

    shared: list = []  # AppTest scans every installed package for components once per
    # instance (~0.4 s); a server does it once at startup, so fresh sessions here share one scan

    def page(name: str, **query) -> AppTest:
        at = AppTest.from_file(app, default_timeout=120)
        if shared:
            at._bidi_component_manager = shared[0]
        at.switch_page(f"app_pages/{name}.py")
        for k, val in query.items():
            at.query_params[k] = str(val)
        return at

    # Editor: the first run builds the environment (replay); then reruns are what a person waits for
    ed = page("editor", episode=ep, version=last)
    first_ms = timed(ed.run)
    assert not ed.exception, ed.exception
    shared.append(ed._bidi_component_manager)
    assert shown_obs(ed) == STEPS
    editor = [timed(ed.run) for _ in range(args.runs)]
    print(
        f"editor: first open {first_ms:.0f} ms; rerun median {statistics.median(editor):.0f} ms, "
        f"max {max(editor):.0f} ms",
        file=sys.stderr,
    )
    small = editor_small(page, db, args.runs)
    if args.editor_only:
        print(json.dumps({"editor_rerun_ms": round(statistics.median(editor), 1), **small}))
        return

    # Compare: opening the page fresh each time (a new session), two 50-step versions
    def open_compare(right: int, rows: int) -> None:
        at = page("compare", episode=ep, left=first, right=right)
        at.run()
        assert not at.exception, at.exception
        body = at.get("html")[0].proto.body
        assert body.count("<tr class=") == rows, body.count("<tr class=")
        if right == gone:  # aligned by identity: one deleted row, the rest match
            assert body.count('<tr class="rd-edited rd-deleted">') == 1 and "<del" not in body

    open_compare(last, STEPS)  # warm the imports of the page module
    compare = [timed(lambda: open_compare(last, STEPS)) for _ in range(args.runs)]
    print(f"compare: open median {statistics.median(compare):.0f} ms, max {max(compare):.0f} ms", file=sys.stderr)
    deletion = [timed(lambda: open_compare(gone, STEPS + 1)) for _ in range(args.runs)]
    print(
        f"compare with a deletion: open median {statistics.median(deletion):.0f} ms, max {max(deletion):.0f} ms",
        file=sys.stderr,
    )
    long_ep, long_v = build_long(db, args.long)
    ed2 = page("editor", episode=long_ep, version=long_v)
    timed(ed2.run)
    assert not ed2.exception, ed2.exception
    assert shown_obs(ed2) == args.long
    editor_200 = [timed(ed2.run) for _ in range(args.runs)]
    print(
        f"editor, {args.long}-step version: rerun median {statistics.median(editor_200):.0f} ms, "
        f"max {max(editor_200):.0f} ms",
        file=sys.stderr,
    )

    xdb = Path(tmp) / "experiments.db"
    t0 = time.perf_counter()
    _experiments_db.build(xdb, args.experiments, args.tasks)
    print(
        f"built {args.experiments} experiments x {args.tasks} tasks ({time.perf_counter() - t0:.1f} s)", file=sys.stderr
    )
    os.environ["REACT_EDITOR_DB"] = str(xdb)
    eps = page("episodes")
    timed(eps.run)
    assert not eps.exception, eps.exception
    episodes = [timed(eps.run) for _ in range(args.runs)]
    print(
        f"episodes page ({args.experiments * args.tasks:,} episodes): rerun median "
        f"{statistics.median(episodes):.0f} ms, max {max(episodes):.0f} ms",
        file=sys.stderr,
    )
    xp = page("experiments")
    cold = timed(xp.run)
    assert not xp.exception, xp.exception
    assert len(xp.dataframe[0].value) == args.experiments
    experiments = [timed(xp.run) for _ in range(args.runs)]
    print(
        f"experiments page: first open {cold:.0f} ms (computes and caches every summary); rerun median "
        f"{statistics.median(experiments):.0f} ms, max {max(experiments):.0f} ms",
        file=sys.stderr,
    )
    print(
        json.dumps(
            {
                "editor_rerun_ms": round(statistics.median(editor), 1),
                **small,
                "editor_200_rerun_ms": round(statistics.median(editor_200), 1),
                "compare_ms": round(statistics.median(compare), 1),
                "compare_deletion_ms": round(statistics.median(deletion), 1),
                "episodes_page_ms": round(statistics.median(episodes), 1),
                "experiments_page_ms": round(statistics.median(experiments), 1),  # reruns (summaries cached)
                "experiments_page_cold_ms": round(cold, 1),
            }
        )
    )  # first open: computes every summary


if __name__ == "__main__":
    main()
