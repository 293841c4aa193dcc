"""Shared helpers for the export/import/annotation tests (not fixtures)."""

from __future__ import annotations

from pathlib import Path

from tests.engine_scripts import ROOM_SCRIPT  # noqa: F401  (re-exported: the toy room's winning script)
from tests.reference import reference_prompts  # noqa: F401  (re-exported for the import tests)
from trajectory.records import AgentConfig

ROOT = Path(__file__).resolve().parent.parent


def cfg(llm, **kw) -> AgentConfig:
    return AgentConfig(model="scripted-model", base_url=llm.base_url, max_retries=2, timeout_s=5, **kw)


def table_counts(store) -> dict[str, int]:
    names = [r[0] for r in store.db.execute("select name from sqlite_master where type = 'table'")]
    return {n: store.db.execute(f"select count(*) from [{n}]").fetchone()[0] for n in sorted(names)}


WIKI_SCRIPT = [
    " I need to search Velmora, find its capital, then find when it was founded.\nAction 1: Search[Velmora]",
    " The capital is Marrowgate. I need to look it up.",  # no action: the paper's fallback
    " Search[Marrowgate]",
    " Marrowgate has a founding year. Let me look up founded.\nAction 3: Lookup[founded]",
    " It was founded in 1650, so the answer is 1650.\nAction 4: Finish[1650]",
]
