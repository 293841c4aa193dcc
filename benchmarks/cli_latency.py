"""How fast does `react-editor` answer? Prints, last, one JSON object.

1. Read-only commands (`jobs`, `jobs stop N` of a finished job, `show`, `versions`, `episodes`)
   on a small database: wall time of the real command (`python -m react_editor ...` in a
   subprocess, as a person's shell runs it), `--runs` times each, p50 and max in ms, and the
   p50 of its CPU time (user + system: what it takes on a quiet machine). For
   scale, the same figures for `python -c pass` (the interpreter alone) and
   `python -c "import openai"` (what every command paid before it imported only what it needs).
2. `jobs stop N` during a run: a real `react-editor run` (HotpotQA, built-in task, the scripted
   model server in this process answering each call after `--latency` s) is stopped by
   `react-editor jobs stop N`; measured from the moment the stop command starts:
   `flag_landed_ms` (the job row's stop flag is committed; polled every 20 ms),
   `returned_ms` (the stop command exited), `job_final_ms` (the run's job row reads stopped),
   `run_ended_ms` (and its process exited), `flag_to_job_final_ms`, and `steps_after_flag`
   (steps the run committed after the flag).
   Repeated `--stops` times; p50 and max.

Usage: python benchmarks/cli_latency.py [--runs 7] [--stops 3] [--latency 0.3] [--reads jobs,show] [--code OTHER_CHECKOUT]
(`--runs 1 --stops 1 --latency 0.05 --reads jobs`: the smoke run of tests/benchmarks)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _root import ROOT

READS = (["jobs"], ["jobs", "stop", "1"], ["show", "1"], ["versions", "1"], ["episodes"])


CODE = [ROOT]  # the checkout whose command line is measured (`--code`: another one, e.g. main, to compare)


def _env(cache: Path) -> dict:
    """As an installed `react-editor` runs: with compiled bytecode (kept under the work folder,
    never beside the sources), whatever PYTHONDONTWRITEBYTECODE this shell has."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {
        **env,
        "PYTHONPATH": str(CODE[0]),
        "PYTHONPYCACHEPREFIX": str(cache.parent / "pycache"),
        "REACT_EDITOR_CACHE": str(cache),
        "OPENAI_API_KEY": "sk-bench",
    }


def _cli(args: list[str], env: dict, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "react_editor", *args],
        env=env,
        cwd=CODE[0],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def _wall(argv: list[str], env: dict) -> tuple[float, float]:
    """(wall ms, CPU ms) of one run of `argv`: the CPU time (user + system) is what the
    command costs on a quiet machine; the wall time is what a person waits on this one."""
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, cwd=CODE[0], capture_output=True, check=False)
    wall = (time.perf_counter() - t0) * 1000
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime) * 1000


def _stats(ms: list[float]) -> dict:
    return {"p50_ms": round(statistics.median(ms)), "max_ms": round(max(ms)), "runs": len(ms)}


def _timed(argv: list[str], env: dict, runs: int) -> dict:
    got = [_wall(argv, env) for _ in range(runs)]
    return {**_stats([w for w, _ in got]), "cpu_p50_ms": round(statistics.median(c for _, c in got))}


def _seed(db: Path, env: dict) -> None:
    """One HotpotQA episode with one human step, and one finished job (for `jobs stop 1`)."""
    for args in (
        ["run", "--env", "hotpotqa", "--task", "hp-002", "--human"],
        ["step", "1", "--action", "Search[Colorado orogeny]"],
    ):
        p = _cli([*args, "--db", str(db)], env)
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    with sqlite3.connect(db) as c:
        c.execute(
            "insert into jobs (kind, episode_id, owner, state, created_at, updated_at) "
            "values ('run', 1, 'bench:0', 'done', '', '')"
        )


def reads(work: Path, env: dict, runs: int, which: tuple[list[str], ...] = READS) -> dict:
    db = work / "reads.db"
    _seed(db, env)
    out = {}
    _wall([sys.executable, "-c", "import openai"], env)  # its bytecode, as for the commands below
    for label, argv in (
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ("python -c 'import openai'", [sys.executable, "-c", "import openai"]),
    ):
        out[label] = _timed(argv, env, runs)
    for args in which:
        argv = [sys.executable, "-m", "react_editor", *args, "--db", str(db)]
        _wall(argv, env)  # warm the OS file cache
        out["react-editor " + " ".join(args)] = _timed(argv, env, runs)
    return out


