"""agent.client through the real `openai` client against the scripted server on 127.0.0.1."""

from __future__ import annotations

import hashlib
import socket
import threading

import pytest

from agent.client import DEFAULT_CHAT_INSTRUCTION, ModelClient, ModelError, model_available, retry_after_s
from tests.client_helpers import KEY, STYLES, DictCache, make, sent_text
from tests.scripted_server import Reply, ScriptedLLM
from trajectory.records import AgentConfig, ModelCall, Usage


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)


# -- request shape ---------------------------------------------------------------------


@pytest.mark.parametrize("style", STYLES)
def test_request_carries_prompt_stop_model_and_params(scripted_llm: ScriptedLLM, style: str):
    scripted_llm.push("Thought: find the key.\nObservation 1: nothing")
    client = make(scripted_llm, style, model="my-model", temperature=0.25, top_p=0.9, max_tokens=77)
    prompt = "Question: where?\nThought 1:"
    text, call = client.complete(prompt, ["\nObservation 1:"])

    (req,) = scripted_llm.requests
    assert req.path == ("/v1/chat/completions" if style == "chat" else "/v1/completions")
    assert req.body["model"] == "my-model"
    assert req.body["temperature"] == 0.25
    assert req.body["top_p"] == 0.9
    assert req.body["max_tokens"] == 77
    assert req.body["stop"] == ["\nObservation 1:"]
    if style == "chat":
        assert sent_text(req) == f"{prompt}\n\n{DEFAULT_CHAT_INSTRUCTION}"
    else:
        assert sent_text(req) == prompt

    assert text == "Thought: find the key."
    assert call.completion == text
    assert call.model == "my-model" and call.api_style == style
    assert call.params["stop"] == ["\nObservation 1:"]
    assert call.params["max_tokens"] == 77 and call.params["temperature"] == 0.25
    assert call.params["base_url"] == scripted_llm.base_url
    assert call.prompt_hash == hashlib.sha256(sent_text(req).encode()).hexdigest()
    assert call.prompt_chars == len(sent_text(req))
    assert call.attempts == 1 and call.cached is False and call.error is None
    assert call.latency_ms is not None and call.latency_ms > 0


def test_chat_instruction_is_appended_and_hashed(scripted_llm: ScriptedLLM):
    scripted_llm.push("a", "b")
    client = make(scripted_llm, "chat")
    _, c1 = client.complete("T", [], chat_instruction="Say one step.")
    _, c2 = client.complete("T", [])
    assert sent_text(scripted_llm.requests[0]) == "T\n\nSay one step."
    assert "stop" not in scripted_llm.requests[0].body  # no empty stop list sent
    assert c1.prompt_hash != c2.prompt_hash


# -- stop sequences -----------------------------------------------------------------------


@pytest.mark.parametrize("style", STYLES)
def test_client_cuts_at_stop_when_server_ignores_it(scripted_llm: ScriptedLLM, style: str):
    scripted_llm.push(Reply(text="go to desk 1\n> open drawer", ignore_stop=True))
    text, call = make(scripted_llm, style).complete("> ", ["\n"])
    assert text == "go to desk 1" and call.completion == text


@pytest.mark.parametrize("style", STYLES)
def test_at_most_four_stops_sent_rest_applied_locally(scripted_llm: ScriptedLLM, style: str):
    scripted_llm.push("alpha\nbeta")
    stops = ["S1", "S2", "S3", "S4", "\n"]
    text, call = make(scripted_llm, style).complete("p", stops)
    assert scripted_llm.last_request.stop == stops[:4]
    assert text == "alpha"
    assert call.params["stop"] == stops


# -- usage -------------------------------------------------------------------------------


@pytest.mark.parametrize("style", STYLES)
def test_usage_with_cached_tokens_is_recorded(scripted_llm: ScriptedLLM, style: str):
    scripted_llm.push(
        Reply(text="x", prompt_tokens=1200, completion_tokens=9, cached_tokens=1024),
        Reply(text="y", cached_tokens=None, prompt_tokens=5, completion_tokens=1),
        Reply(text="z", usage=False),
    )
    client = make(scripted_llm, style)
    assert client.complete("a", [])[1].usage == Usage(
        prompt_tokens=1200, completion_tokens=9, cached_prompt_tokens=1024
    )
    assert client.complete("b", [])[1].usage == Usage(prompt_tokens=5, completion_tokens=1, cached_prompt_tokens=None)
    assert client.complete("c", [])[1].usage == Usage()


# -- retries -----------------------------------------------------------------------------


