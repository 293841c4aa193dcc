"""The API key goes only where the user sent it: an imported file's model endpoint gets no
request until a person confirms it, and credentials never sit in a URL that is stored,
shown or exported (config base URLs, call records, MediaWiki URLs)."""

from __future__ import annotations

import json

import pytest

from tests.cli_helpers import cli
from tests.engine_scripts import ROOM_SCRIPT
from tests.scripted_server import ScriptedLLM

KEY = "sk-user-secret-key-1234"


@pytest.fixture
def other_llm():
    """A second scripted server: the one an edited export points at."""
    with ScriptedLLM() as llm:
        yield llm


def _exported_pointing_at(capsys, toy, tmp_path, target: str, call_url: str | None = None) -> str:
    """Run two steps on the user's own server, export, and edit the file so its config
    (and, with `call_url`, its call records) name `target`."""
    db = str(toy.db)
    toy.llm.push(*ROOM_SCRIPT[:2])
    code, _, err = cli(
        capsys,
        "run",
        "--env",
        "alfworld",
        "--task",
        "toy/room-1",
        "--base-url",
        toy.llm.base_url,
        "--model",
        "m",
        "--human",
        "--db",
        db,
    )
    assert code == 0, err
    for _ in range(2):
        assert cli(capsys, "step", "1", "--db", db)[0] == 0
    out = tmp_path / "ep.jsonl"
    assert cli(capsys, "export", "1", "--format", "jsonl", "--out", str(out), "--db", db)[0] == 0
    lines = []
    for line in out.read_text().splitlines():
        rec = json.loads(line)
        rec["episode"]["config"]["base_url"] = target
        for c in rec["calls"]:
            c["params"]["base_url"] = call_url or target
        lines.append(json.dumps(rec))
    out.write_text("\n".join(lines) + "\n")
    return str(out)


def _auth_seen(llm: ScriptedLLM) -> list[str]:
    return [r.headers.get("authorization", "") for r in llm.requests]


