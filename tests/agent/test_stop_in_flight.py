"""Stop means stop (issue 26, item 3): Stop in the app and `react-editor jobs stop N` from
another process cancel the model call in flight - its task is cancelled and its connection
closed - instead of waiting for an answer the server sends only after 30 s. The call is
recorded as cancelled and the version is left as it was.

The deadlines below only tell "cancelled" from "waited for the answer" (30 s); they measure
nothing: `benchmarks/stop_latency.py` measures Stop -> job end."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import sessions.jobs
from agent import jobs
from agent.client import CallWatch, ModelClient, ModelError
from react_editor.main import main
from tests.scripted_server import Reply
from tests.threaded_calls import call_in_thread
from tests.toy_envs import ROOM_TASK
from trajectory.records import AgentConfig

ROOT = Path(__file__).resolve().parents[2]
ANSWER_AFTER_S = 30.0
STOPPED_EXIT = 130  # the exit code of a stopped job in every command (README)
WELL_BEFORE_S = ANSWER_AFTER_S / 3


def _wait(cond, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def _config(llm) -> AgentConfig:
    return AgentConfig(model="scripted-model", base_url=llm.base_url, max_retries=2, timeout_s=60)


def _call_in_thread(url: str, stream: bool | None = None) -> tuple[threading.Thread, CallWatch, dict]:
    """One model call to `url` (60 s timeout) in a thread of its own, with a Stop to set."""
    return call_in_thread(AgentConfig(model="m", base_url=url, timeout_s=60), stream=stream)


@pytest.mark.parametrize("stream", [True, False])
def test_cancel_ends_the_request_in_flight_and_closes_its_connection(stream):
    """At the client: a server that answers after 30 s; cancel while the request is in flight
    ends the call at once, recorded as cancelled, and the server sees the connection closed -
    streamed or not."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    closed, asked = threading.Event(), threading.Event()

    def serve() -> None:  # reads the request, answers nothing, notes when the client hangs up
        conn, _ = srv.accept()
        conn.settimeout(ANSWER_AFTER_S)
        try:
            while conn.recv(65536):
                asked.set()
            closed.set()
        except OSError:
            closed.set()
        finally:
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    url = f"http://127.0.0.1:{srv.getsockname()[1]}/v1"
    t, watch, got = _call_in_thread(url, stream)
    assert asked.wait(WELL_BEFORE_S)  # the request is out (the server never answers)
    watch.cancel.set()
    t.join(WELL_BEFORE_S)
    assert not t.is_alive(), "the call waited for an answer instead of being cancelled"
    assert got["call"].error.startswith("cancelled") and got["call"].attempts == 1
    assert closed.wait(WELL_BEFORE_S), "the request's connection was left open"
    srv.close()


def test_stop_in_the_app_cancels_the_call_in_flight(toy):
    toy.llm.push(Reply(text=" go to cabinet 1", delay_s=ANSWER_AFTER_S))
    ep, v = toy.engine.start_episode(ROOM_TASK, _config(toy.llm))
    h = jobs.start(
        toy.store,
        "step",
        lambda job: toy.engine.step(v.id, watch=job.watch()),
        episode_id=ep.id,
        version_id=v.id,
        target=f"episode {ep.id} v{v.id}",
    )
    _wait(lambda: toy.llm.completion_requests)
    jobs.stop(toy.store, h.id)
    assert h.finished.wait(WELL_BEFORE_S), "Stop waited for the model's answer"
    assert h.cancelled and sessions.jobs.get(toy.store, h.id).state == "stopped"
    (call,) = toy.store.calls.of_episode(ep.id)
    assert call.error.startswith("cancelled") and call.completion is None
    after = toy.store.versions.get(v.id)
    assert toy.engine.steps(after) == [] and after.error is None


def test_jobs_stop_from_another_process_cancels_the_call_in_flight(toy, capsys):
    toy.llm.push(Reply(text=" go to cabinet 1", delay_s=ANSWER_AFTER_S))
    db = str(toy.db)
    got: dict = {}
    runner = threading.Thread(
        target=lambda: got.update(
            code=main(["run", "--env", "alfworld", "--task", "toy/room-1", "--base-url", toy.llm.base_url, "--db", db])
        ),
        daemon=True,
    )
    runner.start()
    _wait(lambda: toy.llm.completion_requests)
    (job,) = [j for j in sessions.jobs.listing(toy.store) if j.kind == "run"]  # (listing: tests/sessions/test_jobs.py)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    stop = subprocess.run(
        [sys.executable, "-m", "react_editor", "jobs", "stop", str(job.id), "--db", db],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert stop.returncode == 0, stop.stderr
    runner.join(WELL_BEFORE_S)
    assert not runner.is_alive(), "`jobs stop` waited for the model's answer"
    err = capsys.readouterr().err
    assert got["code"] == STOPPED_EXIT and err.strip().splitlines()[-1].startswith("stopped: "), err
    assert sessions.jobs.get(toy.store, job.id).state == "stopped"
    (call,) = toy.store.calls.of_episode(job.episode_id)
    assert call.error.startswith("cancelled")
    v = toy.store.versions.get(job.version_id)
    assert toy.engine.steps(v) == [] and v.error is None


