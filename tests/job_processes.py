"""Helpers for the tests of jobs across processes (tests/sessions/test_jobs.py,
test_rollout_jobs.py): the CLI spawned as a subprocess of this checkout, a wait for a condition,
an experiment over the first HotpotQA tasks, model calls per task, a two-step episode made by `react-editor run`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

from agent import experiment
from sessions.store import Store
from tests.cli_helpers import cli
from tests.experiment_agents import wiki_agent
from tests.scripted_server import ScriptedLLM
from trajectory.records import AgentConfig

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "envs" / "wikipedia" / "corpus"
HOTPOT = [json.loads(line) for line in (CORPUS / "hotpotqa.jsonl").read_text().splitlines() if line.strip()]


def _env(tmp_path, **extra) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "REACT_EDITOR_CACHE": str(tmp_path / "cache"), **extra}


def _spawn(args: list, env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "react_editor.main", *map(str, args)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _cli(args: list, env: dict, timeout: float = 120) -> tuple[int, str, str]:
    p = _spawn(args, env)
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


def _wait(cond, timeout: float = 60.0, every: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(every)
    raise AssertionError("timed out waiting")


def _experiment(db: Path, llm: ScriptedLLM, n: int, *, method: str = "react", **params) -> int:
    from envs.registry import family

    fam = family("hotpotqa")
    tasks = [fam.get_task(r["id"]) for r in HOTPOT[:n]]
    with closing(Store(db)) as store:
        cfg = AgentConfig(model="m", base_url=llm.base_url, cache=False)
        return experiment.create(
            store, env="hotpotqa", method=method, config=cfg, tasks=tasks, name="x", params=params
        ).id


def _per_task(llm: ScriptedLLM) -> dict[str, int]:
    """Model calls per task (the question in the prompt's last Question line)."""
    out: dict[str, int] = {}
    for r in llm.completion_requests:
        q = [ln for ln in r.prompt.splitlines() if ln.startswith("Question: ")][-1]
        out[q] = out.get(q, 0) + 1
    return out


def _episode(tmp_path, llm, capsys=None) -> tuple[Path, int, int]:
    """A two-step episode made by `react-editor run`: in another process, or in this one (`capsys`)."""
    llm.set_responder(wiki_agent({r["question"]: r["answer"] for r in HOTPOT}, react_steps=2))
    db = tmp_path / "r.db"
    args = [
        "run",
        "--env",
        "hotpotqa",
        "--task",
        HOTPOT[0]["id"],
        "--model",
        "m",
        "--base-url",
        llm.base_url,
        "--db",
        str(db),
        "--json",
    ]
    code, out, err = cli(capsys, *args) if capsys is not None else _cli(args, _env(tmp_path))
    assert code == 0, err
    data = json.loads(out.strip().splitlines()[-1])
    return db, data["episode"], data["version"]
