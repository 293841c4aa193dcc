"""How long from Stop to the job's end, for every job kind, with a model server that never
answers? Prints a table, then, last, one JSON object.

The scripted OpenAI-compatible server (tests/scripted_server.py, `Reply(hang=True)`) holds
every request until the benchmark ends; it runs in this process, where its threads only wait.
The jobs run on the real HotpotQA environment (the built-in Wikipedia corpus), the real
`openai` client and `agent.jobs`. Each kind is stopped once its requests are in flight at the
server, two ways:

- `cli`: the command (`run`, `resume`, `experiment run`, `resample`, `whatif`, `suggest` while the
  critic call hangs, `suggest` while its what-ifs hang) runs as its own process; the stop flag
  is set in the database by another connection - what `react-editor jobs stop N` writes (the
  command's own start-up is timed once, apart: `jobs_stop_command_s`). Timed from the flag to
  the job row reading "stopped" (`job_end`) and to the command's exit (`exit`, code 130 checked).
- `app`: the job runs in this process as the app's pages start it (`agent.jobs.start`: an
  Editor step, the what-if panel's resample and what-if, the suggest panel, the Experiments
  page's `Background`), and `agent.jobs.stop` (the app's Stop) ends it. Timed from Stop to the
  job row reading "stopped".

Every round also checks that no request reached the server after the Stop. Target: Stop to
the job's end within 1 s for every kind. Median and max over --n rounds each.

Usage: python benchmarks/stop_latency.py [--n 3] [--kinds run,resample,...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _root import ROOT

TARGET_S = 1.0
GUARD_S = 60.0  # a hang guard: a kind that does not stop fails the benchmark
CRITIC = "You review the trajectory"  # the critic templates' first words (envs/transcript/critic.py)
CONCURRENCY = 4


def _answer(body: dict) -> str:
    """A HotpotQA step that searches (the seed episode's steps)."""
    from tests.scripted_server import prompt_text

    i = (re.findall(r"Thought (\d+):", prompt_text(body)) or ["1"])[-1]
    return f" I should search for the topic.\nAction {i}: Search[Velmora]"


def _critic(body: dict):
    """The critic answers with one candidate at step 2 at once; every other request hangs."""
    from tests.scripted_server import Reply, prompt_text

    if CRITIC in prompt_text(body):
        return Reply(
            text=json.dumps(
                {
                    "candidates": [
                        {
                            "step": 2,
                            "kind": "rewrite_thought",
                            "text": "Look up the founding year instead.",
                            "rationale": "x",
                        }
                    ]
                }
            )
        )
    return Reply(hang=True)


# kind -> (job kind, needs the seed episode, command, requests in flight once it runs, the server)
KINDS = {
    "run": (
        "run",
        False,
        ["run", "--env", "hotpotqa", "--task", "{task}", "--model", "bench", "--base-url", "{url}"],
        1,
        None,
    ),
    "resume": ("run", True, ["resume", "1"], 1, None),
    "experiment": (
        "experiment",
        False,
        [
            "experiment",
            "run",
            "--env",
            "hotpotqa",
            "--limit",
            str(CONCURRENCY),
            "--concurrency",
            str(CONCURRENCY),
            "--name",
            "b",
            "--model",
            "bench",
            "--base-url",
            "{url}",
        ],
        CONCURRENCY,
        None,
    ),
    "resample": (
        "resample",
        True,
        [
            "resample",
            "1",
            "--step",
            "2",
            "--n",
            str(CONCURRENCY),
            "--temperature",
            "0.7",
            "--concurrency",
            str(CONCURRENCY),
        ],
        CONCURRENCY,
        None,
    ),
    "whatif": (
        "whatif",
        True,
        [
            "whatif",
            "1",
            "--step",
            "2",
            "--thought",
            "Look up the founding year instead.",
            "--n",
            str(CONCURRENCY // 2),
            "--temperature",
            "0.7",
            "--concurrency",
            str(CONCURRENCY),
        ],
        CONCURRENCY,
        None,
    ),
    "suggest-critic": ("suggest", True, ["suggest", "1", "--candidates", "1", "--verify", "2"], 1, None),
    "suggest-verify": (
        "suggest",
        True,
        ["suggest", "1", "--candidates", "1", "--verify", str(CONCURRENCY // 2), "--concurrency", str(CONCURRENCY)],
        1 + CONCURRENCY,
        _critic,
    ),
}


class Bench:
    def __init__(self, tmp: Path):
        from tests.scripted_server import ScriptedLLM

        self.tmp = tmp
        self.llm = ScriptedLLM().start()
        self.task = _tasks(1)[0]
        self.env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "REACT_EDITOR_CACHE": str(tmp / "cache"),
            "OPENAI_API_KEY": "x",
        }
        self.rounds = 0

    def config(self):
        from trajectory.records import AgentConfig

        return AgentConfig(
            model="bench", base_url=self.llm.base_url, cache=False, timeout_s=60, max_retries=2, max_steps=8
        )

    def database(self, seeded: bool):
        """A fresh database (and its Store, Engine): with episode 1, v1 of three steps, open."""
        from agent.engine import Engine
        from sessions.store import Store

        self.rounds += 1
        db = self.tmp / f"r{self.rounds}.db"
        store = Store(db)
        engine = Engine(store, api_key="x")
        if seeded:
            self.llm.set_responder(_answer)
            _, v = engine.start_episode(self.task, self.config())
            assert engine.run(v.id, max_steps=3).added == 3
        return db, store, engine

    def hang(self, responder=None) -> None:
        from tests.scripted_server import Reply

        self.llm.requests.clear()
        self.llm.set_responder(responder or (lambda body: Reply(hang=True)))

    def wait_in_flight(self, n: int) -> None:
        deadline = time.monotonic() + GUARD_S
        while len(self.llm.completion_requests) < n:
            if time.monotonic() > deadline:
                raise SystemExit(f"only {len(self.llm.completion_requests)} of {n} requests reached the server")
            time.sleep(0.005)

    def late(self, t0: float) -> int:
        return sum(r.received_at > t0 for r in self.llm.completion_requests)

    # -- the CLI: the flag set in the database, as `jobs stop N` does
    def cli(self, name: str) -> dict:
        import sessions.jobs

        kind, seeded, argv, in_flight, responder = KINDS[name]
        db, store, _ = self.database(seeded)
        self.hang(responder)
        args = [a.replace("{url}", self.llm.base_url).replace("{task}", self.task.id) for a in argv]
        proc = subprocess.Popen(
            [sys.executable, "-m", "react_editor", *args, "--db", str(db)],
            env=self.env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            self.wait_in_flight(in_flight)
            (job,) = [j for j in sessions.jobs.listing(store) if j.kind == kind and j.active]
            t0 = time.monotonic()
            sessions.jobs.request_stop(store, job.id)
            job_end = exit_s = None
            while job_end is None or exit_s is None:
                now = time.monotonic()
                if now - t0 > GUARD_S:
                    raise SystemExit(f"{name}: the job did not end {GUARD_S:g} s after Stop")
                if job_end is None and sessions.jobs.get(store, job.id).state == "stopped":
                    job_end = now - t0
                if exit_s is None and proc.poll() is not None:
                    exit_s = now - t0
                time.sleep(0.002)
            err = proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            store.close()
        if proc.returncode != 130:
            raise SystemExit(f"{name}: exit {proc.returncode}, not 130: {err.strip()}")
        return {"job_end": job_end, "exit": exit_s, "late_requests": self.late(t0)}

    def jobs_stop_command(self) -> float:
        """`react-editor jobs stop N` from its start to its exit (its own start-up), on a job
        that runs here."""
        from agent import jobs

        db, store, engine = self.database(True)
        self.hang()
        v = store.versions.get(1)
        h = jobs.start(
            store, "step", lambda job: engine.step(v.id, watch=job.watch()), episode_id=v.episode_id, version_id=v.id
        )
        self.wait_in_flight(1)
        t0 = time.monotonic()
        subprocess.run(
            [sys.executable, "-m", "react_editor", "jobs", "stop", str(h.id), "--db", str(db)],
            env=self.env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        spent = time.monotonic() - t0
        h.finished.wait(GUARD_S)
        store.close()
        return spent

    # -- the app: the job in this process, the app's Stop
    def app(self, name: str) -> dict:
        import sessions.jobs
        from agent import experiment, experiment_background, jobs, suggest
        from agent.rollouts import Request, resample, whatif
        from sessions.rollouts import RolloutEdit

        kind, seeded, _, in_flight, responder = KINDS.get(name, ("step", True, None, 1, None))
        db, store, engine = self.database(seeded)
        self.hang(responder)
        bg = None
        if name == "step":
            h = jobs.start(store, "step", lambda job: engine.step(1, watch=job.watch()), episode_id=1, version_id=1)
        elif name in ("resample", "whatif"):
            edit = (
                RolloutEdit(kind="rewrite_thought", text="Look up the founding year instead.")
                if name == "whatif"
                else None
            )
            req = Request(1, 2, CONCURRENCY // 2 if edit else CONCURRENCY, 0.7, None, edit)

            def work(h):  # as app_pages/whatif_panel.py
                kw = dict(concurrency=CONCURRENCY, stop=h.stop, should_stop=h.sync_stop, on_retry=h.on_retry)
                return (whatif(engine, req, **kw)[1] if edit else resample(engine, req, **kw)).stopped

            h = jobs.start(store, kind, work, episode_id=1, version_id=1)
        elif name.startswith("suggest"):
            n = CONCURRENCY // 2

            def work(h):  # as app_pages/suggest_panel.py
                how = suggest.Verify(n=n, concurrency=CONCURRENCY, stop=h.stop, should_stop=h.sync_stop)
                return suggest.report(suggest.suggest_version(engine, 1, suggest.Critic(), 1, how))

            h = jobs.start(store, "suggest", work, episode_id=1, version_id=1)
        elif name == "experiment":  # as app_pages/experiments.py
            exp = experiment.create(
                store, env="hotpotqa", method="react", config=self.config(), tasks=_tasks(CONCURRENCY)
            )
            bg = experiment_background.Background(str(db))
            bg.start(exp.id, concurrency=CONCURRENCY, api_key="x")
            h = None
        else:
            raise SystemExit(f"no app path for {name}")
        self.wait_in_flight(in_flight)
        if h is None:
            (job,) = sessions.jobs.active(store, experiment_id=1)
            h = jobs.handle(bg.store, job.id)
        t0 = time.monotonic()
        if bg is not None:
            bg.stop(1)
        else:
            jobs.stop(store, h.id)
        if not h.finished.wait(GUARD_S):
            raise SystemExit(f"{name}: the job did not end {GUARD_S:g} s after Stop")
        spent = time.monotonic() - t0
        state = sessions.jobs.get(store, h.id).state
        if state != "stopped":
            raise SystemExit(f"{name}: the job ended {state}")
        late = self.late(t0)
        if bg is not None:
            bg.store.close()
        store.close()
        return {"job_end": spent, "late_requests": late}


def _tasks(n: int):
    from envs.registry import family

    corpus = ROOT / "envs" / "wikipedia" / "corpus" / "hotpotqa.jsonl"
    fam = family("hotpotqa")
    return [fam.get_task(json.loads(line)["id"]) for line in corpus.read_text().splitlines()[:n]]


APP_KINDS = ("step", "experiment", "resample", "whatif", "suggest-critic", "suggest-verify")


def _stats(xs: list[float]) -> dict:
    return {"median": round(statistics.median(xs), 3), "max": round(max(xs), 3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--kinds", default=",".join(KINDS), help="CLI kinds to time (comma-separated)")
    ap.add_argument("--no-app", action="store_true", help="time only the CLI path")
    args = ap.parse_args()
    out: dict = {"rounds": args.n, "target_s": TARGET_S, "concurrency": CONCURRENCY, "cli": {}, "app": {}}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        bench = Bench(Path(tmp))
        try:
            for name in filter(None, args.kinds.split(",")):
                got = [bench.cli(name) for _ in range(args.n)]
                out["cli"][name] = {
                    "job_end_s": _stats([g["job_end"] for g in got]),
                    "exit_s": _stats([g["exit"] for g in got]),
                    "late_requests": sum(g["late_requests"] for g in got),
                }
                rows.append(("cli", name, out["cli"][name]))
            if not args.no_app:
                for name in APP_KINDS:
                    got = [bench.app(name) for _ in range(args.n)]
                    out["app"][name] = {
                        "job_end_s": _stats([g["job_end"] for g in got]),
                        "late_requests": sum(g["late_requests"] for g in got),
                    }
                    rows.append(("app", name, out["app"][name]))
            out["jobs_stop_command_s"] = _stats([bench.jobs_stop_command() for _ in range(args.n)])
        finally:
            bench.llm.stop()
    worst = max(r[2]["job_end_s"]["max"] for r in rows)
    out["within_target"] = worst <= TARGET_S and all(r[2]["late_requests"] == 0 for r in rows)
    print(f"{'face':5} {'kind':15} {'Stop->job end (median/max s)':>30} {'->exit':>14} {'late requests':>14}")
    for face, name, r in rows:
        ex = r.get("exit_s")
        print(
            f"{face:5} {name:15} {r['job_end_s']['median']:>20.3f} / {r['job_end_s']['max']:.3f} "
            f"{'' if ex is None else format(ex['median'], '.3f'):>14} {r['late_requests']:>14}"
        )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
