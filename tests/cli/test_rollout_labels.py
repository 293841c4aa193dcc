"""Issue 39 item 3: rollouts (resample, what-if, suggest verification) do not eat the numbers
people read. A person's and a run's versions stay v1, v2, ... consecutive; rollouts are r1,
r2, ... per episode; `EP:N` / `EP:vN` keep resolving and `EP:rN` names a rollout - in the CLI
and the app alike."""

from __future__ import annotations

import json

import pytest

from sessions import numbering
from tests.app_helpers import ok
from tests.cli_helpers import cli, cli_json
from tests.engine_scripts import ROOM_SCRIPT, cfg
from tests.rollout_agents import Agent
from tests.toy_envs import ROOM_TASK


@pytest.fixture
def sampled(toy, capsys):
    """Episode 1: v1 (won), 3 rollouts from step 2, then a person's edit of v1."""
    toy.llm.push(*ROOM_SCRIPT)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, max_steps=8))
    assert toy.engine.run(v.id).success
    toy.llm.set_responder(Agent())
    out = cli_json(capsys, "resample", "1", "--step", "2", "--n", "3", "--temperature", "0.7", "--db", str(toy.db))
    return ep, v, out["versions"]


def test_a_persons_version_after_rollouts_is_v2_and_rollouts_are_r1_to_rn(toy, sampled, capsys):
    ep, v, rolled = sampled
    db = str(toy.db)
    code, out, err = cli(capsys, "edit", "1", "--step", "1", "--thought", "Find the mug first.", "--db", db)
    assert code == 0 and out.strip() == "1:2", (out, err)  # not 1:5: the three rollouts took no v-number
    edited = json.loads(cli(capsys, "edit", "1:1", "--step", "1", "--thought", "Another.", "--db", db, "--json")[1])
    assert edited["number"] == 3
    assert numbering.labels(toy.store, 1) == {
        v.id: "v1",
        **{r: f"r{i}" for i, r in enumerate(sorted(rolled), 1)},
        edited["version"] - 1: "v2",
        edited["version"]: "v3",
    }
    code, text, _ = cli(capsys, "versions", "1", "--expand", "--db", db)
    assert [ln.split("\t")[0].strip(" *") for ln in text.splitlines() if not ln.strip().startswith("g")] == [
        "v1",
        "r1",
        "r2",
        "r3",
        "v2",
        "v3",
    ], text
    rows = cli_json(capsys, "versions", "1", "--db", db)
    assert [r["label"] for r in rows] == ["v1", "r1", "r2", "r3", "v2", "v3"]
    # refs: EP:N and EP:vN as before, EP:rN for a rollout; the app's and the CLI's errors name both kinds
    shown = {ref: cli(capsys, "show", ref, "--db", db, "--json") for ref in ("1:2", "1:v2", "1:r2")}
    assert all(code == 0 for code, _, _ in shown.values())
    assert json.loads(shown["1:2"][1]) == json.loads(shown["1:v2"][1]) != json.loads(shown["1:r2"][1])
    code, out, err = cli(capsys, "annotate", "1:r2", "--verdict", "failure", "--db", db)
    assert code == 0 and out.startswith("1:r2: verdict failure"), out
    code, out, err = cli(capsys, "show", "1:r9", "--db", db)
    assert code == 2 and "episode 1 has no version r9 (it has v1..v3 and rollouts r1..r3)" in err, err
    code, out, err = cli(capsys, "show", "1:x2", "--db", db)
    assert code == 2 and "EP:rN" in err, err
    code, out, err = cli(capsys, "export", "1:r1", "--format", "jsonl", "--out", "-", "--db", db)
    assert code == 0 and len(out.splitlines()) == 1 and json.loads(out)["version"]["outcome"], err
    code, out, err = cli(capsys, "search", "Find the mug first", "--db", db, "--json")
    assert [(h["ref"], h["number"]) for h in json.loads(out)][:1] == [("1:2", 2)]


def test_the_app_reads_the_same_labels(app, capsys):
    toy, make = app
    toy.llm.push(*ROOM_SCRIPT)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, max_steps=8))
    assert toy.engine.run(v.id).success
    toy.llm.set_responder(Agent())
    rolled = cli_json(capsys, "resample", "1", "--step", "2", "--n", "3", "--temperature", "0.7", "--db", str(toy.db))[
        "versions"
    ]
    fixed = toy.engine.editor.edit(v.id, 1, "rewrite_thought", "Find the mug first.", keep_rest=True)
    at = make("editor", episode=ep.id, version=fixed.id)
    assert any(e.label.startswith("Annotate v2:") for e in at.expander)  # was "Annotate v5"
    (sel,) = [s for s in at.selectbox if s.label == "Version"]
    assert sel.format_func(sel.value).startswith("v2 ")
    assert [o.split()[0] for o in sel.options] == ["v1", "v2"]  # rollouts are opened from Versions (issue 44)
    vers = make("versions", episode=ep.id)
    (table,) = [d.value for d in vers.dataframe if "rollout group" in d.value.columns]
    assert list(table["version"]) == ["v1", "3 rollouts", "v2"]  # a closed group is one row (issue 44)
    ok(vers)
    vers = make("versions", episode=ep.id)
    vers.toggle(key="ver_expand_groups").set_value(True)
    (table,) = [d.value for d in ok(vers.run()).dataframe if "rollout group" in d.value.columns]
    assert list(table["version"]) == ["v1", "r1", "r2", "r3", "v2"]
    at = make("editor", episode=ep.id, version=sorted(rolled)[1])
    assert any(e.label.startswith("Annotate r2:") for e in at.expander)
    (sel,) = [s for s in at.selectbox if s.label == "Version"]
    assert [o.split()[0] for o in sel.options] == ["v1", "r2", "v2"]  # the rollout shown stays in the list
