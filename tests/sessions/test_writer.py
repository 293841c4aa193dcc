"""The Store's one writer: writes queued while a group commits form the next group (one
commit for all), each is answered only once its group committed, a failing write undoes
only its own part, and a nested transaction with nothing written since its enclosing
savepoint needs no savepoint of its own. Counted from the SQL each connection runs."""

from __future__ import annotations

import threading

import pytest

from sessions import writer
from sessions.store import Store, StoreError
from sessions.writer import attached, write


class Boom(Exception):
    pass


@pytest.fixture
def traced(tmp_path):
    """(store, statements as (thread name, sql)) for every connection the Store opens."""
    stmts: list[tuple[str, str]] = []
    store = Store(tmp_path / "w.db", tracer=lambda sql, params: stmts.append((threading.current_thread().name, sql)))
    stmts.clear()  # (the migration's)
    yield store, stmts
    store.close()


def commits(stmts, thread: str | None = None) -> int:
    """Commits of `thread` (None: of every thread: an idle writer's caller commits itself)."""
    return sum(thread in (None, t) and s.strip().lower() == "commit" for t, s in stmts)


def grouped(store: Store, first, writes: dict) -> tuple[writer.Writer, dict]:
    """Run `first` on the writer and, while it holds it, queue `writes` (key -> closure) in
    their order, then let it go: they form the next group. (writer, errors by key)."""
    hold, holding = threading.Event(), threading.Event()
    errors: dict = {}

    def run(key, fn) -> None:
        try:
            write(store, fn)
        except BaseException as exc:  # the caller's own error
            errors[key] = exc

    with attached(store) as w:
        t0 = threading.Thread(target=run, args=("first", lambda: (holding.set(), hold.wait(10), first())))
        t0.start()
        assert holding.wait(10)
        threads = []
        for key, fn in writes.items():
            threads.append(threading.Thread(target=run, args=(key, fn)))
            threads[-1].start()
            while w._queue.qsize() < len(threads):  # queued in this order
                threading.Event().wait(0.01)
        hold.set()
        for t in [t0, *threads]:
            t.join(10)
    return w, errors


def test_writes_queued_meanwhile_commit_as_one_group(traced, tmp_path):
    """While a first write holds the writer, five threads hand it theirs: those five
    commit together (one commit), each thread hears back only after that commit (another
    connection then reads its row), and their results come back to each."""
    store, stmts = traced
    other = Store(tmp_path / "w.db")
    hold, holding = threading.Event(), threading.Event()
    seen: dict[int, object] = {}

    def first() -> str:
        holding.set()
        hold.wait(10)
        store.settings.set("first", 0)
        return "first"

    def worker(n: int) -> None:
        got = write(store, lambda: (store.settings.set(f"k{n}", n), n)[1])
        seen[n] = (got, other.settings.get(f"k{n}"))  # committed when we hear back

    with attached(store) as w:
        t0 = threading.Thread(target=lambda: seen.__setitem__(-1, write(store, first)))
        t0.start()
        assert holding.wait(10)
        threads = [threading.Thread(target=worker, args=(n,)) for n in range(5)]
        for t in threads:
            t.start()
        while w._queue.qsize() < 5:  # all five are queued behind the first
            threading.Event().wait(0.01)
        hold.set()
        for t in [t0, *threads]:
            t.join(10)
    assert seen == {-1: "first", **{n: (n, n) for n in range(5)}}
    assert (w.groups, w.writes) == (2, 6)
    assert commits(stmts) == 2  # the lone first write, then the five together
    other.close()


def test_a_failing_write_undoes_only_its_own_part_of_the_group(traced, tmp_path):
    """In a group, a write that raises leaves none of its rows; its caller gets its error;
    the others of the group commit."""
    store, stmts = traced

    def bad() -> None:
        store.settings.set("bad", 1)
        raise Boom("no")

    w, errors = grouped(
        store,
        lambda: store.settings.set("0", 0),
        {1: lambda: store.settings.set("a", 1), 2: bad, 3: lambda: store.settings.set("b", 2)},
    )
    assert list(errors) == [2] and isinstance(errors[2], Boom)
    assert (store.settings.get("a"), store.settings.get("bad"), store.settings.get("b")) == (1, None, 2)
    assert w.groups == 2 and commits(stmts) == 2


