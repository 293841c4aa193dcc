"""Streamed answers (issue 38): a call whose caller reads the text as it comes (the Editor's
step) streams, usage asked for where the server takes it; the text grows on the call's watch; Stop closes the stream at once (recorded
cancelled); and a call's record, its cache key and the kept-answer rule are the same whether
the answer streamed, came in one piece from a server that does not stream, or `--no-stream`."""

from __future__ import annotations

import threading
import time

import pytest

from agent.client import CallWatch, ModelClient
from tests.scripted_server import Reply, ScriptedLLM
from tests.threaded_calls import call_in_thread
from trajectory.records import AgentConfig, Usage

ANSWER = "Thought: the key is in the drawer.\nAction: open drawer 1\nObservation: ignored"
STOP = ["\nObservation"]


class DictCache:
    def __init__(self) -> None:
        self.data: dict = {}

    def get(self, key: str):
        return self.data.get(key)


def _record(llm: ScriptedLLM, style: str, *, stream: bool | None = None, cache=None):
    llm.set_default(Reply(text=ANSWER, prompt_tokens=40, completion_tokens=12, cached_tokens=8))
    client = ModelClient(
        AgentConfig(model="m", base_url=llm.base_url, api_style=style), api_key="sk-stream", stream=stream, cache=cache
    )
    seen: list[str] = []
    text, call = client.complete("Task: find the key.\n", STOP, watch=CallWatch(threading.Event(), on_text=seen.append))
    return text, call, seen


@pytest.mark.parametrize("style", ["completions", "chat"])
def test_a_call_is_recorded_the_same_streamed_in_one_piece_or_with_no_stream(style):
    got = {}
    with ScriptedLLM() as llm:
        for name, streams, stream in (
            ("streamed", True, None),
            ("no-stream", True, False),
            ("server does not stream", False, None),
        ):
            llm.streams = streams
            text, call, seen = _record(llm, style, stream=stream, cache=DictCache())
            body = llm.last_request.body
            assert body.get("stream", False) is (stream is not False)
            got[name] = (text, call.completion, call.usage, call.prompt_hash, call.cache_key, call.params, seen[-1:])
    streamed = got.pop("streamed")
    assert streamed[2] == Usage(prompt_tokens=40, completion_tokens=12, cached_prompt_tokens=8)
    assert streamed[-1] == ["Thought: the key is in the drawer.\nAction: open drawer 1"]  # (the server cut at the stop)
    for name, other in got.items():
        assert other[:-1] == streamed[:-1], name
        assert other[-1] == [], name  # (nothing streamed: no partial text)


def test_a_call_streams_when_its_caller_reads_the_text_as_it_comes_unless_no_stream(scripted_llm):
    from agent.client import set_streaming

    scripted_llm.set_default(" ok")
    client = ModelClient(AgentConfig(model="m", base_url=scripted_llm.base_url), api_key="sk-s")
    client.complete("p", [])  # nobody reads it as it comes: one piece
    client.complete("p", [], watch=CallWatch(threading.Event()))
    client.complete("p", [], watch=CallWatch(threading.Event(), on_text=print))
    try:
        set_streaming(False)  # --no-stream
        client.complete("p", [], watch=CallWatch(threading.Event(), on_text=print))
    finally:
        set_streaming(True)
    assert [r.body.get("stream", False) for r in scripted_llm.completion_requests] == [False, False, True, False]


def test_a_server_that_refuses_stream_options_streams_without_usage_as_now():
    with ScriptedLLM(stream_options=False) as llm:
        for _ in range(2):
            text, call, _ = _record(llm, "completions")
            assert text == "Thought: the key is in the drawer.\nAction: open drawer 1" and call.error is None
            assert call.usage == Usage() and call.attempts == 1
        bodies = [r.body for r in llm.completion_requests]
    assert [("stream_options" in b, b["stream"]) for b in bodies] == [(True, True), (False, True), (False, True)]


@pytest.mark.parametrize("style", ["completions", "chat"])
def test_the_text_grows_on_the_watch_and_stop_closes_the_stream_at_once(scripted_llm, style):
    scripted_llm.push(Reply(text="Thought: first words then a very long wait", chunk_delay_s=30))
    seen: list[str] = []
    t, watch, got = call_in_thread(
        AgentConfig(model="m", base_url=scripted_llm.base_url, api_style=style), on_text=seen.append, api_key="sk-s"
    )
    deadline = time.monotonic() + 20
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen == ["Thought:"]  # the first token, shown while the rest is being written
    watch.cancel.set()
    t.join(10)  # a deadline (the next token comes in 30 s), not a measurement
    assert not t.is_alive(), "Stop waited for the stream"
    assert got["call"].error.startswith("cancelled") and got["call"].completion is None
    assert got["call"].attempts == 1 and len(scripted_llm.completion_requests) == 1


def test_a_stream_that_stalls_past_the_timeout_is_retried_as_a_timeout(scripted_llm):
    """Tokens stop coming for longer than --timeout: the attempt times out (retried), it is not
    a failure for good."""
    scripted_llm.push(Reply(text="Thought: a stalled stream", chunk_delay_s=5), Reply(text="Thought: fine"))
    client = ModelClient(
        AgentConfig(model="m", base_url=scripted_llm.base_url, timeout_s=0.5, max_retries=1),
        api_key="sk-s",
        stream=True,
        backoff_base_s=0.001,
    )
    text, call = client.complete("p", [])
    assert text == "Thought: fine" and call.attempts == 2
