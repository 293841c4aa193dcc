"""The runner's per-step database work, counted from the SQL each connection runs (never
timed): a step does not re-index its version's name (schema 11), a Wikipedia step and the
page it fetched commit together, and an experiment item's claim, episode and first phase
commit in one transaction (a few items' together)."""

from __future__ import annotations

import os
import threading

import pytest

from agent import experiment, experiment_runner, item_starts, methods
from agent.engine import Engine
from envs.registry import family
from envs.wikipedia.builtin import corpus_hash
from sessions import experiments, schema, writer
from sessions.search import search
from sessions.store import Store
from tests.engine_scripts import cfg
from tests.experiment_agents import wiki_agent
from tests.toy_envs import WIKI_TASK
from trajectory.records import AgentConfig


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path / "cache"))  # the built-in ZIM
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def trace(store: Store) -> list[str]:
    """Every statement this thread's connection runs from now on (trigger bodies included)."""
    stmts: list[str] = []
    store.db.conn.set_trace_callback(stmts.append)
    return stmts


def commits(stmts) -> int:
    return sum(s.strip().lower() == "commit" for s in stmts)


def commit_kinds(stmts) -> tuple[int, int]:
    """(durable, light) commits of (thread name, sql) statements: a light one runs under
    `pragma synchronous = normal`. The level is each thread's own (each thread has its own
    connection, which opens at full): one thread's pragma says nothing of another's commits."""
    durable = light = 0
    level: dict[str, str] = {}
    for thread, s in stmts:
        low = s.strip().lower()
        if low.startswith("pragma synchronous"):
            level[thread] = low.split("=")[-1].strip()
        elif low == "commit":
            durable += level.get(thread, "full") == "full"
            light += level.get(thread, "full") == "normal"
    return durable, light


def on_version_index(stmts) -> list[str]:
    return [s for s in stmts if "versions_fts" in s]


def hotpot_task():
    return family("hotpotqa").list_tasks(source="builtin")[0]


# ---------------------------------------------------------------- 1. the full-text index


def test_a_step_leaves_the_version_index_alone_and_a_rename_still_reindexes(toy):
    """A step moves its version's leaf and status without any statement on `versions_fts`;
    renaming the version still makes the new name searchable and the old one not."""
    ep, v = toy.engine.start_episode(WIKI_TASK, cfg(toy.llm))
    stmts = trace(toy.store)
    toy.engine.human_step(v.id, thought="Find it.", action="Search[Velmora]")
    toy.store.versions.update(v.id, status="stopped")
    assert stmts and on_version_index(stmts) == []
    toy.store.versions.update(v.id, name="harbour detour")
    assert on_version_index(stmts)
    assert [(h.version, h.field) for h in search(toy.store, "detour")] == [(v.id, "name")]
    toy.store.versions.update(v.id, name="plain try")
    assert search(toy.store, "detour") == []
    assert [(h.version, h.field) for h in search(toy.store, "plain")] == [(v.id, "name")]


def test_a_schema_10_database_is_migrated_to_the_narrow_triggers(tmp_path):
    """A database made at schema 10 re-indexes a version's name on every status update;
    opened by this version it is migrated to 11, after which it no longer does, and a rename
    is still indexed."""
    path = tmp_path / "old.db"
    with pytest.MonkeyPatch.context() as m:
        m.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:10])
        old = Store(path)
        _, v = old.episodes.create(WIKI_TASK, AgentConfig(model="m"), {}, "old")
        stmts = trace(old)
        old.versions.update(v.id, status="stopped")
        assert on_version_index(stmts)  # the old trigger: the trace does see the index work
        old.close()
    store = Store(path)
    version = store.db.execute("select value from meta where key = 'schema_version'").fetchone()[0]
    assert version == str(len(schema.MIGRATIONS))
    stmts = trace(store)
    store.versions.update(v.id, status="open")
    assert on_version_index(stmts) == []
    store.versions.update(v.id, name="migrated name")
    assert [(h.version, h.field) for h in search(store, "migrated")] == [(v.id, "name")]
    store.close()


# ---------------------------------------------------------------- 2. a step's pages commit with it