def test_without_a_writer_or_inside_a_transaction_a_write_runs_here(traced):
    """No writer attached: the closure runs in the calling thread; inside the caller's own
    transaction it runs there too, as part of it (a writer would wait for the lock the
    caller holds). A write that finds the writer idle commits in the calling thread too
    (no handoff); one queued behind a running group runs on the writer's thread."""
    store, stmts = traced
    me = threading.current_thread().name
    assert write(store, lambda: threading.current_thread().name) == me
    with attached(store) as w:
        with store.transaction():
            assert write(store, lambda: threading.current_thread().name) == me
            store.settings.set("x", 1)
        assert write(store, lambda: threading.current_thread().name) == me
        hold, holding, seen = threading.Event(), threading.Event(), []
        t = threading.Thread(target=write, args=(store, lambda: (holding.set(), hold.wait(10))))
        t.start()
        assert holding.wait(10)
        queued = threading.Thread(target=lambda: seen.append(write(store, lambda: threading.current_thread().name)))
        queued.start()
        while w._queue.qsize() < 1:
            threading.Event().wait(0.01)
        hold.set()
        t.join(10)
        queued.join(10)
        assert seen == ["store-writer"]
    assert store.settings.get("x") == 1


def test_a_failed_commit_is_every_members_error(traced):
    """A group whose commit fails (here a foreign key checked at the commit): every write
    of it hears the failure, and none of its rows is there."""
    store, _ = traced

    def orphan() -> None:
        with store.transaction():
            store.db.execute("pragma defer_foreign_keys = on")  # checked when the group commits
            store.db.execute("insert into episodes (task_id, config_id, created_at) values (999, 999, 'x')")

    _, errors = grouped(
        store,
        lambda: None,
        {"g0": lambda: store.settings.set("g0", 0), "orphan": orphan, "g1": lambda: store.settings.set("g1", 1)},
    )
    assert sorted(errors) == ["g0", "g1", "orphan"] and all(isinstance(e, StoreError) for e in errors.values())
    assert store.settings.get("g0") is None and store.settings.get("g1") is None
    assert store.db.execute("select count(*) from episodes").fetchone()[0] == 0


def test_a_nested_transaction_with_nothing_written_reuses_the_enclosing_savepoint(traced):
    """savepoint > savepoint with no write between: one savepoint statement; the inner
    block failing still undoes its writes, and the enclosing block goes on and commits."""
    store, stmts = traced
    with store.transaction():
        store.settings.set("outer", 1)
        with store.transaction():
            stmts.clear()
            with pytest.raises(Boom):
                with store.transaction():
                    store.settings.set("inner", 2)
                    raise Boom
            assert not [s for _, s in stmts if s.lower().startswith("savepoint tx_")]  # (not sqlite-utils' own)
            store.settings.set("after", 3)
    assert (store.settings.get("outer"), store.settings.get("inner"), store.settings.get("after")) == (1, None, 3)


def levels_of_commits(stmts) -> list[str]:
    """The safety level of each commit, in order: "full" (an fsync) or "normal" (light)."""
    out, level = [], {}  # thread: its connection's level (it opens at full)
    for t, s in stmts:
        low = s.strip().lower()
        if low.startswith("pragma synchronous"):
            level[t] = low.split("=")[-1].strip()
        elif low == "commit":
            out.append(level.get(t, "full"))
    return out


def test_within_the_power_loss_window_writes_commit_light_and_the_close_syncs_the_log(traced, monkeypatch):
    """Ten writes asked durable, one after the other, inside the window: ten light commits
    (no fsync); they are on disk once the writer closes (it syncs the log, once)."""
    store, stmts = traced
    monkeypatch.setattr(writer, "DURABLE_S", 3600.0)
    with attached(store) as w:
        for n in range(10):
            write(store, lambda n=n: store.settings.set(f"k{n}", n))
        assert (w.syncs, w.durable_commits) == (0, 0)
    assert levels_of_commits(stmts) == ["normal"] * 10
    assert (w.syncs, w.durable_commits) == (1, 0)
    assert [store.settings.get(f"k{n}") for n in range(10)] == list(range(10))


