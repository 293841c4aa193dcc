"""One model call in a thread of its own, with a Stop to set: what the Stop and streaming tests
of the model client share."""

from __future__ import annotations

import threading
from typing import Callable

from agent.client import CallWatch, ModelClient, ModelError
from trajectory.records import AgentConfig


def call_in_thread(
    config: AgentConfig, *, stream: bool | None = None, on_text: Callable[[str], None] | None = None, api_key: str = "k"
) -> tuple[threading.Thread, CallWatch, dict]:
    """(the thread, its watch, {"call": the call record} once it ended in an error)."""
    client = ModelClient(config, api_key=api_key, stream=stream)
    watch = CallWatch(threading.Event(), on_text=on_text)
    got: dict = {}

    def call() -> None:
        try:
            client.complete("p", [], watch=watch)
        except ModelError as exc:
            got["call"] = exc.call

    t = threading.Thread(target=call, daemon=True)
    t.start()
    return t, watch, got
