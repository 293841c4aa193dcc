"""CallWatch: the caller of one model call hears of each retry and can cancel the call
between attempts (the Editor's Stop), through the real client and the scripted server."""

from __future__ import annotations

import threading

from agent.client import CallWatch, ModelClient, ModelError
from tests.scripted_server import Reply
from trajectory.records import AgentConfig


def _raises_before_deadline(fn, deadline_s: float = 20.0):
    """Run fn in a thread and return its ModelError's ExceptionInfo-like holder. The deadline
    only catches a call that ignores Stop (it would wait far longer); it measures nothing."""
    got: dict = {}

    def target() -> None:
        try:
            fn()
        except ModelError as exc:
            got["exc"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(deadline_s)
    assert not t.is_alive(), "the call did not end when Stop was pressed"
    assert "exc" in got, "the call did not fail"
    return type("Info", (), {"value": got["exc"]})


def test_cancel_during_the_backoff_ends_the_call_at_once(scripted_llm):
    scripted_llm.push(*[Reply(status=500, message="busy")] * 5)
    heard = []
    watch = CallWatch(threading.Event())

    def on_retry(attempt, reason):
        heard.append((attempt, reason))
        watch.cancel.set()  # Stop pressed while the client waits to retry

    watch.on_retry = on_retry
    client = ModelClient(AgentConfig(model="m", base_url=scripted_llm.base_url, max_retries=4), backoff_base_s=3600)
    info = _raises_before_deadline(lambda: client.complete("p", [], watch=watch))  # not the hour of backoff
    assert [(n, why.split("; waiting ")[0]) for n, why in heard] == [(1, "model server error (HTTP 500): busy")]
    assert heard[0][1].endswith(" s")  # the retry line says how long it waits
    assert info.value.call.error == "cancelled: model server error (HTTP 500): busy (after 1 attempt)"
    assert len(scripted_llm.requests) == 1


def test_cancel_while_rate_limited_ends_the_call_at_once(scripted_llm):
    scripted_llm.push(*[Reply(status=429, retry_after=30, message="slow down")] * 5)
    watch = CallWatch(threading.Event(), lambda attempt, reason: watch.cancel.set())  # Stop during the pause
    client = ModelClient(AgentConfig(model="m", base_url=scripted_llm.base_url, max_retries=4), backoff_base_s=3600)
    info = _raises_before_deadline(lambda: client.complete("p", [], watch=watch))  # not the 30 s Retry-After
    assert info.value.call.error.startswith("cancelled: ") and len(scripted_llm.requests) == 1


def test_without_cancel_the_watch_only_listens(scripted_llm):
    scripted_llm.push(Reply(status=500, message="busy"), " fine")
    heard = []
    client = ModelClient(AgentConfig(model="m", base_url=scripted_llm.base_url, max_retries=2), backoff_base_s=0.01)
    text, call = client.complete("p", [], watch=CallWatch(threading.Event(), lambda a, r: heard.append(a)))
    assert text == " fine" and call.attempts == 2 and heard == [1]
