"""Engine overhead and storage growth (issue 3). Prints, last, one JSON object.

- Per-step overhead outside the model and the environment (prompt build + parse + store
  write): every step's wall time minus the time spent inside the model client (a
  zero-latency scripted OpenAI-compatible server on 127.0.0.1, through the real client)
  and inside the environment. Reported at each step index 1..50 (median over episodes).
  The store writes with `synchronous=FULL` in WAL mode (every commit reaches the disk: a
  power cut loses no recorded step, issue 11); the figure includes that fsync, so put the
  database on the disk you care about (`--dir`, default the system temp folder). The
  disk's own fsync latency in that folder is reported next to it (`disk_fsync_p50_ms`):
  one fsync per recorded step is the floor durability costs on that disk.
- Storage: bytes an edit at step 25 of a 50-step version plus 25 regenerated steps adds to
  the database file, against 2 x the bytes of the new text + 400 bytes per new step.

Usage: python benchmarks/engine.py [--episodes 12] [--dir FOLDER]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from _root import ROOT  # noqa: E402,F401  (repo root on sys.path; see _root.py)

from agent import exemplars  # noqa: E402
from agent.client import ModelClient  # noqa: E402
from agent.engine import Engine  # noqa: E402
from envs import registry  # noqa: E402
from sessions.store import Store  # noqa: E402
from tests import toy_envs  # noqa: E402
from tests.scripted_server import ScriptedLLM  # noqa: E402
from trajectory.records import AgentConfig  # noqa: E402

STEPS = 50


class Timed:
    """Accumulates the time spent inside wrapped calls."""

    def __init__(self):
        self.total = 0.0

    def wrap(self, fn):
        def inner(*a, **kw):
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.total += time.perf_counter() - t

        return inner


class TimedEnv:
    def __init__(self, env, timer: Timed):
        self._env = env
        for name in ("reset", "step", "state", "set_state", "snapshot", "restore"):
            setattr(self, name, timer.wrap(getattr(env, name)))

    def __getattr__(self, name):
        return getattr(self._env, name)


def setup(llm: ScriptedLLM, timer: Timed):
    fams = toy_envs.families()
    fams.pop("made")
    room = fams["alfworld"]
    orig = room.make_env
    room.make_env = lambda task, options, blobs=None: TimedEnv(orig(task, options, blobs), timer)
    registry._FAMILIES.update(fams)
    exemplars.builtin_prompt_dict = lambda env: toy_envs.ROOM_EXEMPLARS

    store_ref: list = [None]

    def client_factory(config):
        client = ModelClient(config, api_key="bench", cache=store_ref[0].calls)  # as the app: the store's call log
        client.complete = timer.wrap(client.complete)
        return client

    client_factory.store_ref = store_ref
    return client_factory


def wander(i: int) -> str:
    """A 50-step trajectory that never ends: thoughts and moves, like a lost agent."""
    if i % 5 == 0:
        return f" think: I still need to find the mug; step {i}, let me try another place."
    return " go to shelf 1" if i % 2 else " go to cabinet 1"


def db_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in [path, Path(str(path) + "-wal")] if p.exists())


def fsync_p50_ms(folder: str, n: int = 100) -> float:
    """Median time of one fsync of a small append, in `folder` (the disk's floor)."""
    path = Path(folder) / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    times = []
    try:
        for _ in range(n):
            os.write(fd, b"x" * 4096)
            t = time.perf_counter()
            os.fsync(fd)
            times.append((time.perf_counter() - t) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=12)
    ap.add_argument("--dir", default=None, help="where the benchmark database goes (default: the temp folder)")
    args = ap.parse_args()
    timer = Timed()
    with ScriptedLLM() as llm, tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        llm.set_responder(lambda body: wander(len(body.get("prompt", "")) % 997))
        factory = setup(llm, timer)
        db = Path(tmp) / "bench.db"
        store = Store(db)
        factory.store_ref[0] = store
        engine = Engine(store, client_factory=factory)
        config = AgentConfig(model="scripted", base_url=llm.base_url, max_steps=STEPS, cache=True)
        per_index: list[list[float]] = [[] for _ in range(STEPS)]
        versions = []
        for e in range(args.episodes):
            task = toy_envs.ROOM_TASK.model_copy(update={"id": f"toy/room-{e}"})
            ep, v = engine.start_episode(task, config)
            versions.append(v.id)
            for i in range(STEPS):
                timer.total = 0.0
                t = time.perf_counter()
                engine.step(v.id)
                per_index[i].append((time.perf_counter() - t - timer.total) * 1000)
        medians = [statistics.median(x) for x in per_index]
        all_steps = [x for xs in per_index for x in xs]
        p50 = statistics.median(all_steps)
        # step 1 and step 50 compared over a window of 3 indexes each, to damp noise
        first = statistics.median([x for xs in per_index[:3] for x in xs])
        last = statistics.median([x for xs in per_index[-3:] for x in xs])

        # --- storage: an edit at step 25 of a 50-step version + 25 regenerated steps, done
        # on every episode's version so SQLite's page granularity averages out
        store.db.execute("pragma wal_checkpoint(truncate)")
        before = db_bytes(db)
        hint = "The mug is not on the shelf; I should open cabinet 1 and look inside it."
        llm.set_responder(lambda body: wander((len(body.get("prompt", "")) + 1) % 991))
        text_bytes = n_new = 0
        for vid in versions:
            kind = "rewrite_thought" if engine.steps(store.versions.get(vid))[24].thought else "insert_thought"
            v2 = engine.editor.edit(vid, 25, kind, hint)
            while len(engine.steps(store.versions.get(v2.id))) < STEPS:
                engine.step(v2.id)
            new_steps = engine.steps(store.versions.get(v2.id))[24:]
            n_new += len(new_steps)
            text_bytes += sum(
                len((s.thought or "").encode()) + len((s.action or "").encode()) + len((s.observation or "").encode())
                for s in new_steps
            )
        store.db.execute("pragma wal_checkpoint(truncate)")
        after = db_bytes(db)
        budget = 2 * text_bytes + 400 * n_new
        result = {
            "synchronous": {0: "off", 1: "normal", 2: "full", 3: "extra"}[
                store.db.execute("pragma synchronous").fetchone()[0]
            ],
            "journal_mode": store.db.execute("pragma journal_mode").fetchone()[0],
            "step_overhead_p50_ms": round(p50, 3),
            "disk_fsync_p50_ms": round(fsync_p50_ms(tmp), 3),
            "step1_overhead_ms": round(first, 3),
            "step50_overhead_ms": round(last, 3),
            "step50_vs_step1": round(last / first, 3),
            "edit_bytes_added": after - before,
            "edit_new_steps": n_new,
            "edits": len(versions),
            "edit_new_text_bytes": text_bytes,
            "edit_storage_ratio": round((after - before) / budget, 3),
            "episodes": args.episodes,
            "per_index_median_ms": [round(m, 3) for m in medians],
        }
        store.close()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
