"""The model client: one call = one recorded `ModelCall`, on the official `openai` package.

A call is answered from the response cache when it may be (`response_cache`), else asked of
the provider (`openai_compatible`) until an answer, a failure for good or Stop (`retries`,
`cancel`). The API key is only ever handed to the openai client: it is never recorded, and any
text that could echo it (error bodies) is scrubbed before it leaves this module."""

from __future__ import annotations

import contextlib
import json
import os
import time
from typing import Any, Callable

from agent import local_model
from agent.model import api, response_cache, retries
from agent.model.api import (
    CONVERSATION_STYLES,
    MAX_STOP_SEQUENCES,
    NO_KEY_PLACEHOLDER,
    CallWatch,
    Cancelled,
    Malformed,
    ModelError,
    Request,
    chat_message,
    is_conversation,
    public_url,
    resolve_base_url,
    stop_cut,
)
from agent.model.openai_compatible import OpenAICompatible
from agent.model.response_cache import ResponseCache
from agent.model.wire import shared_openai
from agent.ratelimit import PauseGate, gate_for
from trajectory.conversation import request_body, request_text
from trajectory.records import MAX_TEXT, AgentConfig, ModelCall

# may calls stream? `react-editor app --no-stream` (REACT_EDITOR_STREAM=0) or `set_streaming(False)` says no
STREAM = [os.environ.get("REACT_EDITOR_STREAM", "1").strip() != "0"]


def set_streaming(on: bool) -> None:
    """Stream answers (True, the default) or take them whole, for every client of the process."""
    STREAM[0] = bool(on)


def streams(client_choice: bool | None, watch: CallWatch | None) -> bool:
    """Does this call stream? The client's own choice if it made one; else yes when the caller
    reads the answer as it comes (`watch.on_text`: the Editor's step) and `--no-stream` is not
    given. A call nobody watches (a batch run) asks for its answer in one piece: streamed, every
    token wakes the worker, which on a loaded machine waits for a core each time."""
    if client_choice is not None:
        return client_choice
    return STREAM[0] and watch is not None and watch.on_text is not None


