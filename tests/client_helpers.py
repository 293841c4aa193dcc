"""Helpers for the model client's tests (tests/agent/test_client*.py): a client on the scripted
server (`make`), an in-memory cache in the store's role (`DictCache`), what a request carried
(`sent_text`), the API styles both paths run and a key that must never be recorded."""

from __future__ import annotations

from agent.client import ModelClient
from tests.scripted_server import ScriptedLLM
from trajectory.records import AgentConfig, Usage

STYLES = ["completions", "chat"]
KEY = "sk-test-SECRET-4f9a2b"


class DictCache:
    """The store's role in memory: a recorded, successful call answers its cache key."""

    def __init__(self) -> None:
        self.data: dict[str, tuple[str, Usage]] = {}

    def get(self, key: str) -> tuple[str, Usage] | None:
        return self.data.get(key)

    def record(self, call) -> None:
        if call.cache_key and call.error is None and not call.cached:
            self.data[call.cache_key] = (call.completion, call.usage)


def make(
    llm: ScriptedLLM,
    style: str = "completions",
    *,
    cache=None,
    on_retry=None,
    api_key: str | None = KEY,
    retry_after_max_s: float | None = None,
    **cfg,
) -> ModelClient:
    config = AgentConfig(model=cfg.pop("model", "test-model"), base_url=llm.base_url, api_style=style, **cfg)
    client = ModelClient(
        config,
        api_key=api_key,
        cache=cache,
        on_retry=on_retry,
        backoff_base_s=0.001,
        retry_after_max_s=retry_after_max_s,
    )
    if isinstance(cache, DictCache):  # record each call, as the engine does through the store
        complete = client.complete

        def recorded(*a, **kw):
            text, call = complete(*a, **kw)
            cache.record(call)
            return text, call

        client.complete = recorded
    return client


def sent_text(req) -> str:
    """What the client put in the request: the prompt, or the single chat message."""
    if "prompt" in req.body:
        return req.body["prompt"]
    (msg,) = req.body["messages"]
    assert msg["role"] == "user"
    return msg["content"]
