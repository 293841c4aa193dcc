"""Import validates first and writes in one transaction: a malformed file is rejected with
its line number and the reason, and the database is left exactly as it was."""

from __future__ import annotations

import hashlib
import json

import pytest

from react_editor.main import main as cli
from sessions.exchange import Filters, ImportFailed, export, import_file
from sessions.exchange.schema import READABLE_VERSIONS, SCHEMA_VERSION
from sessions.store import Store
from tests.export_support import ROOM_SCRIPT, cfg, table_counts
from tests.toy_envs import ROOM_TASK


@pytest.fixture
def good(toy, tmp_path):
    toy.llm.push(*ROOM_SCRIPT)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm))
    toy.engine.run(v.id)
    toy.engine.editor.edit(v.id, 1, "rewrite_thought", "Fixed.", keep_rest=True)
    toy.engine.editor.branch(v.id, 3)  # shares steps 1..3 with the first version
    path = tmp_path / "good.jsonl"
    export(toy.store, "jsonl", path, filters=Filters(all_versions=True))
    return path.read_text(encoding="utf-8").splitlines()


def _db_state(store):
    store.db.execute("pragma wal_checkpoint(TRUNCATE)")
    return table_counts(store), hashlib.sha256(open(store.file, "rb").read()).hexdigest()


def _bad(lines_or_text, tmp_path, name="bad.jsonl"):
    p = tmp_path / name
    p.write_text(lines_or_text if isinstance(lines_or_text, str) else "\n".join(lines_or_text) + "\n", encoding="utf-8")
    return p


def _mutate(line, fn):
    obj = json.loads(line)
    fn(obj)
    return json.dumps(obj)