def test_a_wikipedia_step_commits_once_with_its_page(tmp_path, scripted_llm):
    """One model step that searches commits once, the page it fetched is in the blob table
    (seen from another connection), and after a restart the episode goes on from it."""
    scripted_llm.push(" I search it.\nAction 1: Search[Ostwick]", " Look.\nAction 2: Lookup[harbour]")
    path = tmp_path / "w.db"
    store = Store(path)
    engine = Engine(store, api_key="sk-test-key-not-real")
    _, v = engine.start_episode(hotpot_task(), cfg(scripted_llm))
    stmts = trace(store)
    engine.step(v.id)
    assert commits(stmts) == 1, [s for s in stmts if s.lower() in ("begin immediate", "commit")]
    (step,) = store.versions.steps(v.id)
    assert step.observation.startswith("Ostwick is a port town")
    store.close()
    again = Store(path)  # a restart: a new connection, a new engine
    assert again.blobs.get(step.snapshot["p"]).decode().startswith("Ostwick is a port town")
    Engine(again, api_key="sk-test-key-not-real").step(v.id)
    assert again.versions.steps(v.id)[-1].observation.startswith("(Result 1 / ")
    again.close()


def test_deferred_blobs_survive_a_rollback_and_the_scope_end(tmp_path):
    """Inside `deferred_blobs()` a blob is not written on its own: a rolled-back transaction
    does not lose it (the next transaction writes it), and one still waiting when the scope
    ends is written then."""
    store, other = Store(tmp_path / "b.db"), Store(tmp_path / "b.db")
    with store.blobs.deferred():
        a = store.blobs.put(b"page a")
        assert other.blobs.get(a) is None
        with pytest.raises(RuntimeError), store.transaction():
            raise RuntimeError("rolled back")
        assert other.blobs.get(a) is None
        with store.transaction():
            pass
        assert other.blobs.get(a) == b"page a"
        b = store.blobs.put(b"page b")
        assert other.blobs.get(b) is None
    assert other.blobs.get(b) == b"page b"
    store.close()
    other.close()


# ---------------------------------------------------------------- 3. an experiment item's commits


def test_experiment_items_are_started_in_batches_and_commit_with_their_steps(tmp_path, scripted_llm, monkeypatch):
    """ReAct on HotpotQA (a search, then finish: 2 model calls) at concurrency 1: the worker
    claims and starts its next items together (claims, episodes, first phases' versions:
    one commit for the batch), each step commits once, and an item's result, which nobody
    waits for, goes with the next commit (the next item's first step; the last one with
    the writer's close). So 2 commits a task and one per batch of starts. Each item's
    version is named after its phase and recorded in its metrics, committed, before the
    method runs. Within the writer's power-loss window (here longer than the run) every
    commit is light but the close's, which is the one durable point."""
    n = item_starts.BATCH
    monkeypatch.setattr(writer, "DURABLE_S", 3600.0)
    stmts: list[tuple[str, str]] = []
    seen: list[tuple[dict, str | None, bool]] = []
    real_run_item = methods.run_item
    path = tmp_path / "x.db"

    def spy(engine, episode_id, method, **kw):
        phases = dict(kw.get("phases") or {})
        other = Store(path)  # what is committed
        it = next(i for i in experiments.items(other, 1) if i.episode_id == episode_id)
        name = other.versions.get(phases["react"]).name if "react" in phases else None
        seen.append((phases, name, it.phases == phases and it.status == "running"))
        other.close()
        return real_run_item(engine, episode_id, method, **kw)

    monkeypatch.setattr(methods, "run_item", spy)
    scripted_llm.set_responder(wiki_agent({}, react_steps=2))
    store = Store(path)
    exp = experiment.create(
        store,
        env="hotpotqa",
        method="react",
        config=cfg(scripted_llm),
        tasks=family("hotpotqa").list_tasks(source="builtin")[:n],
    )
    # the Store the run opens traces every thread's statements
    out = experiment_runner.run(
        str(path), exp.id, concurrency=1, tracer=lambda sql, _: stmts.append((threading.current_thread().name, sql))
    )
    assert out["done"] == n and len(scripted_llm.requests) == 2 * n
    worker = [(t, s) for t, s in stmts if t.startswith("batch") or t == "store-writer"]  # (the writer commits for it)
    claims = [s for _, s in worker if s.startswith("update experiment_items set claimed_by")]
    assert len(claims) == 1 and commits(s for _, s in worker) == 1 + 2 * n + 1
    assert commit_kinds(worker) == (1, 2 * n + 1)
    assert [(name, committed) for _, name, committed in seen] == [("react", True)] * n
    for it in experiments.items(store, exp.id):
        assert it.status == "done" and it.phases == {"react": it.version_id}
        assert store.versions.get(it.version_id).name == "react"
    store.close()


# ---------------------------------------------------------------- 4. the built-in corpus hash


