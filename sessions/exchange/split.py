"""A large jsonl export made by two processes: a child (`python -m sessions.exchange.split_child`,
reading the request on stdin) writes the records of the later episodes to a temporary file
while this process writes the earlier ones; its lines are then appended in order, their
episode refs (numbered from 1 in the child) moved on by the episodes written here. The same
bytes as one process writes (each episode's refs are its own; only `episode.ref` counts
across episodes). Threads would not do: encoding holds the GIL.

The child is killed however the export ends (its file has no name: nothing is left behind);
its failure is raised here as one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sessions.exchange.selection import Filters
from sessions.exchange.sink import _Sink
from sessions.store import Store, StoreError

SPLIT_MIN = 1000  # episodes below which one process is quicker than starting a second
SHARE = 0.55  # of the episodes written here (the child first imports the project: ~0.6 s)
_HEAD_OF = b'"episode":{"ref":'


class PartFailed(StoreError, ValueError):
    pass


# None: two processes when it pays off (a large export, two cores or more); True/False: always
# (given two episodes and a file database) or never - the tests and the benchmark set it
SPLIT: bool | None = None


def worth_it(store: Store, n_episodes: int) -> bool:
    """Two processes pay off for a large export of a file database on two cores or more
    (measured under load too: the wall time falls, at the cost of the child's start and the
    copy of its lines). Not the load average: the same export takes the same path each time."""
    if n_episodes < 2 or store.file == ":memory:" or store.db.conn.in_transaction:
        return False
    if SPLIT is not None:
        return SPLIT
    if n_episodes < SPLIT_MIN:
        return False
    try:
        return len(os.sched_getaffinity(0)) > 1
    except (AttributeError, OSError):
        return False


class Part:
    """The child exporting `episodes` (in order) of the selection `filters` to a temp file."""

    def __init__(self, store: Store, filters: Filters, episodes: list[int]):
        # a file with no name: the child writes it through the descriptor it inherits, and
        # nothing is left behind however either process ends
        self.fd, path = tempfile.mkstemp(prefix=".export-part-", suffix=".jsonl")
        os.unlink(path)
        request = {"db": store.file, "filters": asdict(filters), "episodes": episodes, "fd": self.fd}
        root = str(Path(__file__).resolve().parents[2])  # this code, not another installed copy
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])}
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "sessions.exchange.split_child"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                pass_fds=(self.fd,),
            )
            assert self.proc.stdin is not None  # stdin=PIPE
            self.proc.stdin.write(json.dumps(request))
            self.proc.stdin.close()
            self.proc.stdin = None  # (communicate would flush it)
        except OSError:
            if hasattr(self, "proc"):
                self.__exit__()
            else:
                os.close(self.fd)
            raise

    def __enter__(self) -> "Part":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None and not stream.closed:
                stream.close()
        os.close(self.fd)

    def result(self) -> dict[str, Any]:
        """Wait for the child; its report, or PartFailed with its last line."""
        out, err = self.proc.communicate()
        if self.proc.returncode != 0:
            last = (err.strip().splitlines() or [f"exit status {self.proc.returncode}"])[-1]
            raise PartFailed(f"export failed in its second process: {last}")
        report: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return report

    def copy_into(self, sink: _Sink, offset: int, block: int = 1 << 22) -> None:
        """Append the child's lines to `sink` (an export `_Sink`), each episode ref moved on
        by `offset`; as bytes, a few MB at a time."""
        out: list[bytes] = []
        size = 0
        os.lseek(self.fd, 0, os.SEEK_SET)
        with open(self.fd, "rb", closefd=False) as f:
            for line in f:  # (a JSON line holds no raw newline: json escapes it)
                head, sep, rest = line.partition(_HEAD_OF)
                ref, comma, tail = rest.partition(b",")
                out += (head, sep, b"%d" % (int(ref) + offset), comma, tail)
                size += len(line)
                if size >= block:
                    sink.write_bytes(b"".join(out))
                    out, size = [], 0
        if out:
            sink.write_bytes(b"".join(out))
