"""The retry policy: which failures are retried, how long each retry waits (our backoff, or the
server's Retry-After, bounded), and the loop that asks until an answer, a failure for good, or
Stop. Every retry - a 429 too - counts against the config's `max_retries`; each retry is
announced with the wait before it."""

from __future__ import annotations

import email.utils
import math
import random
import time
from datetime import timezone
from typing import Any, Callable

from agent.model.api import CallWatch, Cancelled, Malformed
from agent.ratelimit import PauseGate
from trajectory.records import ModelCall

BACKOFF_BASE_S = 1.0  # first retry waits ~this, doubling each time (plus jitter)
BACKOFF_MAX_S = 30.0
RETRY_AFTER_MAX_S = 60.0  # a server's Retry-After is honoured up to this bound
MALFORMED_RETRIES = 1  # a garbage response is retried at most once
RETRYABLE_STATUS = frozenset({408, 409, 429})


def backoff_s(attempt: int, base_s: float) -> float:
    """Our own wait before retry `attempt` (1, 2, ...): exponential with jitter, bounded."""
    base = min(base_s * (2 ** (attempt - 1)), BACKOFF_MAX_S)
    return base * (0.75 + random.random() * 0.5)


def run(
    call: ModelCall,
    attempt: Callable[[], Any],
    classify: Callable[[Exception], tuple[str, bool, float | None, bool]],
    *,
    max_retries: int,
    gate: PauseGate,
    watch: CallWatch | None,
    hooks: list[Callable[[int, str], None]],
    backoff_base_s: float,
) -> Any:
    """Call `attempt()` until it returns; each try counts in `call.attempts`. A failure is
    retried while retryable and `max_retries` allows (429s included); a 429 pauses every
    request to the endpoint (`gate`). Raises `Cancelled` (Stop) or `GaveUp` (its reason)."""
    cancel = watch.cancel if watch is not None else None
    malformed = 0
    while True:
        gate.wait(cancel)  # Stop ends the wait
        if cancel is not None and cancel.is_set():
            raise Cancelled("cancelled before the request was sent")
        call.attempts += 1
        try:
            return attempt()
        except Cancelled:
            raise
        except Exception as exc:  # classified here; nothing escapes unrecorded
            reason, retryable, delay, limited = classify(exc)
            if isinstance(exc, Malformed):
                malformed += 1
                retryable = malformed <= MALFORMED_RETRIES
            if not retryable or call.attempts > max_retries:
                raise GaveUp(reason) from None
            if delay is None:
                delay = backoff_s(call.attempts, backoff_base_s)
            for hook in hooks:
                hook(call.attempts, f"{reason}; waiting {delay:.1f} s")
            if limited:  # a 429: every request to this endpoint waits, not just this one
                gate.pause(delay)
                if cancel is None or not cancel.is_set():
                    continue
            elif cancel is None:
                time.sleep(delay)
                continue
            elif not cancel.wait(delay):
                continue
            raise GaveUp(f"cancelled: {reason}") from None


class GaveUp(Exception):
    """The call failed for good: its one-line reason."""


def retry_after_s(headers: Any, max_s: float, now: float | None = None) -> float | None:
    """The wait a server asked for (`retry-after-ms`, else `Retry-After` in seconds or as an
    HTTP date), bounded to [0, max_s]; None (our own backoff) when it is absent, unreadable
    (`soon`, `nan`), negative or already past. Never raises: any header value is safe."""
    delay: float | None = None
    try:
        ms = _seconds(headers.get("retry-after-ms"))
        raw = headers.get("retry-after")
    except Exception:  # headers of an unexpected shape: no server delay
        return None
    if ms is not None:
        delay = ms / 1000
    elif raw:
        delay = _seconds(raw)
        if delay is None:
            delay = _http_date_delay(str(raw), time.time() if now is None else now)
    if delay is None or delay < 0:
        return None
    return min(delay, max_s)


def _seconds(value: Any) -> float | None:
    """A header value as a finite number of seconds, else None (`nan`, `inf`, `soon`)."""
    if value is None:
        return None
    try:
        number = float(str(value).strip())
    except (TypeError, ValueError):
        return None
    if math.isnan(number):
        return None
    if math.isinf(number):  # +inf: "a very long wait", bounded by the caller; -inf: none
        return math.inf if number > 0 else None
    return number


def _http_date_delay(raw: str, now: float) -> float | None:
    """Seconds until an HTTP-date Retry-After (a date without a zone is UTC, as HTTP dates are)."""
    try:
        when = email.utils.parsedate_to_datetime(raw)
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        return when.timestamp() - now
    except (TypeError, ValueError, OverflowError, IndexError, OSError):
        return None
