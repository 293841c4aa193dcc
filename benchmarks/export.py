"""Benchmark: export 10,000 versions of 30 steps to jsonl.

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

    python benchmarks/export.py [--episodes 5000] [--keep DIR [--reuse]] [--split auto|on|off]
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


def child(db: str, out: str, split_mode: str) -> None:
    import importlib

    from sessions.exchange import Filters, export
    from sessions.store import Store

    split = importlib.import_module("sessions.exchange.split")
    split.SPLIT = {"auto": None, "on": True, "off": False}[split_mode]
    store = Store(db)
    base = _rss_mb()
    t0, c0, k0 = time.perf_counter(), time.process_time(), _children_cpu()
    rep = export(store, "jsonl", out, filters=Filters(all_versions=True))
    dt, cpu, kids = time.perf_counter() - t0, time.process_time() - c0, _children_cpu() - k0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kid_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024 if kids else 0.0
    print(json.dumps({"seconds": dt, "cpu_seconds": cpu + kids, "peak_mb": peak, "delta_mb": max(0.0, peak - base),
                      "second_process_peak_mb": kid_peak, "split": kids > 0, "versions": rep.versions,
                      "records": rep.records, "steps": rep.steps, "bytes": rep.bytes}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=5000)
    ap.add_argument("--keep", default=None, help="keep the database and output here")
    ap.add_argument("--reuse", action="store_true", help="with --keep: export the database an earlier run kept there")
    ap.add_argument("--split", choices=("auto", "on", "off"), default="auto",
                    help="the export in two processes: auto (large, two cores or more), on or off")
    ap.add_argument("--child", nargs=2, metavar=("DB", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child, args.split)
        return
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-export-"))
    work.mkdir(parents=True, exist_ok=True)
    db, out = work / "bench.db", work / "out.jsonl"
    if not (args.reuse and args.keep and db.exists()):
        if db.exists():
            db.unlink()
        t0 = time.perf_counter()
        build(db, args.episodes)
        print(f"built {args.episodes * 2} versions in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    res = subprocess.run([sys.executable, __file__, "--child", str(db), str(out), "--split", args.split],
                         capture_output=True, text=True,
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
    # cpu: the export's own CPU time (its second process's included) - what a loaded machine's wall time does not show
    print(json.dumps({"export_10k_s": round(child_out["seconds"], 2), "export_cpu_s": round(child_out["cpu_seconds"], 2),
                      "export_peak_mb": round(child_out["peak_mb"], 1),
                      "export_peak_delta_mb": round(child_out["delta_mb"], 1),
                      "export_second_process_peak_mb": round(child_out["second_process_peak_mb"], 1),
                      "split": child_out["split"], "versions": child_out["versions"]}))


if __name__ == "__main__":
    main()
