"""Benchmark: export 10,000 versions of 30 steps to jsonl, and to the training formats.

Builds the bulk database (`_bulk.py`: 10,000 versions of 30 steps), then exports everything as jsonl in a child process that measures the wall time and
the peak-RSS growth of the export (ru_maxrss after minus the RSS before it starts).
Prints, last, one JSON object: {"export_10k_s": wall s, "export_cpu_s": the export's CPU s, "export_peak_mb": ...,
"export_peak_delta_mb": ..., "export_second_process_peak_mb": ..., "split": ..., "versions": ...} (targets: <= 5 s, next 2.5 s; <= 200 MB).

On a shared machine the wall time says more about the load than about the code: compare two
trees by running them alternately on one kept database (`--keep DIR` once, then `--keep DIR
--reuse` from each tree; building the database takes minutes) and read the ratio.

A large export runs in two processes on two cores or more (`split` says whether it did; the
CPU then counts both, the second process's peak is reported apart); `--split on|off` forces
either way, to measure both.

`--formats jsonl,chat-sft,dpo,kto,steps` (or `all`) exports the same database in each format, one child
process per format, after giving each episode what the training formats read (`enrich`: the branch at
step 15 becomes a thought edit that succeeds where the original failed, and a resample group from step
16 with 8 finished rollouts). Its figures go under "formats": wall s, CPU s, peak MB and the wall and CPU
time as multiples of the jsonl export's (`x_jsonl`, `x_jsonl_cpu`; target: 1.5x or less).

    python benchmarks/export.py [--episodes 5000] [--keep DIR [--reuse]] [--split auto|on|off] [--formats all]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _bulk import build  # noqa: E402  (before _root, which takes this folder off sys.path)
from _root import ROOT  # noqa: E402  (repo root on sys.path; see _root.py)


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


TRAINING = ("chat-sft", "dpo", "kto", "steps")


def enrich(db: Path) -> None:
    """What the training formats read, on every bulk episode: v2 (the branch at step 15) made by
    a thought edit at 16, a success where v1 failed; a resample group of v1 from step 16 with 8
    finished rollouts (its counts written as the store's triggers would)."""
    from sessions.store import Store
    from trajectory.records import AgentConfig, EditInfo, Outcome

    store = Store(db)
    if store.db.execute("select count(*) from rollout_groups").fetchone()[0]:
        store.close()
        return
    edit = json.dumps([EditInfo(kind="rewrite_thought", index=16).model_dump(mode="json")])
    ok = Outcome(done=True, success=True, reward=1.0).model_dump_json()
    bad = Outcome(done=True, success=False).model_dump_json()
    config = AgentConfig(model="bench-model", temperature=0.7).model_dump_json()
    with store.transaction():
        # a branched version is frozen (the store's trigger): lifted while the bulk rows are rewritten
        frozen = store.db.execute(
            "select name, sql from sqlite_master where type = 'trigger' and name like '%frozen%'"
        ).fetchall()
        for name, _ in frozen:
            store.db.execute(f"drop trigger [{name}]")
        rows = store.db.execute("select episode_id, min(id), max(id) from versions group by episode_id").fetchall()
        for ep, v1, v2 in rows:
            store.db.execute("update versions set outcome = ? where id = ?", [bad, v1])
            store.db.execute(
                "update versions set outcome = ?, edits = ?, parent_version = ? where id = ?", [ok, edit, v1, v2]
            )
            store.db.execute(
                "insert into rollout_groups (key, episode_id, source_version, step, kind, edit, n, config, "
                "created_at, updated_at, finished, successes) values (?,?,?,?,?,?,?,?,?,?,?,?)",
                [
                    f"bench-{ep}",
                    ep,
                    v1,
                    16,
                    "resample",
                    None,
                    8,
                    config,
                    "2026-01-01T00:00:00Z",
                    "2026-01-01T00:00:00Z",
                    8,
                    ep % 9,
                ],
            )
        for _, sql in frozen:
            store.db.execute(sql)
    store.close()


def child(db: str, out: str, split_mode: str, fmt: str = "jsonl") -> None:
    import importlib

    import envs.registry  # noqa: F401 - the families' transcripts (the training formats read them)
    from sessions.exchange import Filters, export
    from sessions.store import Store

    split = importlib.import_module("sessions.exchange.split")
    split.SPLIT = {"auto": None, "on": True, "off": False}[split_mode]
    store = Store(db)
    base = _rss_mb()
    t0, c0, k0 = time.perf_counter(), time.process_time(), _children_cpu()
    rep = export(store, fmt, out, filters=Filters(all_versions=True))
    dt, cpu, kids = time.perf_counter() - t0, time.process_time() - c0, _children_cpu() - k0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kid_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024 if kids else 0.0
    print(
        json.dumps(
            {
                "seconds": dt,
                "cpu_seconds": cpu + kids,
                "peak_mb": peak,
                "delta_mb": max(0.0, peak - base),
                "second_process_peak_mb": kid_peak,
                "split": kids > 0,
                "versions": rep.versions,
                "records": rep.records,
                "steps": rep.steps,
                "bytes": rep.bytes,
            }
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=5000)
    ap.add_argument("--keep", default=None, help="keep the database and output here")
    ap.add_argument("--reuse", action="store_true", help="with --keep: export the database an earlier run kept there")
    ap.add_argument(
        "--split",
        choices=("auto", "on", "off"),
        default="auto",
        help="the export in two processes: auto (large, two cores or more), on or off",
    )
    ap.add_argument(
        "--formats",
        default="jsonl",
        help="comma list of jsonl, chat-sft, dpo, kto, steps (or all); each beside the jsonl export",
    )
    ap.add_argument("--child", nargs=2, metavar=("DB", "OUT"), help=argparse.SUPPRESS)
    ap.add_argument("--child-format", default="jsonl", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child, args.split, args.child_format)
        return
    formats = list(TRAINING) if args.formats == "all" else [f for f in args.formats.split(",") if f and f != "jsonl"]
    if any(f not in TRAINING for f in formats):
        ap.error(f"--formats: jsonl or one of {', '.join(TRAINING)}")
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-export-"))
    work.mkdir(parents=True, exist_ok=True)
    db, out = work / "bench.db", work / "out.jsonl"
    if not (args.reuse and args.keep and db.exists()):
        if db.exists():
            db.unlink()
        t0 = time.perf_counter()
        build(db, args.episodes)
        print(f"built {args.episodes * 2} versions in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    if formats:
        enrich(db)  # before the jsonl export too: every format reads the same database
    res = subprocess.run(
        [sys.executable, __file__, "--child", str(db), str(out), "--split", args.split],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    child_out = json.loads(res.stdout.strip().splitlines()[-1])
    per: dict[str, dict] = {}
    for fmt in formats:
        r = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                str(db),
                str(work / f"out.{fmt}.jsonl"),
                "--split",
                args.split,
                "--child-format",
                fmt,
            ],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        got = json.loads(r.stdout.strip().splitlines()[-1])
        per[fmt] = {
            "s": round(got["seconds"], 2),
            "cpu_s": round(got["cpu_seconds"], 2),
            "peak_mb": round(got["peak_mb"], 1),
            "peak_delta_mb": round(got["delta_mb"], 1),
            "records": got["records"],
            "mb": round(got["bytes"] / 2**20, 1),
            "x_jsonl": round(got["seconds"] / child_out["seconds"], 2) if child_out["seconds"] else None,
            # CPU: what a loaded machine's wall time does not show (the jsonl export's second process counted)
            "x_jsonl_cpu": round(got["cpu_seconds"] / child_out["cpu_seconds"], 2)
            if child_out["cpu_seconds"]
            else None,
        }
        print(f"{fmt}: {got['records']} records in {got['seconds']:.2f} s", file=sys.stderr)
    print(
        f"exported {child_out['versions']} versions, {child_out['steps']} steps, {child_out['bytes'] / 2**20:.0f} MB",
        file=sys.stderr,
    )
    if not args.keep:
        for p in work.iterdir():
            p.unlink()
        work.rmdir()
    # peak: the exporting process's whole peak RSS (interpreter and libraries included);
    # delta: what the export itself added on top of the process before it started
    # cpu: the export's own CPU time (its second process's included) - what a loaded machine's wall time does not show
    print(
        json.dumps(
            {
                "export_10k_s": round(child_out["seconds"], 2),
                "export_cpu_s": round(child_out["cpu_seconds"], 2),
                "export_peak_mb": round(child_out["peak_mb"], 1),
                "export_peak_delta_mb": round(child_out["delta_mb"], 1),
                "export_second_process_peak_mb": round(child_out["second_process_peak_mb"], 1),
                "split": child_out["split"],
                "versions": child_out["versions"],
                **({"formats": per} if per else {}),
            }
        )
    )


if __name__ == "__main__":
    main()
