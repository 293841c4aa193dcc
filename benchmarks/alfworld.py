"""ALFWorld speed: our cached engine vs the stock alfworld stack, in the same run.

Prints, last, one JSON object: step_p50_ms, stock_step_p50_ms, speedup, first_load_s,
second_load_s, resume_in_process_ms, resume_after_restart_s.
Usage: python benchmarks/alfworld.py [--games 3] [--steps 40]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# This file is named like the `alfworld` package: keep its folder off the import path.
from _root import ROOT  # noqa: E402  (repo root on sys.path; see _root.py)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--games", type=int, default=3)
    ap.add_argument("--steps", type=int, default=40)
    args = ap.parse_args()
    cache = tempfile.mkdtemp(prefix="alfworld-bench-cache-")
    os.environ["REACT_EDITOR_CACHE"] = cache  # cold caches: first loads pay the translation

    from envs.alfworld import list_tasks, make_env
    from envs.alfworld.fastgame import load_game_data
    from envs.alfworld.stock import StockGame

    kitchens = [t for t in list_tasks() if int(t.id.split("/")[0].rsplit("-", 1)[1]) <= 30][: args.games]
    first_loads, second_loads, ours, stock = [], [], [], []
    for task in kitchens:
        t0 = time.perf_counter()
        env = make_env(task, {})
        env.reset(task)
        first_loads.append(time.perf_counter() - t0)
        rng = random.Random(task.id)
        cmds = []
        for _ in range(args.steps):
            c = rng.choice(env.admissible_actions())
            cmds.append(c)
            t0 = time.perf_counter()
            env.step(c)
            ours.append(time.perf_counter() - t0)
        env.close()
        t0 = time.perf_counter()
        env2 = make_env(task, {})
        env2.reset(task)
        second_loads.append(time.perf_counter() - t0)
        env2.close()
        sg = StockGame(load_game_data(task.data["game"]), "paper", via_gym=True)
        sg.reset()
        for c in cmds:
            t0 = time.perf_counter()
            sg.step(c)
            stock.append(time.perf_counter() - t0)
        sg.close()

    # resume: state after step 50, in process and after a restart (replay of 50 actions)
    task = kitchens[0]
    env = make_env(task, {})
    env.reset(task)
    rng = random.Random(1)
    actions = []
    for _ in range(50):
        a = rng.choice(env.admissible_actions() + ["think: where next?"])
        actions.append(a)
        env.step(a)
    token = env.state()
    env.reset(task)
    t0 = time.perf_counter()
    env.set_state(token)
    resume_ms = (time.perf_counter() - t0) * 1000
    env.close()
    code = ("import json,sys,time; t0=time.perf_counter()\n"
            "from envs.alfworld import get_task, make_env\n"
            "t=get_task(sys.argv[1]); e=make_env(t,{}); e.reset(t)\n"
            "[e.step(a) for a in json.loads(sys.argv[2])]\n"
            "print(time.perf_counter()-t0)")
    out = subprocess.run([sys.executable, "-c", code, task.id, json.dumps(actions)], cwd=ROOT, text=True,
                         capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    restart_s = float(out.stdout.strip().splitlines()[-1])

    p50 = statistics.median(ours) * 1000
    sp50 = statistics.median(stock) * 1000
    result = {"step_p50_ms": round(p50, 2), "stock_step_p50_ms": round(sp50, 2), "speedup": round(sp50 / p50, 2),
              "first_load_s": round(max(first_loads), 3), "second_load_s": round(max(second_loads), 3),
              "resume_in_process_ms": round(resume_ms, 2), "resume_after_restart_s": round(restart_s, 3),
              "games": len(kitchens), "steps_per_game": args.steps}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
