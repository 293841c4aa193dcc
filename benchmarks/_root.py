"""Imported first by every benchmark script: puts the repository root first on sys.path and
takes this folder off it (benchmarks/alfworld.py would otherwise shadow the alfworld package)."""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != HERE]
