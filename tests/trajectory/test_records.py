"""The records' own helpers (trajectory/records.py)."""

from __future__ import annotations

from datetime import datetime, timezone

from trajectory import records


def test_now_stamps_the_clock_as_isoformat_writes_it(monkeypatch):
    """`now()` is the clock's instant exactly as `datetime.isoformat` writes it in UTC (with
    the microseconds, even when they are 0), and a new second is written anew."""
    clock = {"ns": 1_700_000_000_000_000_000}
    monkeypatch.setattr(records.time, "time_ns", lambda: clock["ns"])
    for ns in (
        1_700_000_000_000_000_000,
        1_700_000_000_999_999_000,
        1_700_000_001_000_001_999,
        1_700_000_001_500_000_000,
        1_699_999_999_000_000_000,
        951_782_400_123_456_789,
    ):
        clock["ns"] = ns
        want = datetime.fromtimestamp(ns // 1_000_000_000, timezone.utc).replace(microsecond=ns // 1000 % 1_000_000)
        assert records.now() == want.isoformat(timespec="microseconds")


def test_now_is_the_time_now():
    before = datetime.now(timezone.utc).isoformat(timespec="microseconds")
    stamp = records.now()
    after = datetime.now(timezone.utc).isoformat(timespec="microseconds")
    assert before <= stamp <= after and stamp.endswith("+00:00")
