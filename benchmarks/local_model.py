"""The built-in model (SmolLM2-135M-Instruct, llama-cpp-python's server as a child): how long a newcomer
waits and what a step costs. Prints, last, one JSON object.

1. `app_up_s`: `react-editor app --no-browser` launched until its page answers (HTTP 200 on the
   tokenised URL it prints).
2. `first_step_s`: then the app's first Step, measured on the library path the app takes (`Engine.step`
   in a fresh process with no server running: the server starts, loads the GGUF, evaluates the first
   prompt, answers). `launch_to_first_step_s` is the sum. (The browser round trip is not in it.)
3. `s_per_step`: median seconds per model step after the first, on an ALFWorld built-in game and a
   HotpotQA question (temperature 0, no cache), from the calls' latencies; also their mean.
4. `prompt_tokens_evaluated`: per step after the first, the tokens llama.cpp evaluated (its log:
   "prompt eval time = ... / N tokens") against the prompt's tokens (the usage):
   median N and median fraction (prefix reuse).
5. `peak_rss_mb`: the server's peak resident memory (VmHWM) and this process's.
6. `--threads`: prompt evaluation (400 tokens) and generation (20 tokens) in seconds for thread settings
   (generation/prompt threads and OpenMP's wait policy: llama-cpp-python's default 1/2 on 2 cores, 1/1,
   and 1/2 with passive waits, which the server uses), alternated over `--rounds` fresh processes, each
   figure's median. Run it on a quiet machine and on a busy one.

Usage: python benchmarks/local_model.py [--steps 8] [--skip-app] [--threads] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from _root import ROOT

ROOM = "pick_and_place_simple-CD-None-Desk-307/trial_G1_0002"
QUESTION = "hp-001"


def _clean_env(cache: Path, db: Path) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("OPENAI_") and k not in ("REACT_EDITOR_MODEL", "REACT_EDITOR_LOCAL_MODEL")
    }
    return {**env, "REACT_EDITOR_CACHE": str(cache), "REACT_EDITOR_DB": str(db), "PYTHONPATH": str(ROOT)}


def app_up(work: Path, port: int = 8765) -> float:
    env = _clean_env(work / "cache", work / "app.db")
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "react_editor", "app", "--no-browser", "--port", str(port)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = None
        while url is None:
            line = proc.stdout.readline()
            if not line:
                raise SystemExit("the app exited before printing its URL")
            found = re.search(r"http://\S+", line)
            url = found.group(0) if found else None
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        while True:
            try:
                with opener.open(url, timeout=2) as resp:
                    if resp.status == 200:
                        return time.perf_counter() - t0
            except OSError:
                time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(20)


def _episode_steps(kind: str, task: str, steps: int, work: Path) -> dict:
    """Run in this process: an Engine on the built-in model, `steps` steps one at a time."""
    from agent import local_server
    from agent.engine import Engine
    from agent.local_model import config_name
    from envs.registry import family
    from sessions.store import Store
    from trajectory.records import AgentConfig

    engine = Engine(Store(str(work / f"{kind}.db")))
    cfg = AgentConfig(model=config_name(), cache=False, max_steps=steps + 1, timeout_s=600)
    _, v = engine.start_episode(family(kind).get_task(task), cfg, {})
    t0 = time.perf_counter()
    first = None
    for _ in range(steps):
        rep = engine.step(v.id)
        first = first or time.perf_counter() - t0
        if rep.version.outcome.done:
            break
    calls = [c for c in engine.store.calls.of_episode(v.episode_id) if c.error is None]
    (served,) = local_server._SERVED.values()
    return {
        "first_s": first,
        "latencies_s": [c.latency_ms / 1000 for c in calls],
        "prompt_tokens": [c.usage.prompt_tokens for c in calls],
        "log": served.log,
        "pid": served.pid,
    }


def _evaluated(log: str, offset: int) -> list[int]:
    """Tokens llama.cpp evaluated per request ("prompt eval time = ... / N tokens"), from byte `offset` of its log."""
    with open(log, "rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    return [int(n) for n in re.findall(r"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens", text)]


def _hwm_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def steps_figures(work: Path, steps: int) -> dict:
    os.environ.update(_clean_env(work / "cache", work / "x.db"))
    for var in [k for k in os.environ if k.startswith("OPENAI_")] + ["REACT_EDITOR_LOCAL_MODEL"]:
        os.environ.pop(var, None)
    out: dict = {}
    for kind, task in (("alfworld", ROOM), ("hotpotqa", QUESTION)):
        try:
            before = os.path.getsize(_server_log())
        except (OSError, StopIteration):
            before = 0
        r = _episode_steps(kind, task, steps, work)
        later = r["latencies_s"][1:]
        evaluated = _evaluated(r["log"], before)  # this episode's requests, in order
        ratios = [n / p for n, p in zip(evaluated[1:], r["prompt_tokens"][1:]) if p]
        out[kind] = {
            "first_step_s": round(r["first_s"], 2),
            "steps": len(r["latencies_s"]),
            "s_per_step_median": round(statistics.median(later), 3) if later else None,
            "s_per_step_mean": round(statistics.mean(later), 3) if later else None,
            "prompt_tokens_first": r["prompt_tokens"][0] if r["prompt_tokens"] else None,
            "evaluated_per_step_after_first": evaluated[1:],
            "evaluated_median": statistics.median(evaluated[1:]) if evaluated[1:] else None,
            "evaluated_fraction_median": round(statistics.median(ratios), 4) if ratios else None,
        }
        out["server_pid"] = r["pid"]
    out["server_peak_rss_mb"] = _hwm_mb(out.pop("server_pid"))
    out["client_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return out


def _server_log() -> str:
    from agent import local_server

    return next(iter(local_server._SERVED.values())).log


THREADS_CODE = r"""
import sys, time
from llama_cpp import Llama
nt, ntb = int(sys.argv[1]), int(sys.argv[2])
m = Llama(model_path=sys.argv[3], n_ctx=2048, n_threads=nt, n_threads_batch=ntb, verbose=False, seed=0)
toks = m.tokenize(("The quick brown fox jumps over the lazy dog. " * 40).encode())[:400]
t = time.perf_counter(); m.eval(toks); pe = time.perf_counter() - t
t = time.perf_counter()
for i in range(20):
    m.eval([toks[i]])
