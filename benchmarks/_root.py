"""Imported first by every benchmark script: puts the repository root first on sys.path and
takes this folder off it (benchmarks/alfworld.py would otherwise shadow the alfworld package).
Also `served_by`: a benchmark's own server in a child process."""

import contextlib
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != HERE]


@contextlib.contextmanager
def served_by(script: str):
    """The URL a benchmark's own server prints when `script --serve` runs in a child process
    (so the server's CPU is not counted as ours); the server ends with the block."""
    server = subprocess.Popen(
        [sys.executable, script, "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        yield server.stdout.readline().strip()
    finally:
        server.stdin.close()
        server.wait(10)
