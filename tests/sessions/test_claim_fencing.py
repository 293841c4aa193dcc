"""Issue 26 item 4: an experiment item's claim is fenced. Every claim takes a new token and
every write of the claimed item names it: a runner whose lease ran out while it lived (and
whose item another runner took over) writes nothing, stops the item with one line, and never
overwrites the other runner's "done". The lock wait is shorter than the lease, and a failing
heartbeat is said, not swallowed."""

from __future__ import annotations

import threading
import time
from contextlib import closing

import pytest

import sessions.jobs
from agent import experiment, experiment_runner, jobs
from agent.task_selection import select_tasks
from sessions import connection, exemplar_sets, experiments, item_claims
from sessions.store import Store, StoreError
from tests.experiment_agents import HOTPOT, wiki_agent
from trajectory.records import AgentConfig, Step


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def make(store: Store, base_url: str) -> experiments.Experiment:
    cfg = AgentConfig(model="m", base_url=base_url)
    return experiment.create(
        store, env="hotpotqa", method="react", config=cfg, name="F", tasks=select_tasks("hotpotqa", "hp-001")
    )


def lapse(store: Store, item_id: int) -> None:
    """The holder's lease runs out while it lives (a stalled runner): the test's stand-in for time."""
    with store.transaction():
        store.db.execute("update experiment_items set lease_until = 0 where id = ?", [item_id])


def _run_and_lose_the_claim_once(scripted_llm, responder, db, exp, capfd) -> None:
    """Run the experiment with `responder` answering (it takes the item's claim over): one
    "taken over" line, no traceback."""
    scripted_llm.set_responder(responder)
    experiment_runner.run(str(db), exp.id)
    err = capfd.readouterr().err
    lost = [ln for ln in err.splitlines() if "taken over" in ln]
    assert len(lost) == 1 and "experiment item" in lost[0] and "Traceback" not in err


def test_a_writer_whose_claim_was_taken_over_writes_nothing(tmp_path, scripted_llm):
    with closing(Store(tmp_path / "x.db")) as store:
        exp = make(store, scripted_llm.base_url)
        item = experiments.items(store, exp.id)[0].id
        mine = item_claims.claim(store, item, 1, 60.0)
        assert mine and item_claims.claim(store, item, 2, 60.0) is None  # a live lease keeps it
        lapse(store, item)
        theirs = item_claims.claim(store, item, 2, 60.0)
        assert theirs and theirs != mine
        experiments.record_item(store, item, status="done", success=False, metrics={"by": 2}, token=theirs)
        for write in (
            lambda: experiments.record_item(store, item, status="error", error="late", token=mine),
            lambda: experiments.record_phase(store, item, "react", 1, token=mine),
        ):
            with pytest.raises(item_claims.ClaimLost):
                write()
        item_claims.release(store, item, 1, mine)
        it = experiments.item(store, item)
        assert (it.status, it.success, it.error, it.metrics) == ("done", False, None, {"by": 2})
        assert item_claims.claim(store, item, 1, 60.0) is None  # done: nobody claims it again


def test_a_runner_that_lost_its_claim_stops_the_item_with_one_line(tmp_path, capfd, scripted_llm):
    """Between two model calls of the runner, its lease lapses, another runner takes the item
    and finishes it: the first runner stops it, says so in one line, and its late result
    does not replace the other's."""
    gold = HOTPOT[0]["answer"]
    db = tmp_path / "x.db"
    with closing(Store(db)) as store:
        exp = make(store, scripted_llm.base_url)
    agent = wiki_agent({HOTPOT[0]["question"]: gold}, react_steps=4)
    sent = {"n": 0}

    def taken_over(body):
        sent["n"] += 1
        if sent["n"] == 2:
            with closing(Store(db)) as s:
                item = experiments.items(s, exp.id)[0].id
                lapse(s, item)
                token = item_claims.claim(s, item, 999, 60.0)
                experiments.record_item(
                    s, item, status="done", success=False, metrics={"by": "the other runner"}, token=token
                )
        return agent(body)

    _run_and_lose_the_claim_once(scripted_llm, taken_over, db, exp, capfd)
    with closing(Store(db)) as store:
        it = experiments.items(store, exp.id)[0]
        assert (it.status, it.success, it.metrics.get("by")) == ("done", False, "the other runner")


def test_the_lock_wait_is_shorter_than_the_lease():
    assert connection.LOCK_TIMEOUT_S < sessions.jobs.LEASE_S