def test_past_the_window_a_durable_write_commits_at_full_and_a_light_one_stays_light(traced, monkeypatch):
    """Window 0: every write asked durable is its own durable point (synchronous = full);
    a light write with nothing durable pending commits light, and leaves nothing to sync."""
    store, stmts = traced
    monkeypatch.setattr(writer, "DURABLE_S", 0.0)
    with attached(store) as w:
        write(store, lambda: store.settings.set("claim", 1), durable=False)
        write(store, lambda: store.settings.set("step", 1))
        write(store, lambda: store.settings.set("result", 1), durable=False)
    assert levels_of_commits(stmts) == ["normal", "full", "normal"]
    assert (w.durable_commits, w.syncs) == (1, 0)


def test_an_idle_writer_makes_its_durable_writes_durable_before_it_closes(traced, monkeypatch):
    """A write asked durable, then nothing: the writer reaches a durable point by itself
    (its commit was at full, or it syncs the log when the window ends), without a close."""
    store, stmts = traced
    monkeypatch.setattr(writer, "DURABLE_S", 0.2)
    with attached(store) as w:
        write(store, lambda: store.settings.set("step", 1))
        for _ in range(1000):
            if w.syncs + w.durable_commits:
                break
            threading.Event().wait(0.01)
        assert w.syncs + w.durable_commits == 1 and not w._unsynced


def test_a_write_that_fails_before_writing_leaves_its_group_flat(traced, tmp_path):
    """A group's write that fails before writing anything (a fence, a compare-and-set read)
    is its caller's error alone: the group runs without a single savepoint."""
    store, stmts = traced

    def refused() -> None:
        store.settings.get("x")
        raise Boom("refused before writing")

    w, errors = grouped(
        store, lambda: None, {1: lambda: store.settings.set("a", 1), 2: refused, 3: lambda: store.settings.set("b", 2)}
    )
    assert list(errors) == [2] and (store.settings.get("a"), store.settings.get("b")) == (1, 2)
    assert w.groups == 2 and commits(stmts) == 2
    assert not [
        s for t, s in stmts if t == "store-writer" and s.lower().startswith(("savepoint tx_", "rollback"))
    ]  # (not sqlite-utils' own)


# ---------------------------------------------------------------- writes nobody waits for


def test_a_write_nobody_waits_for_commits_with_the_next_group(traced, tmp_path, monkeypatch):
    """`write_later` (an item's result) returns at once and commits first in the next
    group, here the next write's: one commit for both; the close commits what is left."""
    store, stmts = traced
    monkeypatch.setattr(writer, "DURABLE_S", 3600.0)
    other = Store(tmp_path / "w.db")
    errors: list[BaseException] = []
    with attached(store) as w:
        writer.write_later(store, lambda: store.settings.set("result", 1), on_error=errors.append)
        assert other.settings.get("result") is None and commits(stmts) == 0  # not yet
        write(store, lambda: store.settings.set("step", 2))
        assert (other.settings.get("result"), other.settings.get("step")) == (1, 2)
        assert commits(stmts) == 1 and (w.groups, w.writes) == (1, 2)
        writer.write_later(store, lambda: store.settings.set("last", 3), on_error=errors.append)
    assert other.settings.get("last") == 3 and commits(stmts) == 2 and not errors
    other.close()


def _waiting_on_its_deadline(w: writer.Writer) -> None:
    for _ in range(1000):
        if 0.0 < getattr(w, "_wakes_at", 1.0) < float("inf"):
            return
        threading.Event().wait(0.005)
    raise AssertionError("the writer thread never waited for its deadline")


@pytest.mark.parametrize("after_a_step", [False, True])
def test_an_idle_writer_commits_a_write_nobody_waits_for_within_the_window(traced, tmp_path, monkeypatch, after_a_step):
    """With no group to join, the writer's thread commits it once it waited DURABLE_S; after
    a lone worker's last step too, where the writer's thread waits for the window's end of
    that step (woken by its own deadline, it syncs the log, then waits for the result's)."""
    store, stmts = traced
    monkeypatch.setattr(writer, "DURABLE_S", 0.1)
    other = Store(tmp_path / "w.db")
    with attached(store) as w:
        if after_a_step:
            write(store, lambda: store.settings.set("step", 1))
            _waiting_on_its_deadline(w)
        writer.write_later(store, lambda: store.settings.set("result", 1), on_error=print)
        for _ in range(1000):
            if other.settings.get("result") == 1:
                break
            threading.Event().wait(0.01)
        assert other.settings.get("result") == 1 and commits(stmts, "store-writer") == 1
    other.close()