def test_the_corpus_hash_follows_the_corpus_file(tmp_path):
    """The built-in ZIM's hash is stable while the corpus is unchanged and changes when the
    file changes: same size but a new time, or a new size at the old time."""
    corpus = tmp_path / "articles.jsonl"
    corpus.write_text('{"title": "A", "body": ["x"]}\n')
    first = corpus_hash(tmp_path)
    assert corpus_hash(tmp_path) == first
    st = corpus.stat()
    corpus.write_text('{"title": "B", "body": ["x"]}\n')
    os.utime(corpus, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    second = corpus_hash(tmp_path)
    assert second != first
    corpus.write_text('{"title": "Bb", "body": ["x"]}\n')
    os.utime(corpus, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert corpus_hash(tmp_path) not in (first, second)


# ---------------------------------------------------------------- 5. durable and light commits


def test_a_light_transaction_skips_the_fsync_and_puts_the_safety_level_back(tmp_path):
    """`transaction(durable=False)` commits at `synchronous = normal` (no fsync) and the
    connection is back at `full` afterwards, also when the transaction rolls back; an inner
    transaction follows the outermost; what a light commit wrote is committed (another
    connection reads it)."""
    store, other = Store(tmp_path / "l.db"), Store(tmp_path / "l.db")
    level = lambda: store.db.execute("pragma synchronous").fetchone()[0]  # noqa: E731  (2 full, 1 normal)
    assert level() == 2
    with store.transaction(durable=False):
        assert level() == 1
        with store.transaction():  # the outermost decides
            store.settings.set("a", 1)
    assert level() == 2 and other.settings.get("a") == 1
    with pytest.raises(RuntimeError), store.transaction(durable=False):
        store.settings.set("b", 2)
        raise RuntimeError("rolled back")
    assert level() == 2 and other.settings.get("b") is None
    stmts = trace(store)
    with store.transaction():
        store.settings.set("c", 3)
    assert commit_kinds([("main", s) for s in stmts]) == (1, 0)
    store.close()
    other.close()


# ---------------------------------------------------------------- 6. statements per model call


def issued(reports: list[tuple[str, str]]) -> int:
    """The statements the runner issued (each execute, begin and commit), from what SQLite's
    trace reports: not the statements SQLite runs inside ours (comments, "-- ...", and FTS5's
    reads of its own config, "PRAGMA 'main'.", "SELECT k, v FROM 'main'."), nor a write
    reported again on its connection for each trigger program it runs."""
    n, last = 0, {}
    for thread, sql in reports:
        if sql.startswith(("--", "PRAGMA 'main'.", "SELECT k, v FROM 'main'.")):
            continue
        if sql == last.get(thread) and sql.split(None, 1)[0].lower() in ("insert", "update", "delete", "replace"):
            continue
        last[thread] = sql
        n += 1
    return n


def test_an_experiment_issues_few_statements_per_model_call(tmp_path, scripted_llm, monkeypatch):
    """ReAct on HotpotQA at concurrency 1 (2 model calls a task): the statements the
    worker and the store's writer issue (each execute, begin and commit included), per
    model call, counted from the run's `Store(tracer=...)`. The bound is what the runner
    issues now: a regression fails here. (The power-loss window outlasts the run: on a
    loaded machine a slow step would let the writer commit an item's result on its own.)"""
    monkeypatch.setattr(writer, "DURABLE_S", 3600.0)
    n, reports = 4, []

    def trace(sql: str, _params) -> None:
        thread = threading.current_thread().name
        if thread.startswith(("batch", "store-writer")):
            reports.append((thread, sql))

    scripted_llm.set_responder(wiki_agent({}, react_steps=2))
    path = tmp_path / "s.db"
    store = Store(path)
    exp = experiment.create(
        store,
        env="hotpotqa",
        method="react",
        config=cfg(scripted_llm),
        tasks=family("hotpotqa").list_tasks(source="builtin")[:n],
    )
    out = experiment_runner.run(str(path), exp.id, concurrency=1, tracer=trace)
    assert out["done"] == n and len(scripted_llm.requests) == 2 * n
    assert issued(reports) / (2 * n) <= STATEMENTS_PER_CALL, issued(reports) / (2 * n)
    store.close()


STATEMENTS_PER_CALL = 9.9  # 9.875 now, the window outlasting the run (items claimed and started 4 at a time, in a few statements for all, the new episodes' ids returned by their insert; an item's result committed with the next group); 10.0 before the episodes' insert returned their ids (a read of the highest ids first); 14.25 before that (12.5 in benchmarks/runner.py at concurrency 1: no response-cache read there, 50 tasks); 20.1 before the engine read a step's version with its episode's options, its pinned config and exemplar revision once per version (none for a version the item start just wrote), the ids of known tasks and configs were kept, and a new episode named its first version as current when inserted; 32.1 before the writer