def _row(db: Path, sql: str, params=()):
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return c.execute(sql, params).fetchone()
    finally:
        c.close()


def _until(cond, timeout: float = 120.0, every: float = 0.02):
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(every)
    raise TimeoutError("timed out")


def one_stop(work: Path, env: dict, url: str, tag: str) -> dict:
    db = work / f"stop-{tag}.db"
    run = _cli(
        [
            "run",
            "--env",
            "hotpotqa",
            "--task",
            "hp-002",
            "--base-url",
            url,
            "--model",
            "bench",
            "--max-steps",
            "200",
            "--no-cache",
            "--db",
            str(db),
        ],
        env,
    )
    try:
        job = _until(
            lambda: (
                db.exists()
                and _safe(
                    lambda: _row(db, "select id from jobs where kind = 'run' and state = 'running' and done >= 3")
                )
            )
        )[0]
        t0 = time.perf_counter()
        stop = _cli(["jobs", "stop", str(job), "--db", str(db)], env)
        _until(lambda: _safe(lambda: _row(db, "select stop from jobs where id = ?", [job])[0]))
        flag = time.perf_counter()
        steps_at_flag = _row(db, "select count(*) from steps")[0]
        stop.communicate(timeout=300)
        returned = time.perf_counter()
        _until(lambda: _row(db, "select state from jobs where id = ?", [job])[0] in ("stopped", "done", "failed"))
        final = time.perf_counter()
        run.wait(timeout=300)
        ended = time.perf_counter()
        state = _row(db, "select state from jobs where id = ?", [job])[0]
        steps_after = _row(db, "select count(*) from steps")[0] - steps_at_flag
    finally:
        if run.poll() is None:
            run.kill()
        run.communicate()
    ms = lambda t: round((t - t0) * 1000)  # noqa: E731
    return {
        "flag_landed_ms": ms(flag),
        "returned_ms": ms(returned),
        "job_final_ms": ms(final),
        "run_ended_ms": ms(ended),
        "steps_after_flag": steps_after,
        "stop_exit": stop.returncode,
        "job_state": state,
    }


def _safe(fn):
    try:
        return fn()
    except sqlite3.Error:  # the run is creating the database
        return None


def stops(work: Path, env: dict, n: int, latency: float) -> dict:
    sys.path.insert(0, str(ROOT))
    from tests.experiment_agents import wiki_agent
    from tests.scripted_server import ScriptedLLM

    llm = ScriptedLLM().start()
    llm.set_responder(wiki_agent({}, latency_s=latency, react_steps=10_000))
    try:
        each = [one_stop(work, env, llm.base_url, str(i)) for i in range(n)]
    finally:
        llm.stop()
    keys = ("flag_landed_ms", "returned_ms", "job_final_ms", "run_ended_ms")
    summary = {k: _stats([e[k] for e in each]) for k in keys}
    summary["flag_to_job_final_ms"] = _stats([e["job_final_ms"] - e["flag_landed_ms"] for e in each])
    summary["steps_after_flag"] = [e["steps_after_flag"] for e in each]
    summary["job_states"] = [e["job_state"] for e in each]
    summary["model_latency_s"] = latency
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--stops", type=int, default=3)
    ap.add_argument("--latency", type=float, default=0.3, help="seconds the scripted model takes per call")
    ap.add_argument("--code", default=None, help="measure this checkout's command line instead (e.g. ../main)")
    ap.add_argument(
        "--reads",
        default=None,
        metavar="WORDS",
        help="only these read commands, comma-separated (default all: " + ",".join(" ".join(r) for r in READS) + ")",
    )
    a = ap.parse_args()
    which = READS if a.reads is None else tuple(r for r in READS if " ".join(r) in a.reads.split(","))
    if not which:
        ap.error(f"--reads: none of {a.reads!r} is a read command measured here")
    if a.code:
        CODE[0] = Path(a.code).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        env = _env(work / "cache")
        out = {
            "code": str(CODE[0]),
            "cpus": os.cpu_count(),
            "load_avg_1m": round(os.getloadavg()[0], 2),
            "reads": reads(work, env, a.runs, which),
            "stop_during_run": stops(work, env, a.stops, a.latency),
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