def test_a_failing_write_nobody_waits_for_tells_its_on_error_and_the_group_goes_on(traced, monkeypatch):
    """Its failure goes to its `on_error` (nobody waits to hear it); the group's other
    writes commit. Without a writer it runs at once and raises, as `write` does."""
    store, stmts = traced
    monkeypatch.setattr(writer, "DURABLE_S", 3600.0)
    errors: list[BaseException] = []

    def refused() -> None:
        raise Boom("fenced")

    with attached(store):
        writer.write_later(store, refused, on_error=errors.append)
        write(store, lambda: store.settings.set("step", 1))
    assert [str(e) for e in errors] == ["fenced"] and store.settings.get("step") == 1 and commits(stmts) == 1
    with pytest.raises(Boom):
        writer.write_later(store, refused, on_error=errors.append)
    assert len(errors) == 1


def test_a_lone_worker_commits_in_its_own_thread_and_several_hand_their_writes_to_the_writer(traced):
    """The writer idle: a thread's writes commit in that thread while it is the only one
    writing (no handoff, at concurrency 1); once another thread writes in between, the
    writes go to the writer's thread (one connection commits for several workers)."""
    store, stmts = traced

    def other_thread(key: str) -> None:
        t = threading.Thread(target=write, args=(store, lambda: store.settings.set(key, 1)), name="worker-2")
        t.start()
        t.join(10)

    with attached(store):
        for n in range(3):
            write(store, lambda n=n: store.settings.set(f"a{n}", n))
        other_thread("b")
        write(store, lambda: store.settings.set("c", 1))
    mine = threading.current_thread().name
    assert [t for t, s in stmts if s.strip().lower() == "commit"] == [mine] * 3 + ["store-writer"] * 2
    assert [store.settings.get(k) for k in ("a2", "b", "c")] == [2, 1, 1]


def test_a_worker_whose_writes_go_to_the_writer_opens_no_connection(traced):
    """A worker handing its writes (and the pages it fetched) to the writer's thread runs
    no statement of its own: it opens no connection (each opening reads the schema)."""
    store, stmts = traced
    done: list = []

    def worker() -> None:
        with store.blobs.deferred():
            key = store.blobs.put(b"a page")  # (waits for the worker's next write)
            write(store, lambda: store.settings.set("b", key))
        done.append(key)

    with attached(store):
        write(
            store, lambda: store.settings.set("a", 1)
        )  # (the lone worker so far: the next thread's write is handed over)
        t = threading.Thread(target=worker, name="worker-2")
        t.start()
        t.join(10)
    assert done and [s for t, s in stmts if t == "worker-2"] == []
    assert store.settings.get("b") == done[0] and store.blobs.get(done[0]) == b"a page"


def test_a_lone_workers_item_results_wake_nobody_and_ride_on_its_next_step(traced, monkeypatch):
    """After a lone worker's light commit the writer's thread waits for the power-loss
    window's end; an item result (`write_later`) due no earlier does not tell it (one
    thread switch per item at concurrency 1): the worker's next step commits it."""
    store, stmts = traced
    monkeypatch.setattr(writer, "DURABLE_S", 3600.0)
    with attached(store) as w:
        write(store, lambda: store.settings.set("step", 0))
        _waiting_on_its_deadline(w)
        told: list[int] = []
        notify = w._state.notify
        monkeypatch.setattr(w._state, "notify", lambda n=1: (told.append(n), notify(n)))
        for i in range(1, 4):
            writer.write_later(store, lambda i=i: store.settings.set(f"result{i}", i), on_error=print)
            write(store, lambda i=i: store.settings.set("step", i))
        assert told == [] and commits(stmts, "MainThread") == 4 and commits(stmts, "store-writer") == 0
        assert [store.settings.get(f"result{i}") for i in (1, 2, 3)] == [1, 2, 3]
