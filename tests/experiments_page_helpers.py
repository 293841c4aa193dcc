"""Helpers the Experiments-page AppTest tests share (not tests). The `page` fixture is in
tests/conftest.py."""

from __future__ import annotations

import json
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

from sessions import experiments
from sessions.store import Store

ROOT = Path(__file__).resolve().parents[1]


HOTPOT = [
    json.loads(line)
    for line in (ROOT / "envs/wikipedia/corpus/hotpotqa.jsonl").read_text().splitlines()
    if line.strip()
]


def _wait_done(db: Path, exp_id: int, timeout: float = 60, *, every_task: bool = False) -> None:
    """Until the batch is over (`every_task`: until every task is done, e.g. after a resume
    whose background thread may not have marked the experiment running yet)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with_store = Store(db)
        try:
            counts = experiments.counts(with_store, exp_id)
            status = experiments.get(with_store, exp_id).status
        finally:
            with_store.close()
        if every_task and set(counts) == {"done"}:
            return
        if not every_task and status not in ("created", "running") and sum(counts.values()):
            return
        time.sleep(0.1)
    raise AssertionError("experiment did not finish")


def _create(at: AppTest, *, limit: int, name: str, method: str | None = None) -> AppTest:
    at.selectbox(key="x_env").set_value("hotpotqa")
    at.run()
    if method:
        at.selectbox(key="x_method_hotpotqa").set_value(method)
    at.number_input(key="x_limit").set_value(limit)
    at.number_input(key="x_conc").set_value(2)
    at.text_input(key="x_model").set_value("m")
    at.text_input(key="x_name").set_value(name)
    at.button(key="x_create").click().run()
    assert not at.exception, at.exception
    return at


def _frame(at: AppTest, column: str):
    """The one dataframe on the page with this column."""
    (df,) = [d.value for d in at.dataframe if column in d.value.columns]
    return df
