"""The model client imports `openai` (and httpx) on first use, not at import: a process that
never calls a model (restoring a version, listing, exporting) does not pay for them. First
use from many threads at once still gets one module and working calls."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys, threading
import agent.engine, sessions.store, react_editor.main
before = sorted(m for m in ("openai", "httpx") if m in sys.modules)
from agent.client import ModelClient
from trajectory.records import AgentConfig
from tests.scripted_server import ScriptedLLM

with ScriptedLLM(default="ok") as llm:
    client = ModelClient(AgentConfig(model="m", base_url=llm.base_url))
    got, start = [], threading.Barrier(8)

    def call():
        start.wait()
        got.append(client.complete("p", [])[0])

    threads = [threading.Thread(target=call) for _ in range(8)]
    [t.start() for t in threads]
    [t.join(60) for t in threads]
import agent.client, openai
print(json.dumps({"before": before, "got": got, "module": agent.client.openai is openai}))
"""


def test_openai_is_imported_on_first_use_once_across_threads():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        env.pop(name, None)
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"before": [], "got": ["ok"] * 8, "module": True}
