"""Benchmark: how the store answers as it grows (issue 44) - 10k, 100k and, on request, 1M versions.

For each size it builds the bulk database (`_bulk.py`: ALFWorld episodes of a 30-step version and
a branch at step 15, so two versions per episode) plus one episode with a rollout group of
`--rollouts` finished versions, then reports, per size:
- build_s, db_mb: the build's wall time and the database's size;
- cli: the wall time (ms), CPU time (ms: less moved by a loaded machine) and peak memory (MB, the process's max RSS) of the real commands a
  person waits for, each in a fresh process as typed: `episodes`, `episodes --json`,
  `versions EP` of a bulk episode and of the rollout episode, `show EP`, `jobs`,
  `experiment list`, `search WORD`;
- search: p50 / p90 / max (ms) of `sessions.search.search` in-process over a query mix like
  `benchmarks/search.py`'s, each query `--runs` times;
- app: each page's script CPU per rerun (ms) and its first open, through streamlit's AppTest:
  Episodes, Versions of a bulk episode and of the rollout episode, Experiments;
and, last, `growth`: each figure at the largest size over the same figure at the smallest.
Prints a table per size and, LAST, one JSON object.

    python benchmarks/scale.py [--sizes 10000,100000] [--rollouts 1000] [--runs 3] [--keep DIR [--reuse]]
    python benchmarks/scale.py --sizes 1000000 --keep /big/dir   # the 1M build: on request only

Targets (issue 44, 2 cores): each listing within 0.5 s at 100k; search p50 <= 50 ms and
p90 <= 100 ms; growth from 10k to 100k at most 2x for what a person waits for."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _app_timing import ScriptCPU, share_script_cache  # noqa: E402,I001  (before _root, like _bulk)
from _bulk import build  # noqa: E402,I001  (before _root, which takes this folder off sys.path)
from _root import ROOT  # noqa: E402  (repo root on sys.path; see _root.py)

QUERIES = [
    ("mug", {}),
    ("cabinet", {}),
    ('"cabinet 3"', {}),
    ('"put a mug 4321"', {}),
    ("spoon AND plate", {}),
    ("cup 17", {}),
    ("fridg*", {}),
    ("observation: spoon", {}),
    ("countertop OR drawer", {}),
    ("zebra", {}),
    ("mug", {"outcome": "unfinished"}),
    ("cabinet 5", {"env": "alfworld"}),
]


def add_rollouts(db: Path, n: int) -> int:
    """One more episode whose first version has a resample group of `n` finished rollouts
    (each a 4-step version, half of them successes). Returns the episode id."""
    from sessions import rollouts
    from sessions.store import Store
    from trajectory.records import AgentConfig, Outcome, Step, Task

    store = Store(db)
    config = AgentConfig(model="bench-model", base_url="http://127.0.0.1:1/v1", temperature=0.7)
    task = Task(
        env="alfworld", id="bench/rollouts", type="pick_and_place_simple", text="Your task is to: put a mug in fridge."
    )
    with store.transaction():
        ep, v = store.episodes.create(task, config, {"wording": "paper"})
        rows, v = store.versions.append(v.id, [Step(index=1, action="go to cabinet 1", observation="Nothing.")], [])
    group = rollouts.open_group(
        store, episode_id=ep.id, source_version=v.id, step=2, kind="resample", n=n, config=config
    )
    for pos in range(n):
        with store.transaction():
            child, _ = store.versions.branch(v, at_step=rows[0], steps=[])
            steps = [
                Step(index=i, action=f"go to cabinet {pos % 6 + 1}", observation=f"Cabinet {i} ({pos}).")
                for i in range(2, 5)
            ]
            store.versions.append(child.id, steps, [])
            store.versions.update(
                child.id, outcome=Outcome(done=True, success=pos % 2 == 0, reward=float(pos % 2 == 0))
            )
            rollouts.add_member(store, group.id, pos, child.id)
    store.close()
    return ep.id


def timed_cli(db: Path, argv: list[str], runs: int) -> dict:
    """The command's wall time (median of `runs`, ms) and peak RSS (MB), each in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REACT_EDITOR_DB": str(db)}
    code = (
        "import resource, sys; from react_editor.main import main; rc = main(sys.argv[1:]); "
        "u = resource.getrusage(resource.RUSAGE_SELF); "
        "sys.stderr.write('\\nRSS %d CPU %f\\n' % (u.ru_maxrss, u.ru_utime + u.ru_stime)); sys.exit(rc)"
    )
    walls, cpus, rss, out_bytes = [], [], 0, 0
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", code, *argv], env=env, capture_output=True, cwd=tempfile.gettempdir()
        )
        walls.append((time.perf_counter() - t0) * 1000)
        if proc.returncode != 0:
            raise SystemExit(f"{argv}: exit {proc.returncode}: {proc.stderr.decode()[-300:]}")
        tail = proc.stderr.decode().rsplit("RSS ", 1)[1].split()
        rss, cpus = max(rss, int(tail[0]) // 1024), cpus + [float(tail[2]) * 1000]
        out_bytes = len(proc.stdout)
    return {
        "ms": round(statistics.median(walls), 1),
        "cpu_ms": round(statistics.median(cpus), 1),
        "mb": rss,
        "stdout_kb": round(out_bytes / 1024, 1),
    }


def search_times(db: Path, runs: int) -> dict:
    from sessions.search import search
    from sessions.store import Store

    store = Store(db, readonly=True)
    times = []
    for query, filters in QUERIES:
        for _ in range(runs):
            t0 = time.perf_counter()
            search(store, query, **filters)
            times.append((time.perf_counter() - t0) * 1000)
    store.close()
    times.sort()
    return {
        "p50_ms": round(statistics.median(times), 1),
        "p90_ms": round(times[int(0.9 * (len(times) - 1))], 1),
        "max_ms": round(times[-1], 1),
    }


def app_times(db: Path, rollout_ep: int, runs: int) -> dict:
    """Script CPU (ms, median of `runs` reruns after a first open) of each app page a person
    opens on this store, in-process through streamlit's AppTest (benchmarks/ui.py's method)."""
    os.environ["REACT_EDITOR_DB"] = str(db)
    from streamlit.testing.v1 import AppTest

    share_script_cache()
    cpu = ScriptCPU()
    pages = {
        "episodes": ("episodes", {}),
        "versions (bulk episode)": ("versions", {"episode": 1}),
        "versions (1,000 rollouts)": ("versions", {"episode": rollout_ep}),
        "experiments": ("experiments", {}),
    }
    out = {}
    for name, (page, query) in pages.items():
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
        at.switch_page(f"app_pages/{page}.py")
        for k, v in query.items():
            at.query_params[k] = str(v)
        t0 = time.perf_counter()
        at.run()
        first = (time.perf_counter() - t0) * 1000
        if at.exception:
            raise SystemExit(f"{name}: {at.exception}")
        cpu.runs.clear()
        for _ in range(runs):
            at.run()
        out[name] = {"rerun_cpu_ms": round(statistics.median(cpu.runs), 1), "first_open_ms": round(first, 1)}
    return out


def _child(*argv: str) -> str:
    """This script in a child process (its last stdout line): the parent stays small, since a
    child's peak memory counts the memory of the process it was started from."""
    proc = subprocess.run(
        [sys.executable, __file__, *argv], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    if proc.returncode != 0:
        raise SystemExit(f"{argv}: {proc.stderr[-500:]}")
    return proc.stdout.strip().splitlines()[-1]


def measure(db: Path, rollout_ep: int, runs: int) -> dict:
    commands = {
        "episodes": ["episodes"],
        "episodes --json": ["episodes", "--json"],
        "versions (bulk episode)": ["versions", "1"],
        "versions (1,000 rollouts)": ["versions", str(rollout_ep)],
        "versions --expand (rollouts)": ["versions", str(rollout_ep), "--expand"],
        "show": ["show", "1"],
        "jobs": ["jobs"],
        "experiment list": ["experiment", "list"],
        "search": ["search", "mug"],
    }
    return {
        "cli": {name: timed_cli(db, argv, runs) for name, argv in commands.items()},
        "search": json.loads(_child("--search", str(db), "--runs", str(runs))),
        "app": json.loads(_child("--app", str(db), "--rollout-episode", str(rollout_ep), "--runs", str(runs))),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000", help="versions, comma-separated (two per bulk episode)")
    ap.add_argument("--rollouts", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", default=None, help="keep the databases here")
    ap.add_argument("--reuse", action="store_true", help="with --keep: use the databases already there")
    ap.add_argument("--build", default=None, help=argparse.SUPPRESS)  # (a child's work: DB)
    ap.add_argument("--search", default=None, help=argparse.SUPPRESS)  # (a child's work: DB)
    ap.add_argument("--app", default=None, help=argparse.SUPPRESS)  # (a child's work: DB)
    ap.add_argument("--rollout-episode", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.build:
        build(Path(args.build), max(1, int(args.sizes) // 2))
        print(add_rollouts(Path(args.build), args.rollouts))
        return
    if args.search:
        print(json.dumps(search_times(Path(args.search), args.runs)))
        return
    if args.app:
        print(json.dumps(app_times(Path(args.app), args.rollout_episode, args.runs)))
        return
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}
    for size in [int(s) for s in args.sizes.split(",")]:
        db = work / f"scale-{size}.db"
        meta = work / f"scale-{size}.json"
        if not (args.reuse and db.exists() and meta.exists()):
            for p in (db, meta):
                p.unlink(missing_ok=True)
            t0 = time.perf_counter()
            ep = int(_child("--build", str(db), "--sizes", str(size), "--rollouts", str(args.rollouts)))
            meta.write_text(json.dumps({"rollout_episode": ep, "build_s": round(time.perf_counter() - t0, 1)}))
        info = json.loads(meta.read_text())
        out = {
            "build_s": info["build_s"],
            "db_mb": round(db.stat().st_size / 2**20, 1),
            **measure(db, info["rollout_episode"], args.runs),
        }
        results[str(size)] = out
        print(f"\n{size:,} versions: built in {out['build_s']} s, {out['db_mb']} MB", file=sys.stderr)
        for name, r in out["cli"].items():
            print(
                f"  {name:30s} {r['ms']:8.1f} ms  cpu {r['cpu_ms']:7.1f} ms  {r['mb']:5d} MB  {r['stdout_kb']:8.1f} kB out",
                file=sys.stderr,
            )
        s = out["search"]
        print(
            f"  search in-process              p50 {s['p50_ms']} ms  p90 {s['p90_ms']} ms  max {s['max_ms']} ms",
            file=sys.stderr,
        )
        for name, r in out["app"].items():
            print(
                f"  app: {name:25s} rerun cpu {r['rerun_cpu_ms']:7.1f} ms  first open {r['first_open_ms']:8.1f} ms",
                file=sys.stderr,
            )
    sizes = list(results)
    if len(sizes) > 1:
        lo, hi = results[sizes[0]], results[sizes[-1]]
        results["growth"] = {
            **{name: round(hi["cli"][name]["ms"] / lo["cli"][name]["ms"], 2) for name in lo["cli"]},
            "search_p50": round(hi["search"]["p50_ms"] / lo["search"]["p50_ms"], 2),
            "search_p90": round(hi["search"]["p90_ms"] / lo["search"]["p90_ms"], 2),
            **{
                f"app {name}": round(hi["app"][name]["rerun_cpu_ms"] / lo["app"][name]["rerun_cpu_ms"], 2)
                for name in lo["app"]
            },
        }
    print(json.dumps(results))


if __name__ == "__main__":
    main()
