"""What the experiment command-line tests share: the built-in corpus's HotpotQA and FEVER rows,
`cli()` (exit code, the last JSON line, stderr), agents that answer half the tasks right, and the
autouse fixture that gives each test its own cache and no endpoint from the environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from react_editor.main import main

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "envs" / "wikipedia" / "corpus"
HOTPOT = [json.loads(line) for line in (CORPUS / "hotpotqa.jsonl").read_text().splitlines() if line.strip()]
FEVER = [json.loads(line) for line in (CORPUS / "fever.jsonl").read_text().splitlines() if line.strip()]
SUMMARY_KEYS = {
    "experiment",
    "name",
    "episodes",
    "done",
    "partial",
    "success",
    "success_rate",
    "by_type",
    "tokens",
    "cost",
    "wall_s",
}


@pytest.fixture(autouse=True)  # (autouse in each test module that imports it)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def cli(capsys, *argv) -> tuple[int, dict | list | None, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    lines = [ln for ln in out.splitlines() if ln.strip()]
    return code, (json.loads(lines[-1]) if lines else None), err


def half_right(rows, key="question", gold="answer") -> dict:
    """Even tasks answered correctly, odd ones wrongly."""
    return {r[key]: (r[gold] if n % 2 == 0 else "Nowhere at all") for n, r in enumerate(rows)}
