"""`Store(path, tracer=fn)`, as sqlite-utils' `Database(tracer=...)`: every statement SQLite
runs on every connection the Store opens, whichever thread opened it."""

from __future__ import annotations

import threading

from sessions.store import Store


def test_a_tracer_sees_every_statement_of_every_thread(tmp_path):
    seen: list[tuple[str, str, object]] = []
    store = Store(
        tmp_path / "t.db", tracer=lambda sql, params: seen.append((threading.current_thread().name, sql, params))
    )
    assert any("schema_version" in sql for _, sql, _ in seen)  # the first connection's migration
    writer = threading.Thread(target=lambda: store.settings.set("pace", 2), name="writer")
    writer.start()
    writer.join()
    mine = [sql.strip().lower() for name, sql, _ in seen if name == "writer"]
    assert "begin immediate" in mine and "commit" in mine and any('into "settings"' in s for s in mine), mine
    assert all(params is None for _, _, params in seen)  # SQLite gives each statement with its values bound
    assert store.settings.get("pace") == 2
    store.close()


def test_without_a_tracer_nothing_is_traced(tmp_path):
    store = Store(tmp_path / "t.db")
    assert store.db.conn is not None and store.settings.get("pace", 1) == 1
    store.close()
