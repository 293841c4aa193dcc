"""Experiment items claimed and started a few at a time (`experiments.claim_and_start_many`):
one claim statement and one commit for the batch, never one item to two runners, and a
runner that dies (or stops) before it runs a claimed item leaves it to the next runner,
which continues the item's episode in place."""

from __future__ import annotations

import threading

import pytest

from agent import experiment, experiment_runner, item_starts
from envs.registry import family
from sessions import experiments, item_claims
from sessions.store import Store
from tests.experiment_agents import HOTPOT, wiki_agent
from trajectory.records import AgentConfig


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def make(store: Store, base_url: str, n: int = 8) -> experiments.Experiment:
    return experiment.create(
        store,
        env="hotpotqa",
        method="react",
        config=AgentConfig(model="m", base_url=base_url),
        name="B",
        tasks=family("hotpotqa").list_tasks(source="builtin")[:n],
    )


def start(store: Store, exp: experiments.Experiment, ids: list[int], job: int, lease_s: float = 60.0) -> dict:
    return experiments.claim_and_start_many(store, ids, job, lease_s, exp.config, exp.env_options, "B #{pos}", "react")


def test_a_batch_claim_never_gives_one_item_to_two_runners(tmp_path):
    """Eight runners (each its own Store, as processes are) claim overlapping batches of
    the same items at once: every item goes to exactly one, with one episode; a live
    lease keeps a claimed item from the others."""
    db = tmp_path / "b.db"
    store = Store(db)
    exp = make(store, "http://127.0.0.1:9/v1")
    ids = [it.id for it in experiments.items(store, exp.id)]
    got: dict[int, dict] = {}
    go = threading.Barrier(8)

    def runner(job: int) -> None:
        mine = Store(db)
        try:
            go.wait(10)
            lo = job % 4
            got[job] = start(mine, exp, ids[lo : lo + 5], job)
        finally:
            mine.close()

    threads = [threading.Thread(target=runner, args=(job,)) for job in range(1, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    winners = [item for claimed in got.values() for item in claimed]
    assert len(got) == 8 and sorted(winners) == sorted(set(winners)) == ids
    items = experiments.items(store, exp.id)
    assert len(store.episodes.ids()) == len(ids) and len({it.episode_id for it in items}) == len(ids)
    for job, claimed in got.items():
        for item_id, (token, it, made) in claimed.items():
            assert item_claims.holds(store, item_id, token) and made is not None and made[0].id == it.episode_id
            assert it.phases == {"react": made[1].id} and store.versions.get(made[1].id).name == "react"
    assert start(store, exp, ids, 99) == {}  # every one held under a live lease
    store.close()


def test_a_claimed_but_unstarted_batch_goes_to_the_next_runner_after_the_lease(tmp_path):
    """A runner claims a batch and dies before it runs it (no release): nobody else may take
    those items while its lease lives; once it ran out, the next runner takes them (new
    tokens, the dead one's writes fenced off) and continues their episodes in place."""
    db = tmp_path / "b.db"
    store = Store(db)
    exp = make(store, "http://127.0.0.1:9/v1", n=4)
    ids = [it.id for it in experiments.items(store, exp.id)]
    dead = start(store, exp, ids, 1, lease_s=60.0)
    assert sorted(dead) == ids and start(store, exp, ids, 2) == {}
    with store.transaction():  # its lease runs out (the test's stand-in for time)
        store.db.execute("update experiment_items set lease_until = 0")
    taken = start(store, exp, ids, 2)
    assert sorted(taken) == ids
    for item_id, (token, it, made) in taken.items():
        assert made is None and it.episode_id == dead[item_id][1].episode_id  # in place: no second episode
        assert token > dead[item_id][0] and not item_claims.holds(store, item_id, dead[item_id][0])
        with pytest.raises(item_claims.ClaimLost):
            experiments.record_item(store, item_id, status="done", success=True, token=dead[item_id][0])
    assert len(store.episodes.ids()) == 4
    store.close()


def test_a_run_stopped_with_started_items_left_gives_them_back_and_a_resume_runs_each_once(tmp_path, scripted_llm):
    """Stopped after its first item at concurrency 1, a run had claimed and started its next
    items with it: it gives them back (unclaimed, pending again, their episodes linked); a
    resume runs every item once, in the episode it already has."""
    scripted_llm.set_responder(wiki_agent({r["question"]: r["answer"] for r in HOTPOT}, react_steps=2))
    db = tmp_path / "b.db"
    store = Store(db)
    exp = make(store, scripted_llm.base_url, n=6)
    stop = threading.Event()
    out = experiment_runner.run(str(db), exp.id, stop=stop, on_progress=lambda p: p.done >= 1 and stop.set())
    assert out["done"] == 1
    items = experiments.items(store, exp.id)
    left = [it for it in items if it.status != "done"]
    raw = store.db.execute("select count(*) from experiment_items where claimed_by is not null").fetchone()[0]
    assert raw == 0 and {it.status for it in left} == {"pending"}
    linked = {it.id: it.episode_id for it in left if it.episode_id is not None}
    assert len(linked) == item_starts.BATCH - 1  # started with the first, never run
    out = experiment_runner.run(str(db), exp.id)
    assert out["done"] == 6 and len(scripted_llm.requests) == 2 * 6
    items = experiments.items(store, exp.id)
    assert len(store.episodes.ids()) == 6 and all(linked[it.id] == it.episode_id for it in items if it.id in linked)
    for it in items:
        assert [s.index for s in store.versions.steps(it.version_id)] == [1, 2]
    store.close()


def test_the_heartbeat_renews_a_batch_in_one_statement_and_misses_a_claim_taken_over(tmp_path):
    """`renew_claims` (each beat): every item the job holds keeps its claim under a new
    lease, and the {item: token} it returns lacks one another runner took over."""
    store = Store(tmp_path / "b.db")
    exp = make(store, "http://127.0.0.1:9/v1", n=4)
    ids = [it.id for it in experiments.items(store, exp.id)]
    mine = start(store, exp, ids, 1, lease_s=60.0)
    with store.transaction():  # one claim's lease runs out, and another runner takes that item
        store.db.execute("update experiment_items set lease_until = 0 where id = ?", [ids[0]])
    assert list(start(store, exp, ids[:1], 2)) == [ids[0]]
    stmts: list[str] = []
    store.db.conn.set_trace_callback(stmts.append)
    kept = item_claims.renew_claims(store, exp.id, 1, 600.0)
    store.db.conn.set_trace_callback(None)
    assert kept == {i: mine[i][0] for i in ids[1:]}
    assert [s.split()[0].lower() for s in stmts if not s.startswith(("--", "pragma"))] == ["begin", "update", "commit"]
    leases = dict(store.db.execute("select id, lease_until from experiment_items").fetchall())
    assert all(leases[i] > leases[ids[0]] for i in ids[1:])
    store.close()
