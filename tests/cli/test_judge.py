"""`react-editor judge` (issue 43 item 4): a pairwise judgment by version refs, with the
annotator as `annotate` records it; `--list`; `--agreement` (raw, Cohen's kappa, Krippendorff's
alpha, said honestly when undefined); bad input is one line, exit 2, and nothing is written."""

from __future__ import annotations

import json

import pytest

from tests.cli_helpers import cli, cli_json
from tests.toy_envs import ROOM_TASK, WIKI_TASK
from trajectory.records import AgentConfig, Version


@pytest.fixture
def db(toy):
    """Episode 1 with versions 1:1 and 1:2 (siblings), episode 2 with 2:1."""
    cfg = AgentConfig(model="scripted-model", base_url=toy.llm.base_url, max_steps=4)
    ep, _ = toy.engine.start_episode(ROOM_TASK, cfg)
    toy.store.versions.create(Version(episode_id=ep.id), make_current=False)
    toy.engine.start_episode(WIKI_TASK, cfg)
    return str(toy.db)


def test_judge_records_who_prefers_which_and_lists_them(db, capsys, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_USER", "alice")  # the default annotator, as `annotate` takes it
    j = cli_json(capsys, "judge", "1:1", "1:2", "--better", "B", "--reason", "v2 opens the cabinet", "--db", db)
    assert (j["ref_a"], j["ref_b"], j["better"], j["annotator"], j["reason"]) == (
        "1:1",
        "1:2",
        "B",
        "alice",
        "v2 opens the cabinet",
    )
    code, out, err = cli(capsys, "judge", "1:v2", "1:1", "--better", "A", "--annotator", "bob", "--db", db)
    assert code == 0 and err == ""
    assert out.splitlines() == [out.splitlines()[0], "  also: alice: 1:2 is better"]
    assert out.startswith("1:2 vs 1:1: 1:2 is better (by bob, ")
    listed = cli_json(capsys, "judge", "--list", "--db", db)
    assert [(x["annotator"], x["ref_a"], x["ref_b"], x["better"]) for x in listed] == [
        ("alice", "1:1", "1:2", "B"),
        ("bob", "1:1", "1:2", "B"),
    ]  # stored with the lower id as A
    code, out, _ = cli(capsys, "judge", "--list", "--db", db)
    assert "1:1 vs 1:2: 1:2 is better (by alice" in out and "  reason: v2 opens the cabinet" in out
    assert cli_json(capsys, "judge", "--list", "--episode", "2", "--db", db) == []


def test_agreement_is_reported_and_an_undefined_kappa_is_said_not_printed_as_nan(db, capsys):
    for who in ("alice", "bob"):
        assert cli(capsys, "judge", "1:1", "1:2", "--better", "A", "--by", who, "--db", db)[0] == 0
    a = cli_json(capsys, "judge", "--agreement", "--db", db)
    assert (a["pairs_multi"], a["agreement"], a["kappa"], a["alpha"]) == (1, 1.0, None, None)
    assert "undefined" in a["kappa_note"]
    code, out, _ = cli(capsys, "judge", "--agreement", "--db", db)
    assert code == 0 and "raw agreement: 100.0%" in out and "Cohen's kappa: undefined" in out
    assert "nan" not in out.lower()
    # bob changes his mind: his judgment is replaced, and now they disagree
    assert cli(capsys, "judge", "1:2", "1:1", "--better", "tie", "--by", "bob", "--db", db)[0] == 0
    a = cli_json(capsys, "judge", "--agreement", "--db", db)
    assert a["judgments"] == 2 and a["agreement"] == 0.0 and a["alpha"] is not None


@pytest.mark.parametrize(
    "argv, message",
    [
        (["1:1", "1:9", "--better", "A"], "episode 1 has no version v9"),
        (["1:1", "2:1", "--better", "A"], "different episodes"),
        (["1:1", "1:1", "--better", "tie"], "the same version"),
        (["1", "1:1", "--better", "tie"], "the same version"),  # EP alone is its current version, 1:1
        (["9:1", "1:1", "--better", "A"], "9"),
        (["1:1", "1:2"], "say which is better"),
        (["1:1", "--better", "A"], "give two versions"),
        (["x:1", "1:2", "--better", "A"], "bad version reference"),
        (["1:1", "1:2", "--better", "A", "--annotator", "  "], "annotator"),
        (["--list", "1:1"], "--list and --agreement take no versions"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(db, capsys, argv, message):
    code, out, err = cli(capsys, "judge", *argv, "--db", db)
    assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1, err
    assert json.loads(cli(capsys, "judge", "--list", "--json", "--db", db)[1]) == []


def test_a_bad_better_is_refused_by_the_parser(db, capsys):
    code, _, err = cli(capsys, "judge", "1:1", "1:2", "--better", "left", "--db", db)
    assert code == 2 and "invalid choice" in err