print(pe, time.perf_counter() - t)
"""


def threads_figures(rounds: int) -> dict:
    from agent.local_model import builtin_gguf

    path = str(builtin_gguf())
    variants = {
        "1/2 (llama-cpp-python's default on 2 cores)": ("1", "2", "active"),
        "1/1": ("1", "1", "active"),
        "1/2 OMP_WAIT_POLICY=passive (the server's)": ("1", "2", "passive"),
    }
    got: dict = {k: [] for k in variants}
    for _ in range(rounds):
        for name, (nt, ntb, wait) in variants.items():
            out = subprocess.run(
                [sys.executable, "-c", THREADS_CODE, nt, ntb, path],
                capture_output=True,
                env={**os.environ, "OMP_WAIT_POLICY": wait},
                text=True,
                check=True,
            ).stdout.split()
            got[name].append([float(x) for x in out])
    load = open("/proc/loadavg").read().split()[0]
    return {
        "load_average_1min": float(load),
        **{
            name: {
                "prompt_400_tokens_s": round(statistics.median(r[0] for r in rs), 2),
                "generate_20_tokens_s": round(statistics.median(r[1] for r in rs), 2),
            }
            for name, rs in got.items()
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--skip-app", action="store_true")
    ap.add_argument("--threads", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    result: dict = {
        "cpus": os.cpu_count(),
        "load_average_1min_at_start": float(open("/proc/loadavg").read().split()[0]),
    }
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.threads:
            result["threads"] = threads_figures(args.rounds)
        if not args.skip_app:
            result["app_up_s"] = round(app_up(work), 2)
        figures = steps_figures(work, args.steps)
        result.update(figures)
        result["first_step_s"] = figures["alfworld"]["first_step_s"]
        if "app_up_s" in result:
            result["launch_to_first_step_s"] = round(result["app_up_s"] + result["first_step_s"], 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
