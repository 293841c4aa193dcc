"""agent.client's `fixed` prompt part (the examples and task every call of a task starts
with, hashed once): the request sent and the call recorded are exactly those of a call
without it, through the real `openai` client and the scripted server."""

from __future__ import annotations

import hashlib
import json

import pytest

from agent.client import ModelClient, chat_message
from trajectory.records import AgentConfig

FIXED = 'Examples: "quoted", back\\slash, tab\t, é, 😀, \u2028 and a newline\n' * 20 + "Question: who?\n"


@pytest.mark.parametrize("style", ["completions", "chat"])
@pytest.mark.parametrize("tail", ["Thought 1:", 'Thought 2: ünïcode "x" 😀\nAction 2:', ""])
def test_a_call_with_a_fixed_part_sends_and_records_what_one_without_does(scripted_llm, style, tail):
    scripted_llm.set_responder(lambda body: " Search[x]")
    config = AgentConfig(model="test-model", base_url=scripted_llm.base_url, api_style=style, cache=False)
    client = ModelClient(config, api_key="sk-test-key-1234", backoff_base_s=0.001)
    prompt, stop = FIXED + tail, ["\nObservation 1:"]
    text_plain, plain = client.complete(prompt, stop)
    text_fixed, fixed = client.complete(prompt, stop, fixed=FIXED)
    text_again, again = client.complete(prompt, stop, fixed=FIXED)  # (the fixed part as remembered)
    sent = [r.raw for r in scripted_llm.completion_requests]
    assert len(sent) == 3 and sent[0] == sent[1] == sent[2]
    hashed = chat_message(prompt, None) if style == "chat" else prompt
    want = {"prompt": prompt} if style == "completions" else {"messages": [{"role": "user", "content": hashed}]}
    assert json.loads(sent[1]) == {
        **want,
        "model": "test-model",
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": 100,
        "stop": stop,
    }
    assert text_plain == text_fixed == text_again == " Search[x]"
    assert plain.prompt_hash == fixed.prompt_hash == again.prompt_hash == hashlib.sha256(hashed.encode()).hexdigest()
    assert plain.prompt_chars == fixed.prompt_chars == len(hashed)


def test_a_fixed_part_the_prompt_does_not_start_with_is_ignored(scripted_llm):
    scripted_llm.set_responder(lambda body: " Search[x]")
    config = AgentConfig(model="test-model", base_url=scripted_llm.base_url, cache=False)
    client = ModelClient(config, api_key="sk-test-key-1234", backoff_base_s=0.001)
    _, call = client.complete("Another task\nThought 1:", ["\n"], fixed=FIXED)
    assert scripted_llm.completion_requests[-1].body["prompt"] == "Another task\nThought 1:"
    assert call.prompt_hash == hashlib.sha256(b"Another task\nThought 1:").hexdigest()


def test_tasks_that_share_their_examples_each_send_their_own_prompt(scripted_llm):
    """Fixed parts of several tasks start alike (the examples), one a prefix of another:
    each request still carries exactly its own prompt, hashed as itself."""
    scripted_llm.set_responder(lambda body: " Search[x]")
    config = AgentConfig(model="test-model", base_url=scripted_llm.base_url, cache=False)
    client = ModelClient(config, api_key="sk-test-key-1234", backoff_base_s=0.001)
    for n, question in enumerate(["Who? é", "Which? 😀", "Who? é and more", "Wh", "Who? é"]):
        fixed = FIXED + f"{question}\n"
        prompt = fixed + f"Thought {n + 1}:"
        _, call = client.complete(prompt, ["\n"], fixed=fixed)
        sent = scripted_llm.completion_requests[-1].raw
        assert json.loads(sent)["prompt"] == prompt
        assert call.prompt_hash == hashlib.sha256(prompt.encode()).hexdigest()


def test_each_call_sends_its_own_stops_and_parameters(scripted_llm):
    """The body's JSON around the prompt is made once per request shape: calls that differ
    only in their stops, or clients that differ in their parameters, each send their own."""
    scripted_llm.set_responder(lambda body: " Search[x]")
    sent = []
    for temperature, max_tokens in ((0.0, 100), (0.5, 100), (0.0, 7)):
        config = AgentConfig(
            model="test-model",
            base_url=scripted_llm.base_url,
            cache=False,
            temperature=temperature,
            max_tokens=max_tokens,
        )
        client = ModelClient(config, api_key="sk-test-key-1234", backoff_base_s=0.001)
        for stop in (["\nObservation 1:"], ["\nObservation 2:", "\n\n"], [], ["\nObservation 1:"]):
            client.complete(FIXED + "Thought 1:", stop, fixed=FIXED)
            raw = scripted_llm.completion_requests[-1].raw
            sent.append(json.loads(raw))
            want = {
                "prompt": FIXED + "Thought 1:",
                "model": "test-model",
                "temperature": temperature,
                "top_p": 1.0,
                "max_tokens": max_tokens,
            }
            assert sent[-1] == ({**want, "stop": stop} if stop else want)
    client.config = client.config.model_copy(update={"max_tokens": 3})  # a client given a new config sends it
    client.complete(FIXED + "Thought 1:", ["\nObservation 1:"], fixed=FIXED)
    assert scripted_llm.completion_requests[-1].body["max_tokens"] == 3