def test_a_failing_heartbeat_is_reported(tmp_path, capfd, monkeypatch):
    with closing(Store(tmp_path / "x.db")) as store:
        failed = threading.Event()

        def beat(*a, **k):
            failed.set()
            raise StoreError("database error: database is locked")

        monkeypatch.setattr(sessions.jobs, "beat", beat)
        h = jobs.open_job(store, "run", lease_s=0.3)
        try:
            assert failed.wait(10)
            deadline = time.monotonic() + 10
            while h.beat_error is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert h.beat_error and "locked" in h.beat_error and "heartbeat failing" in h.status()
        finally:
            monkeypatch.undo()
            h.end("done")
            jobs.forget(h)
        lines = [ln for ln in capfd.readouterr().err.splitlines() if "heartbeat failed" in ln]
        assert len(lines) == 1 and f"job {h.id}" in lines[0] and "locked" in lines[0]


def test_a_writer_waits_for_another_threads_transaction_no_longer_than_the_lock_wait(tmp_path, monkeypatch):
    """The store's own lock (one transaction of a Store at a time) waits as SQLite does: a
    heartbeat behind a stuck writer fails and says so, instead of waiting past its lease."""
    monkeypatch.setattr(connection, "LOCK_TIMEOUT_S", 0.2)
    with closing(Store(tmp_path / "x.db")) as store:
        held, done = threading.Event(), threading.Event()

        def stuck() -> None:
            with store.transaction():
                held.set()
                done.wait(30)

        t = threading.Thread(target=stuck)
        t.start()
        try:
            assert held.wait(10)
            with pytest.raises(StoreError, match="locked"):
                with store.transaction(durable=False):
                    pass
        finally:
            done.set()
            t.join(10)
        with store.transaction():  # free again
            store.settings.set("after", 1)
        assert store.settings.get("after") == 1


def test_a_step_in_flight_when_the_claim_is_taken_over_does_not_land(tmp_path, capfd, scripted_llm):
    """Issue 39 item 9: the claim is checked in the transaction that records each step, not
    only by the item's own rows. While the runner's second model call is in flight, its
    lease lapses and another runner takes the item: that step is not recorded (the item's
    version keeps its first step only), and the runner stops the item with one line."""
    db = tmp_path / "x.db"
    with closing(Store(db)) as store:
        exp = make(store, scripted_llm.base_url)
    agent = wiki_agent({HOTPOT[0]["question"]: HOTPOT[0]["answer"]}, react_steps=4)
    sent = {"n": 0}

    def taken_over(body):
        sent["n"] += 1
        if sent["n"] == 2:  # the second step's call: taken over before its answer comes back
            with closing(Store(db)) as s:
                item = experiments.items(s, exp.id)[0].id
                lapse(s, item)
                assert item_claims.claim(s, item, 999, 60.0)
        return agent(body)

    _run_and_lose_the_claim_once(scripted_llm, taken_over, db, exp, capfd)
    assert sent["n"] == 2
    with closing(Store(db)) as store:
        it = experiments.items(store, exp.id)[0]
        assert len(store.versions.steps(it.version_id)) == 1  # the in-flight step did not land
        assert it.status == "running"  # (the other runner's to finish)


def test_a_fenced_append_whose_claim_was_taken_over_writes_nothing(tmp_path, scripted_llm):
    with closing(Store(tmp_path / "x.db")) as store:
        exp = make(store, scripted_llm.base_url)
        item = experiments.items(store, exp.id)[0]
        mine = item_claims.claim(store, item.id, 1, 60.0)
        ep, v = store.episodes.create(item.task, exp.config, {})
        step = Step(index=1, thought="t", action="search[x]", observation="o", source="model")
        store.versions.append(v.id, [step], fence=item_claims.fence(item.id, mine))  # held: it lands
        lapse(store, item.id)
        assert item_claims.claim(store, item.id, 2, 60.0)
        steps_before = store.db.execute("select count(*) from steps").fetchone()[0]
        with pytest.raises(item_claims.ClaimLost, match="taken over"):
            store.versions.append(v.id, [step.model_copy(update={"index": 2})], fence=item_claims.fence(item.id, mine))
        assert store.db.execute("select count(*) from steps").fetchone()[0] == steps_before
        assert len(store.versions.steps(v.id)) == 1
        rev = exemplar_sets.builtin_revision(store, "hotpotqa", {"webthink_simple6": "Question: x\n"})
        with pytest.raises(item_claims.ClaimLost):  # an item's first step pins its exemplars: fenced too
            store.versions.pin_exemplar_revision(v.id, rev, fence=item_claims.fence(item.id, mine))
        assert store.versions.exemplar_revision(v.id) is None
