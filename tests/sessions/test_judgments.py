"""Issue 43 item 4, the store: pairwise judgments (`store.judgments`, migration 20). One per
annotator and pair (judging again replaces it; (b, a) is the same pair, stored flipped),
different people's judgments of one pair all kept; bad pairs refused in one line with nothing
written; a judged version is frozen as an annotated one is, and a step on it goes on in a child."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest
import sqlite_utils

from sessions import schema
from sessions.judgments import JudgmentError
from sessions.store import Store, VersionFrozen
from tests.toy_envs import ROOM_TASK, WIKI_TASK
from trajectory.records import AgentConfig, Step, Version


def _cfg(toy) -> AgentConfig:
    return AgentConfig(model="scripted-model", base_url=toy.llm.base_url, max_retries=2, timeout_s=5, max_steps=4)


@pytest.fixture
def pair(toy):
    """Two sibling versions of one episode (neither branched from, annotated nor judged)."""
    ep, v1 = toy.engine.start_episode(ROOM_TASK, _cfg(toy))
    v2 = toy.store.versions.create(Version(episode_id=ep.id), make_current=False)
    return ep, v1, v2


def test_a_judgment_is_stored_once_per_annotator_and_pair_and_read_oriented_as_asked(toy, pair):
    ep, v1, v2 = pair
    a = toy.store.judgments.add(v2.id, v1.id, "A", "alice", reason="  v2 reaches the mug  ")
    # asked as (v2, v1): returned that way round; stored with the lower id as A, so flipped
    assert (a.version_a, a.version_b, a.better, a.reason, a.annotator, a.episode_id) == (
        v2.id,
        v1.id,
        "A",
        "v2 reaches the mug",
        "alice",
        ep.id,
    )
    (stored,) = toy.store.judgments.list()
    assert (stored.version_a, stored.version_b, stored.better) == (v1.id, v2.id, "B")
    assert toy.store.db.execute("select version_a, version_b, better from judgments").fetchall() == [
        (v1.id, v2.id, "B")
    ]
    # a second person's judgment of the same pair is kept beside it
    b = toy.store.judgments.add(v1.id, v2.id, "tie", "bob")
    assert b.reason is None
    assert [(j.annotator, j.better) for j in toy.store.judgments.of_pair(v1.id, v2.id)] == [
        ("alice", "B"),
        ("bob", "tie"),
    ]
    assert [(j.annotator, j.better, j.version_a) for j in toy.store.judgments.of_pair(v2.id, v1.id)] == [
        ("alice", "A", v2.id),
        ("bob", "tie", v2.id),
    ]
    # alice judges the pair again, the other way round: hers is replaced, not added
    again = toy.store.judgments.add(v1.id, v2.id, "A", "alice")
    assert again.id == a.id and again.reason is None and again.created_at >= a.created_at
    assert [(j.annotator, j.better) for j in toy.store.judgments.of_pair(v1.id, v2.id)] == [
        ("bob", "tie"),
        ("alice", "A"),
    ]
    assert len(toy.store.judgments.list(ep.id)) == 2 and toy.store.judgments.list(ep.id + 1000) == []
    assert {j.id for j in toy.store.judgments.of_versions([v2.id])} == {a.id, b.id}


def test_bad_pairs_are_refused_in_one_line_and_nothing_is_written(toy, pair):
    _ep, v1, v2 = pair
    _, other = toy.engine.start_episode(WIKI_TASK, _cfg(toy))
    cases = [
        ((v1.id, v1.id, "A", "alice"), "against itself"),
        ((v1.id, 99_999, "A", "alice"), "unknown version 99999"),
        ((v1.id, other.id, "B", "alice"), "different episodes"),
        ((v1.id, v2.id, "better", "alice"), "unknown judgment 'better'"),
        ((v1.id, v2.id, "A", "  "), "annotator is empty"),
        ((v1.id, v2.id, "A", "a\nb"), "one line"),
        ((v1.id, v2.id, "A", "alice", "x" * 20_001), "reason is too long"),
    ]
    for args, message in cases:
        with pytest.raises(JudgmentError, match=message) as caught:
            toy.store.judgments.add(*args)
        assert "\n" not in str(caught.value)
    assert toy.store.judgments.list() == []


def test_a_judged_version_is_frozen_and_a_step_goes_on_in_a_child(toy, pair):
    _ep, v1, v2 = pair
    toy.store.judgments.add(v1.id, v2.id, "B", "alice")
    step = Step(index=1, thought=None, action="look", observation="nothing", source="model")
    for v in (v1, v2):
        with pytest.raises(VersionFrozen, match="judged"):
            toy.store.versions.append(v.id, [step])
    assert toy.store.versions.update(v2.id, name="still a label").name == "still a label"
    toy.llm.push(" look")
    report = toy.engine.step(v2.id)
    assert report.frozen == "judged" and report.continued_from == v2.id and report.version.id != v2.id
    assert "judged against another version" in report.notice
    assert toy.store.versions.steps(v2.id) == [] and len(toy.store.versions.steps(report.version.id)) == 1


def test_migration_20_adds_the_table_to_a_database_made_before_it(tmp_path):
    """A database at the schema before this migration gains the table (and its rows of old stay)."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    db = sqlite_utils.Database(conn)
    install = schema.MIGRATIONS.pop()  # the database as it was one migration ago
    try:
        assert install.__module__ == "sessions.judgments"
        schema.open_or_migrate(db)
        assert "judgments" not in db.table_names()
    finally:
        schema.MIGRATIONS.append(install)
    conn.close()
    with closing(Store(path)) as store:
        assert "judgments" in store.db.table_names()
        assert store.db.execute("select value from meta where key = 'schema_version'").fetchone()[0] == str(
            len(schema.MIGRATIONS)
        )