class ModelClient:
    """Sends prompts to one configured model; every call returns its `ModelCall`."""

    def __init__(
        self,
        config: AgentConfig,
        *,
        api_key: str | None = None,
        cache: ResponseCache | None = None,
        on_retry: Callable[[int, str], None] | None = None,
        backoff_base_s: float | None = None,
        retry_after_max_s: float | None = None,
        chat_extra: dict[str, Any] | None = None,
        stream: bool | None = None,
    ):
        self.config = config
        self.chat_extra = chat_extra  # more body fields for chat requests (the critic's JSON mode)
        self.cache = cache
        self.on_retry = on_retry
        self.stream = stream  # None: stream when the caller reads the answer as it comes (`streams`)
        self.backoff_base_s = backoff_base_s
        self.local = local_model.for_config(config)  # the built-in model: started on the first request
        self.base_url = resolve_base_url(config)
        self.public_url = self.local.identity if self.local else public_url(self.base_url)  # (in every call's record)
        self.gate: PauseGate = gate_for(self.public_url)
        key = api_key or os.environ.get("OPENAI_API_KEY") or NO_KEY_PLACEHOLDER
        self._secrets = [key] if key != NO_KEY_PLACEHOLDER and len(key) >= 4 else []
        self._key = key
        self._openai: Any = None
        self._sent_key: str | None = None
        self.provider = OpenAICompatible(
            self.sdk_client,
            self.public_url,
            lambda: self.config.timeout_s,
            self._scrub,
            retries.RETRY_AFTER_MAX_S if retry_after_max_s is None else retry_after_max_s,
        )

    def complete(
        self,
        prompt: str,
        stop: list[str],
        *,
        purpose: str = "step",
        chat_instruction: str | None = None,
        watch: CallWatch | None = None,
        fixed: str | None = None,
    ) -> tuple[str, ModelCall]:
        """Return the completion (cut at `stop`) and its record; raise ModelError when
        the call fails for good or is cancelled through `watch` (the error is in `.call.error`).
        `fixed`: the part the prompt starts with that repeats from call to call (the examples
        and the task): its hash is worked out once, not at every call."""
        stop = list(stop or [])
        fixed = fixed if fixed and prompt.startswith(fixed) else None
        call = self._new_call(prompt, stop, purpose, chat_instruction, fixed)
        started = time.perf_counter()
        if self._from_cache(call, prompt, chat_instruction, stop, started):
            return call.completion, call
        cfg = self.config
        request = self._request(prompt, stop, chat_instruction, watch)
        conv = request.conversation
        cancel, on_text = (watch.cancel, watch.on_text) if watch is not None else (None, None)

        def attempt() -> tuple[str, Any]:
            with self.local.turn(cancel) if self.local else contextlib.nullcontext():  # one request at a time there
                text, usage = self.provider.send(request, cancel, on_text)
            if conv:  # an assistant message (JSON): empty when it has no text, reasoning or call
                if not _said(text):
                    raise Malformed("empty assistant message")
                return text, usage
            text = stop_cut(text, stop)
            if not text.strip():  # an empty step would only use up the budget
                raise Malformed("empty completion")
            return text, usage

        hooks = [f for f in ((watch.on_retry if watch else None), self.on_retry) if f is not None]
        base = retries.BACKOFF_BASE_S if self.backoff_base_s is None else self.backoff_base_s
        try:
            text, usage = retries.run(
                call,
                attempt,
                self._classify,
                max_retries=cfg.max_retries,
                gate=self.gate,
                watch=watch,
                hooks=hooks,
                backoff_base_s=base,
            )
        except (Cancelled, retries.GaveUp) as exc:
            n = call.attempts
            call.error = f"{exc} (after {n} attempt{'s' if n != 1 else ''})"
            call.latency_ms = (time.perf_counter() - started) * 1000
            raise ModelError(call) from None
        if len(text) > MAX_TEXT and not conv:  # kept text is re-sent in every later prompt (a message: its parts)
            call.cut_from, text = len(text), text[:MAX_TEXT]
        call.completion, call.usage = text, usage
        call.latency_ms = (time.perf_counter() - started) * 1000
        return text, call

    def _from_cache(
        self, call: ModelCall, prompt: str, chat_instruction: str | None, stop: list[str], started: float
    ) -> bool:
        """Whether the response cache answered the call (then `call` holds the answer); sets its cache key."""
        key = None
        if response_cache.cacheable(self.cache, self.config):
            key = response_cache.cache_key(self.config, self.public_url, prompt, chat_instruction, stop)
        call.cache_key = key
        if key is None:
            return False
        hit = self.cache.get(key)  # type: ignore[union-attr]
        if hit is None:
            return False
        call.completion, call.usage, call.cached = hit[0], hit[1], True
        call.latency_ms = (time.perf_counter() - started) * 1000
        return True

    def _request(self, prompt: str, stop: list[str], chat_instruction: str | None, watch: CallWatch | None) -> Request:
        """The request for a prompt: a conversation as it is, else a one-shot prompt (one user message
        in a chat style)."""
        cfg = self.config
        conv = is_conversation(cfg.api_style, prompt)
        sent = prompt if conv or cfg.api_style == "completions" else chat_message(prompt, chat_instruction)
        return Request(
            config=cfg,
            text=sent,
            stop=stop[:MAX_STOP_SEQUENCES],
            chat_extra=self.chat_extra,
            stream=streams(self.stream, watch),
            conversation=conv,
        )

    def converse(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        purpose: str = "step",
        watch: CallWatch | None = None,
    ) -> tuple[dict[str, Any], ModelCall]:
        """One request of the `messages` / `tools` style: the assistant message (role, content,
        `reasoning_content` when the server sent one, `tool_calls` with their arguments as sent)
        and its record. The request's JSON is the call's prompt (hashed, and the cache key)."""
        if self.config.api_style not in CONVERSATION_STYLES:
            raise ValueError(f"converse() is for the messages and tools styles, not {self.config.api_style}")
        text, call = self.complete(request_text(request_body(messages, tools)), [], purpose=purpose, watch=watch)
        return json.loads(text), call

    def kept_answer(
        self,
        kept: list[ModelCall],
        prompt: str,
        stop: list[str],
        *,
        purpose: str = "step",
        chat_instruction: str | None = None,
    ) -> tuple[str, ModelCall] | None:
        """The answer a blocked write kept for exactly this request (same prompt, model and
        parameters), taken out of `kept` and returned as a cached call; None if there is none.
        Used whatever the cache setting: it is this request's own paid answer."""
        want = self._new_call(prompt, list(stop or []), purpose, chat_instruction)
        old = response_cache.kept_match(kept, want)
        if old is None:
            return None
        want.completion, want.usage, want.cached, want.latency_ms = old.completion, old.usage, True, 0.0
        want.cache_key, want.cut_from = old.cache_key, old.cut_from
        return old.completion, want

    def _new_call(
        self, prompt: str, stop: list[str], purpose: str, chat_instruction: str | None, fixed: str | None = None
    ) -> ModelCall:
        """The call's record before it is made: what was asked, hashed (the prompt is not kept)."""
        cfg = self.config
        chat = cfg.api_style != "completions" and not is_conversation(cfg.api_style, prompt)
        hashed = chat_message(prompt, chat_instruction) if chat else prompt
        params: dict[str, Any] = {
            "temperature": cfg.temperature,
            "top_p": cfg.top_p,
            "max_tokens": cfg.max_tokens,
            "stop": stop,
            "base_url": self._scrub(self.public_url) if self._secrets else self.public_url,
        }
        return ModelCall(
            model=cfg.model,
            api_style=cfg.api_style,
            params=params,
            purpose=purpose,
            prompt_hash=response_cache.digest(hashed, fixed),
            prompt_chars=len(hashed),
            attempts=0,
        )

    def sdk_client(self) -> Any:
        """The shared `openai.OpenAI` of this endpoint, key and timeout (built on first use: a
        cache hit never needs one). In the app, the key is the one its guard allows here."""
        key = self._key
        guard = api.ENDPOINT_KEYS  # (the app installs it as `agent.client.ENDPOINT_KEYS`)
        if self.local is not None:  # the built-in model's own server and key (started or found now)
            self.base_url, key = self.local.endpoint()
        elif guard is not None:  # the app: the launch key only where allowed, else one typed for it
            key = guard.key_for(self.base_url, "" if key == NO_KEY_PLACEHOLDER else key) or NO_KEY_PLACEHOLDER
            if key != NO_KEY_PLACEHOLDER and key not in self._secrets:
                self._secrets.append(key)
        if self._openai is None or key != self._sent_key or self._timeout != self.config.timeout_s:
            self._openai = shared_openai(key, self.base_url, self.config.timeout_s)
            self._sent_key, self._timeout = key, self.config.timeout_s
        return self._openai

    _timeout: float | None = None

    def _classify(self, exc: Exception) -> tuple[str, bool, float | None, bool]:
        """The provider's reading of an error; the built-in model's own failures (it cannot
        start, its server died) are one line saying what to do, not retried."""
        if isinstance(exc, local_model.LocalModelError):
            return str(exc), False, None, False
        return self.provider.classify(exc)

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


def _said(text: str) -> bool:
    """Whether an assistant message (the JSON a conversation style's call returns) says anything."""
    try:
        msg = json.loads(text)
    except ValueError:
        return False
    return bool((msg.get("content") or "").strip() or msg.get("reasoning_content") or msg.get("tool_calls"))
