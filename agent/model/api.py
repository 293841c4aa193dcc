"""The model layer's shared names: a call's request, its record's errors, the CallWatch a caller
follows and stops a call with, the Provider interface, and endpoint resolution."""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from trajectory.records import AgentConfig, ModelCall, Usage, without_credentials

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_CHAT_INSTRUCTION = "Continue the transcript above. Reply with exactly the next step and nothing else."
NO_KEY_PLACEHOLDER = "not-needed"  # vLLM / Ollama / llama.cpp accept any key
MAX_STOP_SEQUENCES = 4  # OpenAI rejects more; the rest are applied client-side
CONVERSATION_STYLES = ("messages", "tools")  # whose prompt is the request's JSON and whose answer a message
REQUEST_HEAD = '{\n  "messages": ['  # how such a prompt begins (trajectory.conversation.request_text)


def is_conversation(style: str, prompt: str) -> bool:
    """Whether a prompt is a conversation style's request JSON; a one-shot prompt of such a style
    (a Standard/CoT answer, the critic's) is sent as one user message, as the chat style sends it."""
    return style in CONVERSATION_STYLES and prompt.startswith(REQUEST_HEAD)


UNREACHABLE = "cannot reach the model server"  # how an unreachable endpoint's error begins
ENDPOINT_KEYS: Any = None  # the app's key guard (agent.endpoint_keys.EndpointKeys), set as agent.client.ENDPOINT_KEYS


class ModelError(Exception):
    """A model call failed for good (after retries). `.call` holds the recorded ModelCall."""

    def __init__(self, call: ModelCall):
        super().__init__(call.error or "model call failed")
        self.call = call


@dataclass
class CallWatch:
    """Lets the caller of one call follow and stop it: `on_retry(attempt, reason)` hears of
    each retry (the reason says how long it waits), `on_text(text)` the completion so far while
    it streams, and a set `cancel` ends the call (the UI's Stop): the request in flight is
    cancelled and its connection closed, and no further attempt is made."""

    cancel: threading.Event
    on_retry: Callable[[int, str], None] | None = None
    on_text: Callable[[str], None] | None = None


@dataclass
class Request:
    """One model request as the provider sends it: the text (the prompt, or the chat message),
    the stops sent (at most MAX_STOP_SEQUENCES), and the config's sampling fields."""

    config: AgentConfig
    text: str
    stop: list[str]
    chat_extra: dict[str, Any] | None = None
    stream: bool = True
    extra: dict[str, Any] = field(default_factory=dict)
    conversation: bool = False  # `text` is a conversation style's request JSON (messages, tools)


class Provider(Protocol):
    """What a model provider does: send one request (one attempt) and return (text, usage);
    raise `Cancelled` when `cancel` was set while it was in flight, and classify its errors."""

    def send(
        self, request: Request, cancel: threading.Event | None, on_text: Callable[[str], None] | None
    ) -> tuple[str, Usage]:
        """(text, usage) of one attempt. Raises Cancelled when `cancel` was set meanwhile; any other
        error is the provider's own, for `classify`."""

    def classify(self, exc: Exception) -> tuple[str, bool, float | None, bool]:
        """(one-line reason, retryable?, the server's requested wait or None, rate limited?)."""


class Malformed(Exception):
    """The server answered 200 with something that is not a completion."""


class Cancelled(Exception):
    """Stop came while the request was in flight: it was cancelled."""


class Refused(Exception):
    """The wire refused what the server sent (a redirect, a body past the bound): not retried."""


def resolve_base_url(config: AgentConfig) -> str:
    """The URL the config's calls go to: the built-in model's when it is wanted, else the config's,
    else $OPENAI_BASE_URL, else DEFAULT_BASE_URL."""
    from agent import local_model  # (the built-in model: its URL is known once it is started)

    if local_model.wanted(config):
        return local_model.Local().identity
    return config.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL


def public_url(url: str) -> str:
    """The endpoint without credentials (userinfo, query, fragment, a key in the path): safe
    to record."""
    try:
        return without_credentials(url)
    except ValueError:
        return "<invalid url>"


def model_available(config: AgentConfig) -> tuple[bool, str]:
    """Is a model configured? (ok, one-line message for the UI banner)."""
    from agent import local_model

    if local_model.wanted(config):
        return local_model.availability()
    base = config.base_url or os.environ.get("OPENAI_BASE_URL")
    if base:
        return True, f"Model {config.model} at {public_url(base)}."
    if os.environ.get("OPENAI_API_KEY"):
        return True, f"Model {config.model} via the OpenAI API (key from OPENAI_API_KEY)."
    return False, (
        "No model configured. Set OPENAI_API_KEY, or OPENAI_BASE_URL for vLLM / Ollama / "
        "llama.cpp (or a base URL in the agent config), then reload."
    )


def stop_cut(text: str, stop: list[str]) -> str:
    """Cut at the earliest stop string (removed), as a server would; for servers that
    ignore `stop` and for the stops beyond the first four."""
    cuts = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return text[: min(cuts)] if cuts else text


def chat_message(prompt: str, instruction: str | None) -> str:
    """A chat request's one user message: the prompt, a blank line, then the instruction."""
    return f"{prompt}\n\n{instruction or DEFAULT_CHAT_INSTRUCTION}"


def sha256(text: str) -> str:
    """The hex sha256 of the text's UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def one_line(text: str, limit: int = 300) -> str:
    """The text's whitespace folded to single spaces, cut to `limit` characters (ending in ...)."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