def test_stop_ends_only_its_own_request_and_the_client_goes_on(scripted_llm):
    """Two threads' requests in flight on one endpoint (one shared client and connection pool):
    Stop of one shuts down only its connection - the other gets its answer on the first attempt -
    and the next request on that endpoint is answered."""
    from tests.scripted_server import table_responder

    scripted_llm.set_responder(
        table_responder(
            {
                "stopped": Reply(text=" never", delay_s=ANSWER_AFTER_S),
                "kept": Reply(text=" late answer", delay_s=2.0),
                "next": Reply(text=" next answer"),
            }
        )
    )
    config = _config(scripted_llm)
    stopped, kept = CallWatch(threading.Event()), CallWatch(threading.Event())
    got: dict = {}

    def call(name: str, watch: CallWatch) -> None:
        try:
            got[name] = ModelClient(config).complete(f"prompt {name}", [], watch=watch)[1]
        except ModelError as exc:
            got[name] = exc.call

    threads = [
        threading.Thread(target=call, args=(name, w), daemon=True) for name, w in (("stopped", stopped), ("kept", kept))
    ]
    for t in threads:
        t.start()
    _wait(lambda: len(scripted_llm.completion_requests) == 2)
    stopped.cancel.set()
    threads[0].join(WELL_BEFORE_S)
    assert not threads[0].is_alive(), "the call waited for an answer instead of being cancelled"
    threads[1].join(WELL_BEFORE_S)
    assert got["stopped"].error.startswith("cancelled") and got["stopped"].attempts == 1
    assert got["kept"].error is None and got["kept"].completion == " late answer" and got["kept"].attempts == 1
    text, after = ModelClient(config).complete("prompt next", [], watch=CallWatch(threading.Event()))
    assert text == " next answer" and after.attempts == 1


def test_stop_ends_a_request_still_waiting_to_connect():
    """A server whose accept queue is full: the TCP handshake waits (up to the 60 s timeout);
    Stop ends the call at once, recorded as cancelled (the connect waits in a thread of its own)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)
    filler = socket.create_connection(srv.getsockname())  # fills the queue: the next handshake waits
    url = f"http://127.0.0.1:{srv.getsockname()[1]}/v1"
    t, watch, got = _call_in_thread(url)
    _wait(lambda: any(th.name == "model-call-connect" for th in threading.enumerate()))  # the handshake waits
    watch.cancel.set()
    t.join(WELL_BEFORE_S)
    assert not t.is_alive(), "the call waited for the connection instead of being cancelled"
    assert got["call"].error.startswith("cancelled") and got["call"].attempts == 1
    filler.close()
    srv.close()


def test_the_stop_watcher_sleeps_with_nothing_in_flight_and_the_next_request_wakes_it(scripted_llm):
    """No request in flight for a while: the one watcher thread sleeps (no wake-up for
    nothing); the next request wakes it, so a Stop still cancels that request in flight."""
    from agent.model import cancel

    scripted_llm.push(Reply(text=" done"))
    ModelClient(AgentConfig(model="m", base_url=scripted_llm.base_url), api_key="k").complete(
        "p", [], watch=CallWatch(threading.Event())
    )
    _wait(lambda: cancel.IDLE[0])  # asleep: nothing watched since its last look
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    asked = threading.Event()

    def serve() -> None:  # reads the request, never answers
        conn, _ = srv.accept()
        conn.settimeout(ANSWER_AFTER_S)
        try:
            while conn.recv(65536):
                asked.set()
        except OSError:
            pass
        finally:
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    t, watch, got = _call_in_thread(f"http://127.0.0.1:{srv.getsockname()[1]}/v1")
    assert asked.wait(WELL_BEFORE_S)
    assert not cancel.IDLE[0]  # the request woke it
    watch.cancel.set()
    t.join(WELL_BEFORE_S)
    assert not t.is_alive(), "the call waited for an answer instead of being cancelled"
    assert got["call"].error.startswith("cancelled")
    srv.close()
