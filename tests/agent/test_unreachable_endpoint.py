"""An unreachable endpoint or a server hang-up (issue 26, item 11): the retries announced
happen (the first "cannot reach" is not a Stop), a run that ends unfinished because of
errors exits non-zero with one line and its job reads "failed", and a hang-up that a
retry gets past does not end the run."""

from __future__ import annotations

import socket

import pytest

from agent.model import retries
from react_editor.main import main
from sessions import jobs
from tests.scripted_server import Reply


@pytest.fixture(autouse=True)
def _quick_backoff(monkeypatch):
    monkeypatch.setattr(retries, "BACKOFF_BASE_S", 0.01)  # the retries, not their waits, are tested


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed when we leave: nothing listens there


def _run(capsys, db: str, url: str, *extra: str) -> tuple[int, str, str]:
    code = main(["run", "--env", "alfworld", "--task", "toy/room-1", "--base-url", url, "--db", db, *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_connection_refused_is_retried_as_announced_then_the_run_fails(toy, capsys):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    code, out, err = _run(capsys, str(toy.db), url, "--max-retries", "2")
    lines = err.strip().splitlines()
    assert [n for n in (1, 2) if any(line.endswith(f"; retry {n}") for line in lines)] == [1, 2], err
    assert code not in (0, 130), err
    said = [
        line for line in lines if not line.endswith(("; retry 1", "; retry 2")) and not line.startswith("episode 1,")
    ]
    assert len(said) == 1 and "cannot reach the model server" in said[0] and "after 3 attempts" in said[0], err
    (job,) = jobs.listing(toy.store)
    assert job.state == "failed" and "cannot reach" in (job.error or "")
    (call,) = toy.store.calls.of_episode(1)
    assert call.attempts == 3 and not call.error.startswith("cancelled")


def test_a_server_hang_up_is_retried_and_the_run_goes_on(toy, capsys):
    toy.llm.push(Reply(hang_up=True), " go to cabinet 1", " open cabinet 1")
    code, out, err = _run(capsys, str(toy.db), toy.llm.base_url, "--max-steps", "2", "--json")
    assert code == 0, err
    assert "; retry 1" in err and len(toy.llm.completion_requests) == 3
    calls = toy.store.calls.of_episode(1)
    assert [c.attempts for c in calls] == [2, 1] and all(c.error is None for c in calls)
    v = toy.store.versions.get(1)
    assert len(toy.engine.steps(v)) == 2 and jobs.get(toy.store, 1).state == "done"
