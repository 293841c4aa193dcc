"""Issue 44: search answers a page from the index and the hits' own episodes, so its cost does
not grow with the store (benchmarks/scale.py measures it). What must hold while it does:
- a query matching more rows than are ranked lists the newest first (bm25 would read the
  word's whole doclist for its inverse document frequency, in proportion to the store);
- the filters asked of the hits' episodes keep exactly what the filters' whole sets keep;
- the versions holding a step, found from the step's subtree, are those whose path holds it;
- snippets made for many rows in one query are those made one row at a time."""

from __future__ import annotations

import random

import pytest

from sessions import search_index, search_reads
from sessions.episode_tree import EpisodeTree
from sessions.store import Store
from trajectory.records import AgentConfig, Outcome, Step, Task

CONFIG = AgentConfig(model="m", base_url="http://127.0.0.1:1/v1")


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "g.db")
    yield s
    s.close()


def _episode(store: Store, n: int, observation: str, *, env: str = "alfworld", success: bool | None = None) -> int:
    ep, v = store.episodes.create(Task(env=env, id=f"t{n}", type="pick", text=f"Task {n}."), CONFIG, {})
    _, v = store.versions.append(v.id, [Step(index=1, action=f"go to shelf {n}", observation=observation)], [])
    if success is not None:
        store.versions.update(v.id, outcome=Outcome(done=True, success=success))
    return ep.id


def test_a_query_too_common_to_rank_lists_the_newest_rows_first(store):
    # older rows say "mug" many times (bm25 ranks them first); the newest say it once in a long text
    with store.transaction():
        for n in range(8):
            text = "mug " * (8 - n) + "plate " * (40 * n)
            _episode(store, n, text)
    everything = search_index.matches(store.db, "steps", "mug", 100)
    assert len(everything) == 8 and all(rank < 0 for rank, _ in everything)  # few matches: ranked by bm25
    by_bm25 = [r for _, r in everything]
    assert by_bm25 != sorted(by_bm25, reverse=True)  # (the data makes bm25 differ from recency)
    capped = search_index.matches(store.db, "steps", "mug", 5)
    newest = sorted(by_bm25, reverse=True)[:5]
    assert [r for _, r in capped] == newest  # too common: the newest 5, newest first


def test_filters_asked_of_the_hits_episodes_keep_what_the_whole_sets_keep(store):
    rnd = random.Random(7)
    with store.transaction():
        ids = [
            _episode(
                store,
                n,
                "Nothing happens." if n % 3 else "You see a mug.",
                env=rnd.choice(["alfworld", "hotpotqa"]),
                success=rnd.choice([True, False, None]),
            )
            for n in range(40)
        ]
    some = rnd.sample(ids, 25)
    for env in (None, "alfworld", "hotpotqa"):
        for outcome in (None, "success", "failure", "unfinished"):
            whole = set(some)
            if env:
                whole &= set(store.episodes.ids(env=env))
            if outcome:
                whole &= search_reads.with_outcome(store, outcome)
            assert search_reads.passing(store, some, env=env, outcome=outcome) == whole, (env, outcome)
    assert search_reads.passing(store, some, signal="no_effect") == set(some) & search_reads.flagged(store, "no_effect")


def test_the_versions_holding_a_step_are_those_whose_path_holds_it():
    rnd = random.Random(3)
    for _ in range(30):
        tree = EpisodeTree(1, "alfworld", None, None)
        for sid in range(1, 60):
            parent = rnd.choice([None, *range(1, sid)]) if sid > 1 else None
            tree.steps[sid] = (parent, 1, [])
        for vid in range(100, 100 + rnd.randint(1, 25)):
            tree.versions[vid] = (rnd.choice([None, *tree.steps]), Outcome())
        tree.current = rnd.choice([*tree.versions])
        for sid in tree.steps:
            brute = tree.preferred(v for v in tree.versions if sid in tree.path(v))
            assert tree.holding(sid) == brute


def test_snippets_of_many_rows_are_those_of_each_row(store):
    with store.transaction():
        for n in range(12):
            _episode(store, n, f"On the shelf {n} you see a mug {n} and a fridge.")
    rows = [r for _, r in search_index.matches(store.db, "steps", "fridg*", 100)]
    together = search_index.snippets(store.db, "steps", "fridg*", rows)
    assert set(together) == set(rows)
    for r in rows:
        assert search_index.snippets(store.db, "steps", "fridg*", [r]) == {r: together[r]}
        assert any("fridge" in text for _, text in together[r])
