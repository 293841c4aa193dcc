"""The scripted server as the client meets it: an exhausted script is a clear 500, a table responder
plays by the prompt's tail, callables and reset, the session server is shared, each request goes to its
own endpoint and path, and a JSON answer is read whatever its content type."""

from __future__ import annotations

import openai
import pytest

from agent.client import DEFAULT_CHAT_INSTRUCTION, ModelError
from tests.client_helpers import make, sent_text
from tests.scripted_server import Reply, ScriptedLLM, table_responder


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)


def test_exhausted_script_is_a_clear_500(scripted_llm: ScriptedLLM):
    raw = openai.OpenAI(base_url=scripted_llm.base_url, api_key="k", max_retries=0)
    with pytest.raises(openai.InternalServerError, match="script exhausted"):
        raw.completions.create(model="m", prompt="p")
    scripted_llm.set_default("default reply")
    assert raw.completions.create(model="m", prompt="p").choices[0].text == "default reply"
    assert [m.id for m in raw.models.list()] == ["scripted-model"]


def test_table_responder_plays_by_prompt_tail(scripted_llm: ScriptedLLM):
    scripted_llm.set_responder(
        table_responder(
            {
                "Thought 1:": " search it\nAction 1: Search[X]\nObservation 1: junk",
                "Observation 1: X is Y.\nThought 2:": " done\nAction 2: Finish[Y]\n",
            }
        )
    )
    client = make(scripted_llm)
    stop = ["\nObservation 1:", "\nObservation 2:"]
    assert client.complete("Q\nThought 1:", stop)[0] == " search it\nAction 1: Search[X]"
    p2 = "Q\nThought 1: s\nAction 1: Search[X]\nObservation 1: X is Y.\nThought 2:"
    assert client.complete(p2, stop)[0] == " done\nAction 2: Finish[Y]\n"
    with pytest.raises(ModelError, match="no scripted reply"):
        make(scripted_llm, max_retries=0).complete("unknown", [])


def test_callable_in_queue_and_reset(scripted_llm: ScriptedLLM):
    scripted_llm.push(lambda body: body["prompt"].upper())
    assert make(scripted_llm).complete("shout", [])[0] == "SHOUT"
    scripted_llm.push("left over")
    scripted_llm.reset()
    assert scripted_llm.pending == 0 and scripted_llm.requests == []
    with pytest.raises(ValueError, match="unknown reply fields"):
        scripted_llm.push({"txt": "typo"})


def test_session_server_is_shared(scripted_llm_session: ScriptedLLM):
    scripted_llm_session.reset()
    scripted_llm_session.push({"text": "dict reply", "cached_tokens": 2})
    text, call = make(scripted_llm_session).complete("p", [])
    assert text == "dict reply" and call.usage.cached_prompt_tokens == 2


def test_each_request_goes_to_its_own_endpoint_and_path(scripted_llm: ScriptedLLM, scripted_llm_session: ScriptedLLM):
    """A request's URL is made once per client and path: clients of two endpoints in one
    process, and one client whose config turns to chat, each send every request to their
    own server and path."""
    scripted_llm_session.reset()
    for llm in (scripted_llm, scripted_llm_session):
        llm.set_responder(lambda body: " ok")
    a, b = make(scripted_llm), make(scripted_llm_session)
    for _ in range(2):
        a.complete("to a", [])
        b.complete("to b", [])
    a.config = a.config.model_copy(update={"api_style": "chat"})
    a.complete("chat to a", [])
    assert [(r.path, sent_text(r)) for r in scripted_llm.requests] == [
        ("/v1/completions", "to a"),
        ("/v1/completions", "to a"),
        ("/v1/chat/completions", f"chat to a\n\n{DEFAULT_CHAT_INSTRUCTION}"),
    ]
    assert [(r.path, sent_text(r)) for r in scripted_llm_session.requests] == [("/v1/completions", "to b")] * 2


def test_a_json_answer_is_read_whatever_its_content_type(scripted_llm: ScriptedLLM):
    """The answer's JSON is read from its body (no `APIResponse` around it): a server that
    labels it text/plain is still understood; a body that is not JSON is malformed."""
    body = (
        '{"id": "x", "object": "text_completion", "created": 0, "model": "m", "choices": [{"text": " ok", "index": 0}]}'
    )
    scripted_llm.push(
        Reply(body=body, content_type="text/plain"), Reply(body="<html>", content_type="application/json")
    )
    client = make(scripted_llm, max_retries=0)
    assert client.complete("p", [])[0] == " ok"
    with pytest.raises(ModelError) as info:
        client.complete("p", [])
    assert "malformed response from the model server: body is not valid JSON" in info.value.call.error