@pytest.mark.parametrize("style", STYLES)
def test_429_then_success_retries_once(scripted_llm: ScriptedLLM, style: str):
    scripted_llm.push(Reply(status=429, message="slow down"), "ok")
    seen: list[tuple[int, str]] = []
    text, call = make(scripted_llm, style, on_retry=lambda n, r: seen.append((n, r))).complete("p", [])
    assert text == "ok"
    assert call.attempts == 2 and call.error is None
    assert len(scripted_llm.requests) == 2
    assert len(seen) == 1 and seen[0][0] == 1 and "429" in seen[0][1]


def test_retry_after_is_honoured(scripted_llm: ScriptedLLM):
    scripted_llm.push(Reply(status=429, retry_after=0.4), "ok")
    text, call = make(scripted_llm).complete("p", [])
    first, second = scripted_llm.requests
    assert text == "ok" and call.attempts == 2
    assert second.received_at - first.received_at >= 0.38  # backoff alone is ~1 ms


def test_retry_after_is_bounded(scripted_llm: ScriptedLLM):
    scripted_llm.push(Reply(status=503, retry_after=3600), "ok")
    got = {}
    caller = threading.Thread(
        target=lambda: got.update(out=make(scripted_llm, retry_after_max_s=0.2).complete("p", []))
    )
    caller.start()
    caller.join(120)  # a deadline, not a measurement: uncapped, the call would wait an hour
    assert not caller.is_alive()
    text, call = got["out"]
    first, second = scripted_llm.requests
    assert text == "ok" and call.attempts == 2
    assert 0.18 <= second.received_at - first.received_at


