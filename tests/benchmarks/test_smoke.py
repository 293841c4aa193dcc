"""Every script in benchmarks/ runs, at a tiny size, in the default suite (issue 39 item 19):
a refactor that breaks one (benchmarks/engine.py passed the Store where a response cache is
now expected) fails here, not months later. Each script runs as a person runs it (its own
process, from the repository root) and must end with one JSON object; no figure is judged:
timings belong to the scripts, never to an assert."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"

# script -> the arguments of its smoke run (the smallest sizes it takes; see each script's Usage)
TINY: dict[str, list[str]] = {
    "alfworld.py": ["--games", "1", "--steps", "3", "--quick"],
    "cli_latency.py": ["--runs", "1", "--stops", "1", "--latency", "0.05", "--reads", "jobs"],
    "client.py": ["--calls", "4", "--rounds", "1", "--levels", "1"],
    "conversation_request.py": ["--steps", "1,2", "--repeat", "1"],
    "engine.py": ["--episodes", "1"],
    "experiment.py": ["--tasks", "2", "--latency", "0", "--concurrency", "2", "--alfworld-steps", "1"],
    "export.py": ["--episodes", "2", "--formats", "all"],
    "local_model.py": ["--steps", "2", "--skip-app", "--rounds", "1"],
    "paired_ci_agreement.py": ["--n", "5"],
    "runner.py": ["--tasks", "2", "--levels", "1", "--rounds", "1", "--pairs", "1"],
    "scale.py": ["--sizes", "60", "--rollouts", "3", "--runs", "1"],
    "search.py": ["--episodes", "2"],
    "stats_simulation.py": ["--reps", "10", "--paired-n", "20"],
    # the CLI path of one kind (every kind's Stop through the CLI: tests/cli/test_stop_every_kind.py), the app's all
    "stop_latency.py": ["--n", "1", "--kinds", "run"],
    "suggest.py": ["--failures", "1", "--verify", "1"],
    "textworld_plugin.py": ["--depth", "2", "--repeat", "1"],
    "ui.py": ["--runs", "1", "--experiments", "1", "--tasks", "2", "--long", "4"],
    "wikipedia.py": ["--rounds", "1"],
}


def scripts() -> list[str]:
    """The benchmark scripts (helpers start with `_`)."""
    return sorted(p.name for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))


def last_json_object(stdout: str) -> dict:
    """The JSON object a script prints last (on its last line, or indented over the last lines)."""
    lines = stdout.rstrip().splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("{"):
            try:
                return json.loads("\n".join(lines[i:]))
            except ValueError:
                continue
    raise AssertionError(f"no JSON object last in its output: {stdout[-500:]!r}")


def test_every_script_has_a_smoke_run():
    """A new script gets its tiny arguments here (and a tiny-size flag if it has none)."""
    assert sorted(TINY) == scripts()


@pytest.mark.timeout(600)  # the scripts start servers, processes and the real engines: slow on a busy machine
@pytest.mark.parametrize("script", sorted(TINY))
def test_the_script_runs_at_a_tiny_size(script, tmp_path):
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TMPDIR": str(tmp_path),
    }  # the scripts' temp folders die with the test
    env.pop("REACT_EDITOR_DB", None)
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *TINY[script]],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert proc.returncode == 0, f"{script} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    result = last_json_object(proc.stdout)
    assert isinstance(result, dict) and result, proc.stdout[-500:]
    if "skipped" in result:  # (runner.py without the ReAct release's data: it says so and why)
        assert script == "runner.py" and len(result) == 1, result


def test_the_scripts_run_beside_the_heavy_tests_start_nothing():
    """tests/conftest.py lets these scripts' smoke runs leave the one-at-a-time group: each must
    stay one process (no child process, no server process, no thread pool) or go back in the group."""
    from tests.conftest import ONE_PROCESS_SCRIPTS

    marks = ("subprocess", "multiprocessing", "Popen", "served_by", "Thread(", "ThreadPool", "ProcessPool")
    for script in ONE_PROCESS_SCRIPTS:
        text = (BENCHMARKS / script).read_text(encoding="utf-8")
        assert script in TINY and not [m for m in marks if m in text], script
