"""The test session's own speed-ups change nothing a test can see: a new database copied from
the session's template (tests/store_template.py) is the database the migrations make, and the
RAM temporary folder (tests/fast_tmp.py) steps aside when someone chose one."""

from __future__ import annotations

from contextlib import closing

from sessions import schema
from sessions.store import Store
from tests import fast_tmp


def _contents(store: Store) -> tuple[list, dict]:
    db = store.db
    ddl = sorted(db.execute("select type, name, tbl_name, sql from sqlite_master").fetchall(), key=repr)
    rows = {
        name: sorted(db.execute(f'select * from "{name}"').fetchall(), key=repr)
        for (name,) in db.execute("select name from sqlite_master where type = 'table'")
    }
    return ddl, rows


def test_a_copied_new_database_is_the_one_the_migrations_make(tmp_path):
    seen: list[str] = []
    with closing(Store(tmp_path / "migrated.db", tracer=lambda sql, _: seen.append(sql))) as migrated:
        assert any("schema_version" in s for s in seen)  # a traced Store migrates for real
        with closing(Store(tmp_path / "copied.db")) as copied:
            assert _contents(copied) == _contents(migrated)
            assert copied.db.execute("pragma journal_mode").fetchone()[0] == "wal"
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(("-wal", "-shm"))) == [
        "copied.db",
        "migrated.db",
    ]  # no seed file left behind


def test_a_test_that_replaces_the_migrations_gets_their_database(tmp_path, monkeypatch):
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:3])
    with closing(Store(tmp_path / "old.db")) as old:
        assert old.db.execute("select value from meta where key = 'schema_version'").fetchone()[0] == "3"


def test_an_existing_file_is_opened_not_replaced(tmp_path):
    foreign = tmp_path / "notes.db"
    foreign.write_bytes(b"")
    with closing(Store(foreign)) as store:  # an empty file: the Store creates its schema in it
        assert store.db.execute("select value from meta where key = 'app'").fetchone()[0] == schema.APP_ID


def test_a_chosen_temporary_folder_wins_over_ram(monkeypatch):
    assert fast_tmp.ram_temp_root({"TMPDIR": "/somewhere"}) is None
    assert fast_tmp.ram_temp_root({"PYTEST_DEBUG_TEMPROOT": "/somewhere"}) is None
    monkeypatch.setattr(fast_tmp, "MIN_FREE", 1 << 60)
    assert fast_tmp.ram_temp_root({}) is None  # a RAM disk without room is passed over
