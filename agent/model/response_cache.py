"""The response cache and the kept-answer rule: which earlier answer may stand for a request.
Identical temperature-0 requests (same endpoint, model, style, prompt, instruction, stops,
max_tokens, top_p) share a cache key; a blocked write's kept answer stands for exactly its
own request. Whether the answer streamed plays no part in either."""

from __future__ import annotations

import hashlib
import json
from typing import Protocol

from agent.model.api import DEFAULT_CHAT_INSTRUCTION, sha256
from trajectory.records import AgentConfig, ModelCall, Usage

MAX_FIXED = 256  # fixed prompt parts (each task's examples + task text) whose hash is remembered
_FIXED: dict[str, "hashlib._Hash"] = {}


class ResponseCache(Protocol):
    """Answers identical temperature-0 requests; recording a call is what fills it."""

    def get(self, key: str) -> tuple[str, Usage] | None:
        """(completion, usage) stored under `key`, or None."""


def cacheable(cache: ResponseCache | None, config: AgentConfig) -> bool:
    """May this config's calls be answered from the cache (a cache, caching on, temperature 0)?"""
    return bool(cache is not None and config.cache and config.temperature == 0)


def cache_key(config: AgentConfig, public_url: str, prompt: str, instruction: str | None, stop: list[str]) -> str:
    """The hex key of a request: everything that shapes its answer (endpoint, model, style,
    prompt, instruction, stop, sampling settings), never the API key."""
    chat = config.api_style != "completions"  # (a conversation style's request JSON: a constant added)
    blob = json.dumps(
        {
            "base_url": public_url,
            "model": config.model,
            "api_style": config.api_style,
            "prompt": prompt,
            "chat_instruction": (instruction or DEFAULT_CHAT_INSTRUCTION) if chat else None,
            "stop": stop,
            "max_tokens": config.max_tokens,
            "top_p": config.top_p,
        },
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return sha256(blob)


def kept_match(kept: list[ModelCall], want: ModelCall) -> ModelCall | None:
    """The kept answer for exactly this request (same prompt, model and parameters), taken out
    of `kept`; None if there is none."""
    for i, old in enumerate(kept):
        if (old.prompt_hash, old.model, old.api_style, old.params) == (
            want.prompt_hash,
            want.model,
            want.api_style,
            want.params,
        ) and old.completion is not None:
            return kept.pop(i)
    return None


def digest(text: str, fixed: str | None) -> str:
    """sha256 of `text`; `fixed` (a part it starts with, the same from call to call) is hashed
    once, not at every call."""
    if not fixed or not text.startswith(fixed):
        return sha256(text)
    state = _FIXED.get(fixed)
    if state is None:
        if len(_FIXED) >= MAX_FIXED:
            _FIXED.clear()
        state = _FIXED[fixed] = hashlib.sha256(fixed.encode("utf-8"))
    h = state.copy()
    h.update(text[len(fixed) :].encode("utf-8"))
    return h.hexdigest()