def _imported_elsewhere(toy, other_llm, tmp_path, capsys, monkeypatch) -> tuple[str, int]:
    """An episode exported pointing at `other_llm`, imported into a second database (the user's
    own key in the environment, no endpoint of theirs): (that database, the episode)."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    path = _exported_pointing_at(capsys, toy, tmp_path, other_llm.base_url)
    db2 = str(tmp_path / "second.db")
    code, out, err = cli(capsys, "import", path, "--db", db2, "--json")
    assert code == 0, err
    (ep,) = json.loads(out)["episodes"]
    return db2, ep


def test_an_imported_endpoint_gets_nothing_until_confirmed(toy, other_llm, tmp_path, capsys, monkeypatch):
    db2, ep = _imported_elsewhere(toy, other_llm, tmp_path, capsys, monkeypatch)
    other_llm.set_default(" go to table 1")
    # no endpoint of the user's own: one line saying how to confirm, nothing sent
    code, out, err = cli(capsys, "resume", str(ep), "--db", db2)
    assert code == 2 and err.count("\n") == 1 and f"react-editor confirm {ep}" in err, err
    assert other_llm.requests == []
    code, out, err = cli(capsys, "resample", str(ep), "--step", "2", "--n", "2", "--temperature", "0.7", "--db", db2)
    assert code == 2 and err.count("\n") == 1 and f"react-editor confirm {ep}" in err, err
    assert other_llm.requests == []
    # the user's own endpoint (OPENAI_BASE_URL) is used instead of the file's
    monkeypatch.setenv("OPENAI_BASE_URL", toy.llm.base_url)
    toy.llm.reset()
    toy.llm.push(*ROOM_SCRIPT[2:])
    code, out, err = cli(capsys, "resume", str(ep), "--db", db2, "--json")
    assert code == 0, err
    assert json.loads(out)["success"] is True, (out, err)
    assert other_llm.requests == [] and f"Bearer {KEY}" in _auth_seen(toy.llm)
    # a person's OK: the file's endpoint is now the user's choice
    code, out, err = cli(capsys, "confirm", str(ep), "--db", db2)
    assert code == 0 and "model endpoint" in out, (out, err)
    from agent.endpoint_keys import CONFIRMED_SETTING
    from sessions.store import Store

    # the app's key guard lets the launch key reach it too (issue 26 item 9)
    assert Store(db2).settings.get(CONFIRMED_SETTING) == [other_llm.base_url]
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert cli(capsys, "branch", str(ep), "--step", "3", "--db", db2)[0] == 0
    code, out, err = cli(capsys, "step", str(ep), "--db", db2)
    assert code == 0 and other_llm.requests, err


def test_a_base_url_flag_is_the_users_choice(toy, other_llm, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    path = _exported_pointing_at(capsys, toy, tmp_path, other_llm.base_url)
    db2 = str(tmp_path / "second.db")
    assert cli(capsys, "import", path, "--db", db2)[0] == 0
    toy.llm.reset()
    toy.llm.push(*ROOM_SCRIPT[2:])
    code, out, err = cli(capsys, "resume", "1", "--db", db2, "--base-url", toy.llm.base_url, "--json")
    assert code == 0 and json.loads(out)["success"] is True, err
    assert other_llm.requests == []


def test_the_editor_lists_the_imported_endpoint_for_confirmation(toy, other_llm, tmp_path, capsys, monkeypatch):
    from agent.engine import Engine
    from sessions.store import Store

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    path = _exported_pointing_at(capsys, toy, tmp_path, other_llm.base_url)
    db2 = str(tmp_path / "second.db")
    assert cli(capsys, "import", path, "--db", db2)[0] == 0
    eng = Engine(Store(db2))
    assert eng.envs.unconfirmed_references(eng.store.episodes.get(1)) == [f"model endpoint {other_llm.base_url}"]
    eng.envs.confirm_references(1)
    assert eng.envs.unconfirmed_references(eng.store.episodes.get(1)) == []


CREDENTIAL_URLS = [
    "http://user:pass@127.0.0.1:9/v1",
    "http://127.0.0.1:9/v1?api_key=sk-abcdef",
    "http://127.0.0.1:9/v1?token=abcdef",
    "http://127.0.0.1:9/v1?x=1&Secret=abcdef",
    "http://127.0.0.1:9/v1?password=abcdef",
    "http://127.0.0.1:9/v1?auth=abcdef",
    "http://127.0.0.1:9/v1?sig=abcdef",
    "http://127.0.0.1:9/v1#token=abcdef",
    "http://127.0.0.1:9/v1#abcdef",
]


@pytest.mark.parametrize("url", CREDENTIAL_URLS)
def test_credentials_anywhere_in_a_base_url_are_refused(toy, capsys, url):
    db = str(toy.db)
    code, out, err = cli(capsys, "run", "--env", "alfworld", "--task", "toy/room-1", "--base-url", url, "--db", db)
    assert code == 2 and err.count("\n") == 1 and "credentials" in err, err
    assert "abcdef" not in err and "pass@" not in err
    assert cli(capsys, "episodes", "--db", db, "--json")[1].strip() == "[]"


@pytest.mark.parametrize("url", CREDENTIAL_URLS[1:4])
def test_credentials_in_a_mediawiki_url_are_refused(tmp_path, capsys, url):
    code, out, err = cli(
        capsys,
        "run",
        "--env",
        "hotpotqa",
        "--question",
        "q?",
        "--wiki",
        "live",
        "--wiki-url",
        url,
        "--db",
        str(tmp_path / "w.db"),
        "--human",
    )
    assert code == 2 and err.count("\n") == 1 and "credentials" in err and "abcdef" not in err, err


def test_imported_configs_and_call_records_lose_their_credentials(toy, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    path = _exported_pointing_at(
        capsys,
        toy,
        tmp_path,
        "http://127.0.0.1:9/v1?api_key=sk-leak1#frag-leak2",
        call_url="http://bob:pw-leak3@127.0.0.1:9/v1?token=leak4&model=x",
    )
    db2 = tmp_path / "second.db"
    assert cli(capsys, "import", path, "--db", str(db2))[0] == 0
    again = tmp_path / "again.jsonl"
    assert cli(capsys, "export", "1", "--format", "jsonl", "--out", str(again), "--db", str(db2))[0] == 0
    text = again.read_text()
    raw = db2.read_bytes()
    for leak in ("leak1", "leak2", "leak3", "leak4"):
        assert leak not in text and leak.encode() not in raw, leak
    rec = json.loads(text.splitlines()[0])
    assert rec["episode"]["config"]["base_url"] == "http://127.0.0.1:9/v1"
    assert {c["params"]["base_url"] for c in rec["calls"]} == {"http://127.0.0.1:9/v1"}  # no query either


# Issue 26 item 17: credentials in a path or an unusual parameter, and URLs that cannot be parsed
HIDDEN = [
    "http://127.0.0.1:9/v1/sk-proj-SEKRIT1",
    "http://127.0.0.1:9/sk-SEKRIT1/v1",
    "http://127.0.0.1:9/v1;api_key=SEKRIT1",
    "http://127.0.0.1:9/v1?bearer=SEKRIT1",
    "http://127.0.0.1:9/v1?pwd=SEKRIT1",
    "http://127.0.0.1:9/v1?x=SK-SEKRIT1",
    "http://127.0.0.1:9/v1?x=1;api_key=SEKRIT1",
    "http://127.0.0.1:9/v1?\uff4b\uff45\uff59=SEKRIT1",  # fullwidth ｋｅｙ
    "http://127.0.0.1:9/v1%3Fapi_key=SEKRIT1",
    "http://127.0.0.1:9/v1%23SEKRIT1",
    "http://127.0.0.1:9/v1%253Ftoken=SEKRIT1",  # encoded twice
]
UNPARSEABLE = [
    "http://[::1/v1?k=SEKRIT1",
    "http://127.0.0.1:99999999/SEKRIT1",
    "ftp://127.0.0.1/SEKRIT1",
    "http://127.0.0.1:9/v1\\SEKRIT1",
    "SEKRIT1",
]


@pytest.mark.parametrize("url", HIDDEN + UNPARSEABLE + ["http://127.0.0.1:9/v1?x=1"])
def test_a_base_url_with_a_hidden_credential_or_a_query_is_refused(toy, capsys, url):
    db = str(toy.db)
    code, out, err = cli(capsys, "run", "--env", "alfworld", "--task", "toy/room-1", "--base-url", url, "--db", db)
    assert code == 2 and err.count("\n") == 1 and "SEKRIT1" not in err, err
    assert cli(capsys, "episodes", "--db", db, "--json")[1].strip() == "[]"


@pytest.mark.parametrize("url", HIDDEN + UNPARSEABLE)
def test_a_mediawiki_url_with_a_hidden_credential_is_refused(tmp_path, capsys, url):
    code, out, err = cli(
        capsys,
        "run",
        "--env",
        "hotpotqa",
        "--question",
        "q?",
        "--wiki",
        "live",
        "--wiki-url",
        url,
        "--db",
        str(tmp_path / "w.db"),
        "--human",
    )
    assert code == 2 and err.count("\n") == 1 and "SEKRIT1" not in err, err


@pytest.mark.parametrize("url", HIDDEN + ["http://127.0.0.1:9/v1?x=1"])
def test_an_import_stores_no_hidden_credential(toy, tmp_path, capsys, monkeypatch, url):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    path = _exported_pointing_at(capsys, toy, tmp_path, url)
    lines = [json.loads(line) for line in open(path)]
    for rec in lines:
        rec["episode"]["env_options"]["wiki_url"] = url.replace("/v1", "/w/api.php")
        rec["episode"]["env_options"]["mirror"] = "https://mirror.example/w/api.php?token=SEKRIT1"
    open(path, "w").write("".join(json.dumps(r) + "\n" for r in lines))
    db2 = tmp_path / "second.db"
    code, _, err = cli(capsys, "import", path, "--db", str(db2))
    assert code == 0, err
    again = tmp_path / "again.jsonl"
    assert cli(capsys, "export", "1", "--format", "jsonl", "--out", str(again), "--db", str(db2))[0] == 0
    assert "SEKRIT1" not in again.read_text()
    for f in tmp_path.glob("second.db*"):
        assert b"SEKRIT1" not in f.read_bytes(), f
    rec = json.loads(again.read_text().splitlines()[0])
    assert "?" not in rec["episode"]["config"]["base_url"]  # an endpoint takes no query


@pytest.mark.parametrize("where", ["base_url", "wiki_url", "call"])
def test_an_import_refuses_a_url_that_cannot_be_parsed(toy, tmp_path, capsys, monkeypatch, where):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    bad = "http://[::1/v1?k=SEKRIT1"
    path = _exported_pointing_at(
        capsys,
        toy,
        tmp_path,
        bad if where == "base_url" else toy.llm.base_url,
        call_url=bad if where == "call" else None,
    )
    if where == "wiki_url":
        lines = [json.loads(line) for line in open(path)]
        for rec in lines:
            rec["episode"]["env_options"]["wiki_url"] = bad
        open(path, "w").write("".join(json.dumps(r) + "\n" for r in lines))
    db2 = tmp_path / "second.db"
    code, _, err = cli(capsys, "import", path, "--db", str(db2))
    raw = b"".join(f.read_bytes() for f in tmp_path.glob("second.db*"))
    assert b"SEKRIT1" not in raw and "SEKRIT1" not in err
    if where == "call":  # a call record keeps no endpoint it cannot read; the rest imports
        assert code == 0, err
    else:
        assert code == 2 and err.count("\n") == 1, err


@pytest.mark.parametrize("command", ["resume", "step"])
def test_a_refused_imported_endpoint_writes_nothing(toy, other_llm, tmp_path, capsys, monkeypatch, command):
    """Issue 39 item 15: `resume` (or `step`) with a model flag of an unconfirmed imported
    episode is refused before anything is written (before: each refusal left a new child
    version, made current: two refusals made v2 and v4)."""
    from sessions.store import Store

    db2, ep = _imported_elsewhere(toy, other_llm, tmp_path, capsys, monkeypatch)

    def state():
        s = Store(db2)
        try:
            return (
                [tuple(r) for r in s.db.execute("select * from versions order by id")],
                [tuple(r) for r in s.db.execute("select * from episodes")],
                s.db.execute("select count(*) from steps").fetchone()[0],
            )
        finally:
            s.close()

    before = state()
    for flags in (("--temperature", "0.5"), ("--model", "other-model"), ("--api-style", "chat")):
        code, out, err = cli(capsys, command, str(ep), *flags, "--db", db2)
        assert code == 2 and err.count("\n") == 1 and f"react-editor confirm {ep}" in err, (flags, err)
        assert "new version" not in err and out == ""
        assert state() == before, flags
    assert other_llm.requests == []
    # the user's own endpoint as a flag is their choice: the child with the new settings is made and runs
    toy.llm.reset()
    toy.llm.push(*ROOM_SCRIPT[2:])
    code, out, err = cli(capsys, command, str(ep), "--temperature", "0.5", "--base-url", toy.llm.base_url, "--db", db2)
    assert code == 0 and "new version" in err, err
    assert len(state()[0]) == len(before[0]) + 1 and other_llm.requests == []


def test_a_refused_accept_of_an_imported_episode_writes_nothing(toy, other_llm, tmp_path, capsys, monkeypatch):
    """Issue 39 item 15, the same refusal in `suggest --accept`: the candidate's version was
    written (and made current) before the endpoint was refused; and `suggest` asked its critic
    at the imported endpoint, unconfirmed, with the user's key (the version's own endpoint is
    the critic's default)."""
    from sessions.store import Store
    from tests.suggest_agents import GOOD, critic_json, fail_episode

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    failed = fail_episode(toy)
    failed.critic = critic_json(GOOD)
    out = tmp_path / "ep.jsonl"
    assert cli(capsys, "export", "1", "--format", "jsonl", "--out", str(out), "--db", str(toy.db))[0] == 0
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    for r in recs:
        r["episode"]["config"]["base_url"] = other_llm.base_url
    out.write_text("".join(json.dumps(r) + "\n" for r in recs))
    db2 = str(tmp_path / "second.db")
    assert cli(capsys, "import", str(out), "--db", db2)[0] == 0
    monkeypatch.setenv("OPENAI_BASE_URL", toy.llm.base_url)  # the user's own server, for the critic and what-ifs
    code, _, err = cli(capsys, "suggest", "1", "--verify", "1", "--db", db2)
    assert code == 0, err
    assert other_llm.requests == []  # before: the critic was asked at the file's endpoint, with the user's key
    monkeypatch.delenv("OPENAI_BASE_URL")

    def state():
        s = Store(db2)
        try:
            return (
                [tuple(r) for r in s.db.execute("select * from versions order by id")],
                [tuple(r) for r in s.db.execute("select * from episodes")],
            )
        finally:
            s.close()

    before = state()
    code, out_, err = cli(capsys, "suggest", "1", "--accept", "1", "--db", db2)
    assert code == 2 and err.count("\n") == 1 and "react-editor confirm 1" in err, err
    assert state() == before and other_llm.requests == []
