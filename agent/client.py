"""The model client's public names, where the rest of the project imports them from (the model
layer itself is the package `agent.model`: see its first docstring). `ENDPOINT_KEYS` is the
app's key guard (`agent.endpoint_keys.EndpointKeys`), installed here (it is kept in
`agent.model.api.ENDPOINT_KEYS` and read at each call); None in the CLI."""

from __future__ import annotations

import sys
import types
from typing import Any

from agent.model import api
from agent.model.api import (
    DEFAULT_BASE_URL,
    DEFAULT_CHAT_INSTRUCTION,
    MAX_STOP_SEQUENCES,
    NO_KEY_PLACEHOLDER,
    UNREACHABLE,
    CallWatch,
    ModelError,
    Provider,
    Request,
    chat_message,
    model_available,
    public_url,
    resolve_base_url,
    sha256,
    stop_cut,
)
from agent.model.client import ModelClient, set_streaming
from agent.model.response_cache import ResponseCache
from agent.model.retries import retry_after_s
from agent.model.wire import MAX_BODY_BYTES, shared_openai

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_CHAT_INSTRUCTION",
    "ENDPOINT_KEYS",
    "MAX_BODY_BYTES",
    "MAX_STOP_SEQUENCES",
    "NO_KEY_PLACEHOLDER",
    "UNREACHABLE",
    "CallWatch",
    "ModelClient",
    "ModelError",
    "Provider",
    "Request",
    "ResponseCache",
    "chat_message",
    "model_available",
    "public_url",
    "resolve_base_url",
    "retry_after_s",
    "set_streaming",
    "sha256",
    "shared_openai",
    "stop_cut",
]


class _Face(types.ModuleType):
    """This module, with `ENDPOINT_KEYS` read and set where the model layer keeps it."""

    @property
    def ENDPOINT_KEYS(self) -> Any:  # noqa: N802 - the name the app and tests set
        return api.ENDPOINT_KEYS

    @ENDPOINT_KEYS.setter
    def ENDPOINT_KEYS(self, guard: Any) -> None:  # noqa: N802
        api.ENDPOINT_KEYS = guard


sys.modules[__name__].__class__ = _Face


def __getattr__(name: str) -> Any:
    if name == "openai":  # the module, imported on first use (agent.model.wire.sdk)
        from agent.model.wire import sdk

        return sdk()
    raise AttributeError(f"module 'agent.client' has no attribute {name!r}")
