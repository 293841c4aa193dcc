"""A pause gate shared by every model client of one endpoint in this process.

When a server answers 429 with Retry-After, one client closing the gate makes every
thread talking to that endpoint wait before its next request: a batch slows down
together instead of hammering the server and failing episodes one by one.
"""

from __future__ import annotations

import threading
import time


class PauseGate:
    """`wait()` blocks until the gate is open; `pause(s)` closes it for s seconds
    (a later pause extends it, an earlier one never shortens it)."""

    def __init__(self) -> None:
        self._until = 0.0
        self._lock = threading.Lock()
        self.pauses = 0  # how many times a server asked us to slow down (for tests/UI)

    def pause(self, seconds: float) -> None:
        with self._lock:
            self._until = max(self._until, time.monotonic() + max(0.0, seconds))
            self.pauses += 1

    def remaining(self) -> float:
        with self._lock:
            return max(0.0, self._until - time.monotonic())

    def wait(self, cancel: threading.Event | None = None) -> float:
        """Sleep until open (or until `cancel` is set); return the seconds waited."""
        waited = 0.0
        while (left := self.remaining()) > 0:
            if cancel is None:
                time.sleep(left)
            elif cancel.wait(left):
                break
            waited += left
        return waited


_GATES: dict[str, PauseGate] = {}
_GATES_LOCK = threading.Lock()


def gate_for(endpoint: str) -> PauseGate:
    """The process-wide gate of one endpoint (base URL)."""
    with _GATES_LOCK:
        gate = _GATES.get(endpoint)
        if gate is None:
            gate = _GATES[endpoint] = PauseGate()
        return gate
