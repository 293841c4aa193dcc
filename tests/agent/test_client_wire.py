"""The wire cannot be abused (issue 38): through the real `openai` client against the scripted
server on 127.0.0.1 - a huge or endless body is abandoned with one line, a redirect is refused
and nothing goes where it points, every retry (429s too) counts against max_retries and says
how long it waits, and the CLI bounds --timeout before anything is written."""

from __future__ import annotations

import threading

import pytest

from agent.client import MAX_BODY_BYTES, ModelClient, ModelError
from react_editor.main import main
from tests.scripted_server import Reply, ScriptedLLM
from trajectory.records import AgentConfig

DEADLINE_S = 60.0  # a deadline, not a measurement: the old client read 3 GB, then MemoryError


def _client(llm: ScriptedLLM, stream: bool | None = None, **config) -> ModelClient:
    config.setdefault("max_retries", 3)
    return ModelClient(
        AgentConfig(model="m", base_url=llm.base_url, **config),
        api_key="sk-test-wire",
        backoff_base_s=0.001,
        retry_after_max_s=0.2,
        stream=stream,
    )


def _fails(fn) -> ModelError:
    got: dict = {}

    def run() -> None:
        try:
            got["out"] = fn()
        except ModelError as exc:
            got["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(DEADLINE_S)
    assert not t.is_alive(), "the call did not end"
    assert "error" in got, got
    return got["error"]


@pytest.mark.parametrize("streams", [True, False], ids=["streaming-server", "whole-answer-server"])
@pytest.mark.parametrize("reply", [Reply(huge_bytes=MAX_BODY_BYTES * 16), Reply(endless=True)], ids=["huge", "endless"])
def test_a_body_past_the_bound_is_abandoned_with_one_line_and_not_retried(streams, reply):
    with ScriptedLLM(streams=streams) as llm:
        llm.push(reply, reply, " never")
        err = _fails(lambda: _client(llm, stream=streams).complete("p", []))
        llm.reset()  # (ends the endless body)
    call = err.call
    assert call.error == "the model server's answer is larger than 4 MB: abandoned (after 1 attempt)"
    assert "\n" not in call.error and call.attempts == 1 and call.completion is None


@pytest.mark.parametrize("status", [307, 308])
@pytest.mark.parametrize("stream", [True, False])
def test_a_redirect_off_the_origin_is_refused_and_nothing_goes_there(scripted_llm, status, stream):
    with ScriptedLLM(default=" the other server's answer") as other:
        scripted_llm.push(Reply(status=status, location=f"{other.base_url}/completions"), " never")
        err = _fails(
            lambda: ModelClient(
                AgentConfig(model="m", base_url=scripted_llm.base_url), api_key="sk-x", stream=stream
            ).complete("p", [])
        )
        assert other.requests == []  # the prompt never left for the other origin
        there = other.base_url
    assert err.call.attempts == 1 and err.call.completion is None
    assert err.call.error.startswith(
        f"the model server redirected (HTTP {status}) to {there}/completions, "
        "off the configured endpoint's origin: refused"
    ), err.call.error
    assert len(scripted_llm.completion_requests) == 1


@pytest.mark.parametrize("max_retries", [0, 2])
def test_every_retry_of_a_429_counts_against_max_retries_and_says_its_wait(scripted_llm, max_retries):
    scripted_llm.push(*[Reply(status=429, retry_after=0.05, message="slow down")] * 5, " ok")
    heard: list[tuple[int, str]] = []
    client = _client(scripted_llm, max_retries=max_retries)
    client.on_retry = lambda n, why: heard.append((n, why))
    err = _fails(lambda: client.complete("p", []))
    assert err.call.attempts == max_retries + 1 == len(scripted_llm.completion_requests)
    assert "rate limited (HTTP 429): slow down" in err.call.error
    assert [n for n, _ in heard] == list(range(1, max_retries + 1))
    assert all(why.endswith("; waiting 0.1 s") for _, why in heard), heard


def test_a_timeout_past_the_bound_is_refused_before_anything_is_written(tmp_path, capsys):
    db = tmp_path / "runs.db"
    code = main(
        [
            "run",
            "--env",
            "alfworld",
            "--task",
            "toy/room-1",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--timeout",
            "99999999999999999999",
            "--db",
            str(db),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "--timeout" in err and "at most 3600" in err, err
    assert not db.exists()


def test_a_proxy_from_the_environment_carries_the_requests_and_no_proxy_is_honoured(scripted_llm, monkeypatch):
    """The wire honours HTTP_PROXY / NO_PROXY as httpx does (the scripted server answers as the proxy)."""
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{scripted_llm.port}")
    scripted_llm.push(" through the proxy")
    far = ModelClient(AgentConfig(model="m", base_url="http://model.invalid:8000/v1", timeout_s=20), api_key="sk-p")
    assert far.complete("p", [])[0] == " through the proxy"
    assert scripted_llm.last_request.headers["host"] == "model.invalid:8000"
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # nothing listens there once we leave
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    with pytest.raises(ModelError) as info:  # not through the proxy (which would answer 500: script exhausted)
        ModelClient(
            AgentConfig(model="m", base_url=f"http://127.0.0.1:{closed}/v1", max_retries=0), api_key="sk-p"
        ).complete("p", [])
    assert info.value.call.error.startswith("cannot reach the model server")