@pytest.mark.parametrize(
    "value, expected",
    [
        ("soon", None),
        ("nan", None),
        ("NaN", None),
        ("-5", None),
        ("-inf", None),
        ("", None),
        ("1e", None),
        ("inf", 60.0),
        ("1e308", 60.0),
        ("99999999999999999999", 60.0),
        ("2.5", 2.5),
        ("0", 0.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", None),  # a date already past: our own backoff
        ("Thu, 26 Nov 2026 12:00:30 GMT", 30.0),
        ("Thu, 26 Nov 2026 12:00:30", 30.0),  # a date without a zone is UTC
        ("Thu, 26 Nov 9999 12:00:30 GMT", 60.0),
        ("Mon, 99 Foo 2026 99:99:99 GMT", None),
        ("\udcff", None),
    ],
)
def test_any_retry_after_value_gives_a_bounded_sane_wait(value: str, expected):
    """Issue 26 item 12: `soon` raised out of the client (a traceback, the call unrecorded) and
    `nan` turned off the backoff; every value is now a wait in [0, 60] s, or None (backoff)."""
    now = 1795694400.0  # Thu, 26 Nov 2026 12:00:00 GMT
    assert retry_after_s({"retry-after": value}, 60.0, now=now) == expected


@pytest.mark.parametrize("ms, expected", [("1500", 1.5), ("nan", 3.0), ("soon", 3.0), ("-10", None), ("inf", 60.0)])
def test_retry_after_ms_is_read_the_same_way(ms: str, expected):
    """An unreadable `retry-after-ms` falls back to `Retry-After` (here 3 s); a negative one
    means our own backoff; an infinite one is bounded."""
    assert retry_after_s({"retry-after-ms": ms, "retry-after": "3"}, 60.0) == expected


@pytest.mark.parametrize("value", ["soon", "nan", "-1", "1e400", "Mon, 99 Foo 2026 99:99:99 GMT"])
def test_a_429_with_any_retry_after_is_retried_and_recorded(scripted_llm: ScriptedLLM, value: str):
    scripted_llm.push(Reply(status=429, retry_after=value, message="slow down"), "ok")
    got = {}
    caller = threading.Thread(
        target=lambda: got.update(out=make(scripted_llm, retry_after_max_s=0.2).complete("p", []))
    )
    caller.start()
    caller.join(60)  # a deadline, not a measurement
    assert not caller.is_alive() and "out" in got  # no traceback, no endless wait
    text, call = got["out"]
    assert text == "ok" and call.attempts == 2 and call.error is None


def test_a_429_with_an_unreadable_retry_after_fails_recorded(scripted_llm: ScriptedLLM):
    scripted_llm.push(*[Reply(status=503, retry_after="soon", message="busy")] * 2)
    with pytest.raises(ModelError) as info:
        make(scripted_llm, max_retries=1).complete("p", [])
    assert info.value.call.attempts == 2 and "HTTP 503" in info.value.call.error


@pytest.mark.parametrize("style", STYLES)
def test_persistent_500_raises_after_all_retries(scripted_llm: ScriptedLLM, style: str):
    scripted_llm.push(*[Reply(status=500, message="boom")] * 3, "never reached")
    with pytest.raises(ModelError) as info:
        make(scripted_llm, style, max_retries=2).complete("p", ["\n"])
    call = info.value.call
    assert isinstance(call, ModelCall)
    assert call.attempts == 3 and len(scripted_llm.requests) == 3
    assert "HTTP 500" in call.error and "boom" in call.error
    assert str(info.value) == call.error
    assert call.completion is None and call.params["stop"] == ["\n"]
    assert scripted_llm.pending == 1


def test_client_error_is_not_retried(scripted_llm: ScriptedLLM):
    scripted_llm.push(Reply(status=401, message="bad key"), "ok")
    with pytest.raises(ModelError) as info:
        make(scripted_llm, max_retries=3).complete("p", [])
    assert info.value.call.attempts == 1 and len(scripted_llm.requests) == 1
    assert "authentication failed" in info.value.call.error


@pytest.mark.parametrize("style", STYLES)
def test_timeout_is_retried_then_fails(scripted_llm: ScriptedLLM, style: str):
    scripted_llm.push(Reply(text="late", delay_s=3), Reply(text="late", delay_s=3))
    with pytest.raises(ModelError) as info:  # without the timeout both attempts would succeed, late
        make(scripted_llm, style, timeout_s=0.25, max_retries=1).complete("p", [])
    assert info.value.call.attempts == 2 and len(scripted_llm.requests) == 2
    assert "timed out" in info.value.call.error


def test_timeout_then_success(scripted_llm: ScriptedLLM):
    scripted_llm.push(Reply(text="late", delay_s=3), "prompt answer")
    text, call = make(scripted_llm, timeout_s=0.25, max_retries=2).complete("p", [])
    assert text == "prompt answer" and call.attempts == 2


def test_unreachable_server_is_retried_then_fails():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when we leave: nothing listens there
    config = AgentConfig(model="m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=2)
    with pytest.raises(ModelError) as info:
        ModelClient(config, backoff_base_s=0.001).complete("p", [])
    assert info.value.call.attempts == 3
    assert "cannot reach the model server" in info.value.call.error


# -- malformed and empty -------------------------------------------------------------------


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize(
    "garbage",
    [
        Reply(body="<html>upstream proxy error</html>", content_type="text/html"),
        Reply(body="{not json at all"),
        Reply(json={"id": "x", "object": "text_completion", "created": 0, "model": "m"}),
        Reply(json={"id": "x", "object": "x", "created": 0, "model": "m", "choices": []}),
    ],
    ids=["html", "bad-json", "no-choices", "empty-choices"],
)
def test_garbage_response_is_a_clear_error(scripted_llm: ScriptedLLM, style: str, garbage):
    scripted_llm.push(garbage, garbage, "never reached")
    with pytest.raises(ModelError) as info:
        make(scripted_llm, style, max_retries=4).complete("p", [])
    call = info.value.call
    assert "malformed response" in call.error
    assert call.attempts == 2 and len(scripted_llm.requests) == 2  # one retry only


@pytest.mark.parametrize("style", STYLES)
def test_empty_completion_is_a_failed_call_retried_once(scripted_llm: ScriptedLLM, style: str):
    """Issue 11 item 15: empty (or empty once cut at a stop) is no completion at all."""
    scripted_llm.push("", "   ", "\nrest", "\nrest", "", " ok")
    client = make(scripted_llm, style)
    for stop in ([], ["\n"]):
        with pytest.raises(ModelError) as err:
            client.complete("p", stop)
        assert "empty completion" in err.value.call.error and err.value.call.attempts == 2
    text, call = client.complete("q", [])
    assert text == " ok" and call.error is None and call.attempts == 2


@pytest.mark.parametrize("style", STYLES)
def test_unicode_round_trips(scripted_llm: ScriptedLLM, style: str):
    prompt = 'Claim: Café Zürich — 東京 🚀 "quoted" \\ back\nThought 1:'
    reply = " Ünïcödé → 北京 🐍\nObservation 1: x"
    scripted_llm.push(reply)
    text, call = make(scripted_llm, style).complete(prompt, ["\nObservation 1:"])
    assert text == " Ünïcödé → 北京 🐍"
    assert sent_text(scripted_llm.last_request).startswith(prompt)
    assert ModelCall.model_validate_json(call.model_dump_json()).completion == text


# -- the key never leaks -------------------------------------------------------------------


@pytest.mark.parametrize("style", STYLES)
def test_api_key_is_sent_but_never_recorded(scripted_llm: ScriptedLLM, style: str):
    echo = f"Incorrect API key provided: {KEY}"
    scripted_llm.push(
        Reply(status=500, message=echo), "fine", Reply(status=500, message=echo), Reply(status=500, message=echo)
    )
    reasons: list[str] = []
    client = make(scripted_llm, style, max_retries=1, on_retry=lambda n, r: reasons.append(r))
    text, ok_call = client.complete("p", [])
    with pytest.raises(ModelError) as info:
        client.complete("q", [])

    assert text == "fine"
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in scripted_llm.requests)
    assert "Incorrect API key provided: ***" in info.value.call.error
    for blob in [
        ok_call.model_dump_json(),
        info.value.call.model_dump_json(),
        str(info.value),
        repr(info.value),
        *reasons,
    ]:
        assert KEY not in blob
    assert len(reasons) == 2


def test_key_and_endpoint_from_environment(scripted_llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_BASE_URL", scripted_llm.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "env-key-123")
    scripted_llm.push("from env")
    text, call = ModelClient(AgentConfig(model="m")).complete("p", [])
    assert text == "from env"
    assert scripted_llm.last_request.headers["authorization"] == "Bearer env-key-123"
    assert call.params["base_url"] == scripted_llm.base_url


def test_local_server_without_key_gets_placeholder(scripted_llm: ScriptedLLM):
    scripted_llm.push("ok")
    client = ModelClient(AgentConfig(model="m", base_url=scripted_llm.base_url))
    assert client.complete("p", [])[0] == "ok"
    assert scripted_llm.last_request.headers["authorization"] == "Bearer not-needed"


def test_model_available(monkeypatch: pytest.MonkeyPatch):
    ok, msg = model_available(AgentConfig())
    assert not ok and "OPENAI_API_KEY" in msg and "OPENAI_BASE_URL" in msg
    assert model_available(AgentConfig(base_url="http://u:pw@127.0.0.1:9/v1"))[0]
    assert "pw" not in model_available(AgentConfig(base_url="http://u:pw@127.0.0.1:9/v1"))[1]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-zzzz")
    ok, msg = model_available(AgentConfig())
    assert ok and "sk-zzzz" not in msg


# -- response cache ------------------------------------------------------------------------


@pytest.mark.parametrize("style", STYLES)
def test_cache_hit_makes_no_request(scripted_llm: ScriptedLLM, style: str):
    scripted_llm.push(
        Reply(text="once", prompt_tokens=10, completion_tokens=1, cached_tokens=3), "second prompt", "different stop"
    )
    cache = DictCache()
    client = make(scripted_llm, style, cache=cache)
    t1, c1 = client.complete("same", ["\n"])
    t2, c2 = client.complete("same", ["\n"])
    assert (t1, t2) == ("once", "once")
    assert len(scripted_llm.requests) == 1
    assert c1.cached is False and c2.cached is True
    assert c2.usage == c1.usage and c2.prompt_hash == c1.prompt_hash
    assert client.complete("other", ["\n"])[0] == "second prompt"
    assert client.complete("same", ["\nObs"])[0] == "different stop"
    assert len(scripted_llm.requests) == 3 and len(cache.data) == 3


def test_cache_key_covers_model_and_instruction(scripted_llm: ScriptedLLM):
    scripted_llm.set_default("fresh")
    cache = DictCache()
    make(scripted_llm, "chat", cache=cache).complete("p", [])
    make(scripted_llm, "chat", cache=cache).complete("p", [], chat_instruction="other")
    make(scripted_llm, "chat", cache=cache, model="other-model").complete("p", [])
    make(scripted_llm, "completions", cache=cache).complete("p", [])
    make(scripted_llm, "chat", cache=cache).complete("p", [])  # the only hit
    assert len(scripted_llm.requests) == 4


def test_temperature_above_zero_is_never_cached(scripted_llm: ScriptedLLM):
    scripted_llm.push("a", "b")
    cache = DictCache()
    client = make(scripted_llm, cache=cache, temperature=0.7)
    assert [client.complete("p", [])[0] for _ in range(2)] == ["a", "b"]
    assert len(scripted_llm.requests) == 2 and cache.data == {}


def test_cache_off_is_respected(scripted_llm: ScriptedLLM):
    scripted_llm.push("a", "b")
    cache = DictCache()
    client = make(scripted_llm, cache=cache)
    client.config = client.config.model_copy(update={"cache": False})
    assert [client.complete("p", [])[0] for _ in range(2)] == ["a", "b"]
    assert cache.data == {}


def test_failures_are_not_cached(scripted_llm: ScriptedLLM):
    scripted_llm.push(Reply(status=500), "ok")
    cache = DictCache()
    client = make(scripted_llm, cache=cache, max_retries=0)
    with pytest.raises(ModelError):
        client.complete("p", [])
    assert cache.data == {}
    assert client.complete("p", [])[0] == "ok" and len(scripted_llm.requests) == 2
