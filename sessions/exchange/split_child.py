"""The second process of a large jsonl export (`split.py`): reads its request (database,
filters, the episodes it writes, the descriptor of its file) as JSON on stdin, writes those episodes' records
there, prints its report as JSON; a failure is one line on stderr and exit status 1."""

from __future__ import annotations

import json
import sys

from sessions.exchange.export import ExportReport, _write_jsonl
from sessions.exchange.selection import Filters, select
from sessions.exchange.sink import _Sink
from sessions.store import Store, StoreError


def main() -> None:
    """The child: export the requested episodes as jsonl to the requested file."""
    req = json.load(sys.stdin)
    try:
        store = Store(req["db"], readonly=True)
        report = ExportReport(format="jsonl", path="")
        with open(req["fd"], "w", encoding="utf-8", newline="") as f:
            sink = _Sink(f)
            batches = select(store, None, Filters(**req["filters"]), raw=True, episodes=req["episodes"])
            _write_jsonl(store, batches, sink, report)
            sink.close(True)
    except (StoreError, OSError) as exc:
        print(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, file=sys.stderr)
        sys.exit(1)
    report.bytes = sink.bytes
    print(json.dumps(report.as_json()))


if __name__ == "__main__":  # pragma: no cover (run as a child process by the tests)
    main()
