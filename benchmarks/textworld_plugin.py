"""TextWorld plugin speed (plugins/react-editor-textworld) on a built-in tw-cooking game.

Prints, last, one JSON object: step_p50_ms (one command, admissible commands included),
restore_in_process_ms (set_state to a state K commands deep from another state: a reset
and a checked replay), restore_via_engine_ms (a fresh environment put at a stored K-step
version by the Engine: reset, replay, every observation checked), K, first_load_s.
Usage: python benchmarks/textworld_plugin.py [--task cooking-rooms] [--depth 10] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _root import ROOT  # noqa: E402  (repo root on sys.path; see _root.py)

sys.path.insert(1, str(ROOT / "plugins" / "react-editor-textworld"))


def _commands(env, depth: int) -> list[str]:
    """`depth` commands that keep the game going: walk the admissible ones, never `eat`."""
    out = []
    for i in range(depth):
        options = [c for c in env.admissible_actions() if not c.startswith(("eat", "drop"))]
        cmd = options[(7 * i) % len(options)]
        env.step(cmd)
        out.append(cmd)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", default="cooking-rooms")
    ap.add_argument("--depth", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    from react_editor_textworld import FAMILY

    task = FAMILY.get_task(args.task)  # made (tw-make) and cached on first use
    t0 = time.perf_counter()
    env = FAMILY.make_env(task, {})
    env.reset(task)
    first_load = time.perf_counter() - t0
    commands = _commands(env, args.depth)
    steps = []
    for _ in range(args.repeat):
        env.reset(task)
        for cmd in commands:
            t = time.perf_counter()
            env.step(cmd)
            steps.append((time.perf_counter() - t) * 1000)
    deep = env.state()
    restores = []
    for _ in range(args.repeat):
        env.set_state(deep[:1])
        t = time.perf_counter()
        env.set_state(deep)
        restores.append((time.perf_counter() - t) * 1000)
    env.close()
    print(
        json.dumps(
            {
                "step_p50_ms": round(statistics.median(steps), 2),
                "restore_in_process_ms": round(statistics.median(restores), 1),
                "restore_via_engine_ms": round(_engine_restore(task, commands, args.repeat), 1),
                "depth": args.depth,
                "first_load_s": round(first_load, 2),
            }
        )
    )


def _engine_restore(task, commands: list[str], repeat: int) -> float:
    """p50 of the Engine putting a fresh environment after a stored version's last step."""
    from react_editor_textworld import FAMILY

    from agent.engine import Engine
    from envs.registry import register
    from sessions.store import Store
    from trajectory.records import AgentConfig

    register(FAMILY)
    with tempfile.TemporaryDirectory() as tmp:
        eng = Engine(Store(Path(tmp) / "b.db"))
        ep, v = eng.start_episode(task, AgentConfig(max_steps=len(commands) + 5))
        for cmd in commands:
            eng.human_step(v.id, action=cmd)
        v = eng.store.versions.get(v.id)
        steps = eng.steps(v)
        out = []
        for _ in range(repeat):
            eng.envs.forget_env(ep.id)
            t = time.perf_counter()
            eng.envs.env_at(eng.store.episodes.get(ep.id), steps)
            out.append((time.perf_counter() - t) * 1000)
        eng.envs.forget_env(ep.id)
        eng.store.close()
    return statistics.median(out)


if __name__ == "__main__":
    main()
