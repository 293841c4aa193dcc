"""Issue 28 item 8: `react-editor jobs stop N` returned 14-17 s after it started during a run,
and every command imported every environment family and the model client first. A reading
command imports what it needs (no model client, no Streamlit, no family it does not show),
`--help` still lists the families' own groups, and a stopped run ends within the model call
in flight. (How fast: benchmarks/cli_latency.py; no timing here.)"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from react_editor.main import main
from tests.experiment_agents import wiki_agent

ROOT = Path(__file__).resolve().parents[2]
HEAVY = (
    "openai",
    "httpx",
    "streamlit",
    "pandas",
    "numpy",
    "jsonschema",
    "envs.alfworld",
    "agent.engine",
    "agent.client",
)
PROBE = (
    "import json, sys\nfrom react_editor.main import main\nran = []\ntry:\n"
    "    for args in json.loads(sys.argv[1]):\n        try:\n            ran.append(main(args))\n"
    "        except SystemExit as exc:\n            ran.append(exc.code)\nfinally:\n"
    "    sys.stderr.write('\\nMODULES ' + json.dumps([ran, sorted(sys.modules)]) + '\\n')\n"
)


def _env(tmp_path: Path) -> dict:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "REACT_EDITOR_CACHE": str(tmp_path / "cache"),
        "OPENAI_API_KEY": "sk-test-not-real",
    }


def _cli(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "react_editor", *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def _modules(commands: list[list[str]], env: dict) -> set[str]:
    """What a fresh process has imported after running `commands` one after the other (what none
    of them imports, no one of them imports: one process per group, not per command)."""
    p = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(commands)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    ran, modules = json.loads(p.stderr.rsplit("MODULES ", 1)[1])
    assert len(ran) == len(commands), (commands, p.stderr)
    return set(modules)


def test_reading_commands_import_no_model_client_no_ui_no_other_family(tmp_path, monkeypatch):
    env, db = _env(tmp_path), str(tmp_path / "r.db")
    for k in ("REACT_EDITOR_CACHE", "OPENAI_API_KEY"):  # the episode is made in process (not the point)
        monkeypatch.setenv(k, env[k])
    assert main(["run", "--env", "hotpotqa", "--task", "hp-002", "--human", "--db", db]) == 0
    assert main(["step", "1", "--action", "Search[Colorado orogeny]", "--db", db]) == 0
    listing = [["jobs"], ["jobs", "stop", "1"], ["versions", "1"], ["episodes"], ["episodes", "--env", "hotpotqa"]]
    showing = [["show", "1"], ["show", "1:1"]]  # (show renders in its family's format: that family only)
    for group in (listing, showing):
        loaded = _modules([[*args, "--db", db] for args in group], env)
        heavy = sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY))
        assert not heavy, (group, heavy)
        if group is listing:
            assert not any(m.startswith("envs.wikipedia") for m in loaded), group
    assert "envs.alfworld" in _modules([["run", "--help"]], env)  # a command that needs every family loads them


def test_help_lists_every_command_and_the_families_groups(tmp_path):
    out = _cli(["--help"], _env(tmp_path)).stdout
    for name in ("run", "show", "jobs", "search", "alfworld", "wiki"):
        assert f"\n    {name} " in out, name
    assert "--game" in _cli(["run", "--help"], _env(tmp_path)).stdout
    assert _cli(["alfworld", "--help"], _env(tmp_path)).returncode == 0


def _row(db: Path, sql: str, params=()):
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return c.execute(sql, params).fetchone()
    except sqlite3.Error:  # the run is still creating the database
        return None
    finally:
        c.close()


def test_jobs_stop_ends_a_run_within_the_model_call_in_flight(tmp_path, scripted_llm):
    """The run read the flag only at its heartbeat (1 s): a fast model took several more steps."""
    scripted_llm.set_responder(wiki_agent({}, latency_s=0.05, react_steps=10_000))
    env, db = _env(tmp_path), tmp_path / "s.db"
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "react_editor",
            "run",
            "--env",
            "hotpotqa",
            "--task",
            "hp-002",
            "--base-url",
            scripted_llm.base_url,
            "--model",
            "m",
            "--max-steps",
            "400",
            "--no-cache",
            "--db",
            str(db),
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (db.exists() and (r := _row(db, "select id from jobs where state = 'running' and done >= 2"))):
            assert time.monotonic() < deadline and run.poll() is None, run.stderr.read() if run.poll() else ""
            time.sleep(0.02)
        job = r[0]
        from sessions import jobs  # what `react-editor jobs stop N` does, timed here exactly
        from sessions.store import Store

        store = Store(db, create=False)
        jobs.request_stop(store, job)
        at_flag = store.db.execute("select count(*) from steps").fetchone()[0]
        store.close()
        run.wait(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
        run.communicate()
    assert _row(db, "select state from jobs where id = ?", [job])[0] == "stopped"
    assert _row(db, "select count(*) from steps")[0] - at_flag <= 1  # at most the step in flight