CASES = {
    "bad_json": (lambda g: [g[0], g[1][:-5]], 2, "bad JSON"),
    "not_object": (lambda g: [g[0], "[1, 2]"], 2, "a record is a JSON object"),
    "wrong_schema": (lambda g: [g[0], _mutate(g[1], lambda o: o.update(schema="other/thing"))], 2, "unknown schema"),
    "newer_version": (lambda g: [_mutate(g[0], lambda o: o.update(schema_version=99))], 1, "newer"),
    # the format version is a whole number that every export writes: "2" or 2.0 is no version 1 or 2
    "version_missing": (
        lambda g: [g[0], _mutate(g[1], lambda o: o.pop("schema_version"))],
        2,
        "missing field 'schema_version'",
    ),
    "version_as_text": (
        lambda g: [_mutate(g[0], lambda o: o.update(schema_version="2"))],
        1,
        "schema_version is text; a format version is a whole number",
    ),
    "version_decimal": (
        lambda g: [_mutate(g[0], lambda o: o.update(schema_version=2.0))],
        1,
        "schema_version is a decimal number",
    ),
    "version_bool": (
        lambda g: [_mutate(g[0], lambda o: o.update(schema_version=True))],
        1,
        "schema_version is true/false",
    ),
    "version_zero": (lambda g: [_mutate(g[0], lambda o: o.update(schema_version=0))], 1, "unknown schema version 0"),
    "missing_field": (lambda g: [g[0], _mutate(g[1], lambda o: o.pop("steps"))], 2, "missing field 'steps'"),
    "missing_nested": (
        lambda g: [_mutate(g[0], lambda o: o["episode"]["task"].pop("text"))],
        1,
        "missing field 'episode.task.text'",
    ),
    "api_key_field": (
        lambda g: [_mutate(g[0], lambda o: o["episode"]["config"].update(api_key="sk-x"))],
        1,
        "unknown field 'episode.config.api_key'",
    ),
    "bad_env": (
        lambda g: [_mutate(g[0], lambda o: o["episode"]["task"].update(env="atari"))],
        1,
        "unknown environment 'atari'",
    ),
    "step_changed": (
        lambda g: [g[0], g[1], _mutate(g[2], lambda o: o["steps"][1].update(action="jump"))],
        3,
        "differs from its earlier record",
    ),
    "orphan_record": (lambda g: [g[1]], 1, "parent version ref 1 is not an earlier record"),
    "valid_control": (lambda g: [g[0]], 1, None),  # control: a valid file does import
    "chat_sft": (lambda g: [json.dumps({"messages": [{"role": "user", "content": "hi"}]})], 1, "chat-sft"),
    "not_contiguous": (
        lambda g: [g[0], _mutate(g[0], lambda o: o["episode"].update(ref=2)), g[1]],
        3,
        "not contiguous",
    ),
    # issue 26: NaN/Infinity are not JSON (the export would write invalid JSON); a 5,000-digit ref
    "nan_temperature": (
        lambda g: [_mutate(g[0], lambda o: o["episode"]["config"].update(temperature=float("nan")))],
        1,
        "NaN is not a JSON number",
    ),
    "inf_temperature": (
        lambda g: [g[0], _mutate(g[1], lambda o: o["episode"]["config"].update(temperature=float("inf")))],
        2,
        "Infinity is not a JSON number",
    ),
    "huge_float": (
        lambda g: [g[0].replace('"temperature":0.0', '"temperature":1e999', 1)],
        1,
        "1e999 is not a JSON number",
    ),
    "huge_ref": (lambda g: [g[0].replace('"ref":1', '"ref":' + "9" * 5000, 1)], 1, "(5,000 digits) is too large"),
    # issue 39: JSON escapes a lone surrogate ("a\ud800b"), which is no text: refused, not a traceback in a digest
    "lone_surrogate": (
        lambda g: [g[0], _mutate(g[1], lambda o: o["steps"][0].update(thought="a\ud800b"))],
        2,
        "lone surrogate \\ud800",
    ),
    "lone_surrogate_key": (
        lambda g: [_mutate(g[0], lambda o: o["episode"]["task"]["data"].update({"k\udfff": 1}))],
        1,
        "lone surrogate \\udfff",
    ),
    "escaped_pair": (lambda g: [_mutate(g[0], lambda o: o["steps"][0].update(thought="a\U0001f600b"))], 1, None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_jsonl_is_rejected_and_nothing_written(toy, good, tmp_path, case):
    make, line, reason = CASES[case]
    target = Store(tmp_path / "target.db")
    import_file(target, _bad(good, tmp_path, "seed.jsonl"))  # the db is not empty
    before = _db_state(target)
    path = _bad(make(good), tmp_path)
    if reason is None:  # control: a valid subset imports fine
        import_file(target, path)
        assert _db_state(target) != before
        return
    with pytest.raises(ImportFailed) as err:
        import_file(target, path)
    assert str(err.value).startswith(f"line {line}: ") and reason in str(err.value), str(err.value)
    assert "\n" not in str(err.value)
    assert _db_state(target) == before


def test_a_100_mb_line_is_refused_without_parsing(toy, good, tmp_path):
    target = Store(tmp_path / "target.db")
    before = _db_state(target)
    p = tmp_path / "huge.jsonl"
    with open(p, "w", encoding="utf-8") as f:
        f.write(good[0] + "\n")
        f.write('{"schema": "react-editor/trajectory", "pad": "')
        chunk = "x" * (1 << 20)
        for _ in range(100):
            f.write(chunk)
        f.write('"}\n')
    with pytest.raises(ImportFailed, match=r"^line 2: longer than 16 MB"):
        import_file(target, p)
    assert _db_state(target) == before


@pytest.mark.parametrize(
    "name, text, reason",
    [
        ("p.json", '{"react_put_0": "x",\n "react_put_1": 5}', "line 2: entry 'react_put_1' is int"),
        ("p.json", '{"react_put_0": \n"unterminated', "line 2: bad JSON"),
        ("p.json", "[1, 2]", "line 1: a ReAct prompt file is a non-empty JSON object"),
        ("p.json", '{"hello": "world"}', "no ReAct trajectory entries"),
        ("p.bin", "\x00\x01binary", "unknown format"),
        ("p.txt", "just some words\n", "not a Wikipedia-format transcript"),
    ],
)
def test_malformed_prompt_files_are_rejected(tmp_path, name, text, reason):
    target = Store(tmp_path / "target.db")
    before = _db_state(target)
    with pytest.raises(ImportFailed, match=None) as err:
        import_file(target, _bad(text, tmp_path, name))
    assert reason in str(err.value)
    assert _db_state(target) == before


def test_cli_rejection_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_DB", str(tmp_path / "c.db"))
    p = _bad(["{not json"], tmp_path)
    assert cli(["import", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: line 1: bad JSON") and err.count("\n") == 1
    assert cli(["import", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.parametrize("version", list(READABLE_VERSIONS))
def test_every_readable_format_version_imports(toy, good, tmp_path, version):
    """The current format version and every older one this release reads are accepted."""
    target = Store(tmp_path / "target.db")
    before = _db_state(target)
    import_file(target, _bad([_mutate(good[0], lambda o: o.update(schema_version=version))], tmp_path))
    assert _db_state(target) != before and SCHEMA_VERSION in READABLE_VERSIONS


def test_cli_refuses_a_newer_format_version_in_one_line(good, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_DB", str(tmp_path / "c.db"))
    p = _bad([_mutate(good[0], lambda o: o.update(schema_version=SCHEMA_VERSION + 1))], tmp_path)
    assert cli(["import", str(p)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: line 1: schema version {SCHEMA_VERSION + 1} is newer than this ReAct Editor "
        f"understands ({SCHEMA_VERSION})\n"
    )
    assert not Store(tmp_path / "c.db").db["episodes"].count


@pytest.mark.parametrize("name, text", [("s.json", '{"react_put_0": "a\\ud800b"}'), ("s.jsonl", None)])
def test_cli_refuses_a_lone_surrogate_in_one_line(good, tmp_path, capsys, monkeypatch, name, text):
    """Issue 39 item 12: a JSON-escaped lone surrogate in a prompt file or a jsonl export is
    one line, exit 2, and the database keeps what it held (before: a traceback in `_digest`)."""
    monkeypatch.setenv("REACT_EDITOR_DB", str(tmp_path / "c.db"))
    assert cli(["import", str(_bad(good[:1], tmp_path, "seed.jsonl"))]) == 0
    capsys.readouterr()
    before = _db_state(Store(tmp_path / "c.db"))
    bad = good[:1] + [_mutate(good[1], lambda o: o["steps"][-1].update(action="go\ud800"))]
    assert "\\ud800" in (text or bad[1])  # the file holds the escape, as a hostile export would
    assert cli(["import", str(_bad(text or bad, tmp_path, name))]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: line {1 if text else 2}: ") and err.count("\n") == 1, err
    assert "lone surrogate \\ud800" in err and "Traceback" not in err
    assert _db_state(Store(tmp_path / "c.db")) == before
