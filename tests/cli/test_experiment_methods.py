"""The paper's methods through `react-editor experiment` (issue 14): Standard, CoT and CoT-SC
prompts and answers, ReAct <-> CoT-SC back-off rules, FEVER's 7 steps, the exemplar set's
prompts, and the prompt each method pins (`show --prompt`)."""

from __future__ import annotations

import json
from contextlib import closing

import pytest

from react_editor.main import main
from sessions import experiments
from sessions.store import Store
from tests.cli_helpers import run_args
from tests.experiment_agents import wiki_agent
from tests.experiment_cli import FEVER, HOTPOT, _cache, cli, half_right  # noqa: F401  (_cache: the autouse fixture)


def test_cot_is_stored_as_one_thought_and_the_answer(tmp_path, capsys, scripted_llm):
    scripted_llm.set_responder(wiki_agent(half_right(HOTPOT)))
    db = tmp_path / "x.db"
    code, out, _ = cli(
        capsys, *run_args(scripted_llm, db, "--env", "hotpotqa", "--tasks", "hp-001,hp-002", "--method", "cot")
    )
    assert code == 0 and out["success"] == 1
    prompt = scripted_llm.completion_requests[0].prompt
    assert prompt.startswith("Question: ") and prompt.endswith(f"Question: {HOTPOT[0]['question']}\nThought:")
    assert "\nAnswer: " in prompt and "Action 1" not in prompt  # the built-in cotqa_* examples
    with closing(Store(db)) as store:
        item = experiments.items(store, out["experiment"])[0]
        (step,) = store.versions.steps(item.version_id)
        assert step.thought.startswith("Let's think step by step.") and step.action == f"Finish[{HOTPOT[0]['answer']}]"
        assert step.source == "model" and len(step.call_ids) == 1 and step.done


def test_standard_prompt_and_fever_accuracy(tmp_path, capsys, scripted_llm):
    scripted_llm.set_responder(wiki_agent(half_right(FEVER, "claim", "label")))
    db = tmp_path / "x.db"
    code, out, _ = cli(capsys, *run_args(scripted_llm, db, "--env", "fever", "--limit", "4", "--method", "standard"))
    assert code == 0 and out["accuracy"] == 0.5 and "em" not in out
    assert {"SUPPORTS", "REFUTES", "NOT ENOUGH INFO"} <= set(out["by_type"])
    prompt = scripted_llm.completion_requests[0].prompt
    assert prompt.startswith("Determine if there is Observation") and prompt.endswith(
        f"\n\nClaim: {FEVER[0]['claim']}\nAnswer:"
    )


def test_cot_sc_takes_the_majority_of_n_samples_at_temperature_07(tmp_path, capsys, scripted_llm):
    gold = HOTPOT[0]["answer"]
    scripted_llm.set_responder(wiki_agent({HOTPOT[0]["question"]: ["wrong", gold, gold, "other", gold]}))
    db = tmp_path / "x.db"
    code, out, _ = cli(
        capsys,
        *run_args(scripted_llm, db, "--env", "hotpotqa", "--tasks", "hp-001", "--method", "cot-sc", "--samples", "5"),
    )
    assert code == 0 and out["success"] == 1
    reqs = scripted_llm.completion_requests
    assert len(reqs) == 5 and all(r.body["temperature"] == 0.7 for r in reqs)
    with closing(Store(db)) as store:
        item = experiments.items(store, out["experiment"])[0]
        (step,) = store.versions.steps(item.version_id)
        assert step.action == f"Finish[{gold}]" and step.info["votes"] == 3 and step.info["samples"] == 5
        assert len(step.call_ids) == 5


def _backoff_run(tmp_path, capsys, scripted_llm):
    """ReAct keeps searching (never finishes within 3 steps); CoT-SC answers right."""
    q = HOTPOT[0]["question"]
    scripted_llm.set_responder(wiki_agent({q: HOTPOT[0]["answer"]}, react_steps=99))
    db = tmp_path / "x.db"
    code, out, _ = cli(
        capsys,
        *run_args(
            scripted_llm,
            db,
            "--env",
            "hotpotqa",
            "--tasks",
            "hp-001",
            "--method",
            "react-cot-sc",
            "--samples",
            "3",
            "--max-steps",
            "3",
        ),
    )
    assert code == 0 and out["success"] == 1
    return db, out


def test_react_backs_off_to_cot_sc_when_it_gives_no_answer(tmp_path, capsys, scripted_llm):
    db, out = _backoff_run(tmp_path, capsys, scripted_llm)
    with closing(Store(db)) as store:
        item = experiments.items(store, out["experiment"])[0]
        versions = store.versions.of_episode(item.episode_id)
        assert [v.name for v in versions] == ["react", "cot-sc"]
        assert versions[0].outcome.metrics.get("limit") and not versions[0].outcome.success
        assert store.episodes.get(item.episode_id).current_version == versions[1].id == item.version_id
        assert item.metrics["answered_by"] == "cot-sc"


def test_react_that_answers_does_not_back_off(tmp_path, capsys, scripted_llm):
    scripted_llm.set_responder(wiki_agent({HOTPOT[0]["question"]: "a wrong answer"}))
    db = tmp_path / "x.db"
    code, out, _ = cli(
        capsys,
        *run_args(
            scripted_llm, db, "--env", "hotpotqa", "--tasks", "hp-001", "--method", "react-cot-sc", "--samples", "3"
        ),
    )
    assert code == 0 and out["success"] == 0 and len(scripted_llm.completion_requests) == 1
    with closing(Store(db)) as store:
        assert [
            v.name for v in store.versions.of_episode(experiments.items(store, out["experiment"])[0].episode_id)
        ] == ["react"]


@pytest.mark.parametrize(
    "votes,backs_off", [(["Ost", "Ost", "Sel", "Tarn"], True), (["Ost", "Ost", "Ost", "Sel"], False)]
)
def test_cot_sc_backs_off_to_react_below_n_over_2_votes(tmp_path, capsys, scripted_llm, votes, backs_off):
    # 5 samples: 2 votes for the majority is fewer than n/2 = 2.5; 3 votes is not
    q = HOTPOT[0]["question"]
    scripted_llm.set_responder(wiki_agent({q: votes + ["Brenn"]}))
    db = tmp_path / "x.db"
    code, out, _ = cli(
        capsys,
        *run_args(
            scripted_llm, db, "--env", "hotpotqa", "--tasks", "hp-001", "--method", "cot-sc-react", "--samples", "5"
        ),
    )
    assert code == 0 and out["done"] == 1
    with closing(Store(db)) as store:
        item = experiments.items(store, out["experiment"])[0]
        names = [v.name for v in store.versions.of_episode(item.episode_id)]
        assert names == (["cot-sc", "react"] if backs_off else ["cot-sc"])
        assert item.metrics["answered_by"] == names[-1]


def test_cot_with_the_papers_exemplar_set_sends_its_cotqa_prompt(tmp_path, capsys, scripted_llm):
    from tests.reference import require_reference

    prompts = require_reference() / "prompts" / "prompts_naive.json"
    db = tmp_path / "x.db"
    assert main(["import", str(prompts), "--db", str(db)]) == 0
    capsys.readouterr()
    scripted_llm.set_responder(wiki_agent(half_right(HOTPOT)))
    code, out, _ = cli(
        capsys,
        *run_args(
            scripted_llm,
            db,
            "--env",
            "hotpotqa",
            "--tasks",
            "hp-001",
            "--method",
            "cot",
            "--exemplars",
            "prompts_naive",
        ),
    )
    assert code == 0 and out["success"] == 1
    paper = json.loads(prompts.read_text())["cotqa_simple6"]
    assert scripted_llm.completion_requests[0].prompt == paper + f"Question: {HOTPOT[0]['question']}\nThought:"


def test_an_exemplar_set_without_the_methods_prompts_is_refused_up_front(tmp_path, capsys, scripted_llm):
    db = tmp_path / "x.db"
    assert main(["exemplars", "create", "bare", "--env", "hotpotqa", "--db", str(db)]) == 0
    capsys.readouterr()
    code, _, err = cli(
        capsys, *run_args(scripted_llm, db, "--env", "hotpotqa", "--method", "cot", "--exemplars", "bare")
    )
    assert code == 2 and "cotqa" in err and len(err.strip().splitlines()) == 1
    with closing(Store(db)) as store:
        assert experiments.list_all(store) == [] and scripted_llm.completion_requests == []


def test_fever_react_runs_the_notebooks_7_steps_and_backs_off_at_5(tmp_path, capsys, scripted_llm):
    """The FEVER notebook loops `for i in range(1, 8)`: ReAct gets 7 steps by default (an
    answer at step 6 or 7 counts); the ReAct -> CoT-SC back-off keeps the paper's 5."""
    claim = FEVER[0]["claim"]
    scripted_llm.set_responder(wiki_agent({claim: "SUPPORTS"}, react_steps=6))
    db = tmp_path / "x.db"
    code, out, err = cli(capsys, *run_args(scripted_llm, db, "--env", "fever", "--tasks", FEVER[0]["id"]))
    assert code == 0, err
    with closing(Store(db)) as store:
        it = experiments.items(store, out["experiment"])[0]
        steps = store.versions.steps(it.version_id)
        assert len(steps) == 6 and steps[-1].action == "Finish[SUPPORTS]"
    scripted_llm.set_responder(wiki_agent({claim: "SUPPORTS"}, react_steps=99))
    code, out, err = cli(
        capsys,
        *run_args(
            scripted_llm, db, "--env", "fever", "--tasks", FEVER[0]["id"], "--method", "react-cot-sc", "--samples", "3"
        ),
    )
    assert code == 0, err
    with closing(Store(db)) as store:
        it = experiments.items(store, out["experiment"])[0]
        react, cot = store.versions.of_episode(it.episode_id)
        assert len(store.versions.steps(react.id)) == 5 and react.outcome.metrics.get("limit")
        assert it.metrics["answered_by"] == "cot-sc"


@pytest.mark.parametrize("method", ["standard", "cot", "cot-sc"])
def test_every_method_pins_its_prompt_and_show_prompt_prints_what_was_sent(tmp_path, capsys, scripted_llm, method):
    """Standard, CoT and CoT-SC pin the exemplar revision and settings like ReAct: after the
    set and the episode's settings change, `show --prompt` prints byte for byte the text
    that was sent (it used to print a ReAct prompt built from the latest revision)."""
    from sessions import exemplar_sets

    db = tmp_path / "x.db"
    with closing(Store(db)) as store:
        exemplar_sets.create_set(store, "mine", "hotpotqa")
        exemplar_sets.add_raw(store, "mine", "webqa_simple6", "Question: Q0\nAnswer: A0\n\n")
        exemplar_sets.add_raw(store, "mine", "cotqa_simple6", "Question: Q0\nThought: T0\nAnswer: A0\n\n")
    scripted_llm.set_responder(wiki_agent(half_right(HOTPOT)))
    extra = ["--samples", "3"] if method == "cot-sc" else []
    code, out, err = cli(
        capsys,
        *run_args(
            scripted_llm,
            db,
            "--env",
            "hotpotqa",
            "--tasks",
            "hp-001",
            "--method",
            method,
            "--exemplars",
            "mine",
            *extra,
        ),
    )
    assert code == 0, err
    sent = scripted_llm.completion_requests[-1].prompt
    assert "Q0" in sent
    with closing(Store(db)) as store:
        it = experiments.items(store, out["experiment"])[0]
        exemplar_sets.remove(store, "mine", key="webqa_simple6")
        exemplar_sets.remove(store, "mine", key="cotqa_simple6")
        exemplar_sets.add_raw(store, "mine", "webqa_simple6", "Question: CHANGED\nAnswer: X\n\n")
        exemplar_sets.add_raw(store, "mine", "cotqa_simple6", "Question: CHANGED\nThought: X\nAnswer: X\n\n")
        cfg = store.episodes.get(it.episode_id).config
        store.episodes.set_config(it.episode_id, cfg.model_copy(update={"exemplar_set": None, "style": "act"}))
    code, shown, err = cli(capsys, "show", it.episode_id, "--version", it.version_id, "--prompt", "--db", db, "--json")
    assert code == 0, err
    assert shown["prompt"] == sent


def test_renaming_a_phase_version_does_not_rerun_it(tmp_path, capsys, scripted_llm):
    """Phases are found by the item's record, not by version names: after a crash a resume
    of an item whose versions were renamed runs nothing again."""
    db, out = _backoff_run(tmp_path, capsys, scripted_llm)
    with closing(Store(db)) as store:
        it = experiments.items(store, out["experiment"])[0]
        for n, v in enumerate(store.versions.of_episode(it.episode_id)):
            store.versions.update(v.id, name=f"renamed {n}")
        experiments.record_item(store, it.id, status="running", version_id=it.version_id, metrics=it.metrics)
        versions_before = len(store.versions.of_episode(it.episode_id))
    sent = len(scripted_llm.completion_requests)
    code, again, _ = cli(capsys, "experiment", "resume", out["experiment"], "--db", db, "--json")
    assert code == 0 and again["success"] == 1 and again["done"] == 1
    assert len(scripted_llm.completion_requests) == sent
    with closing(Store(db)) as store:
        assert len(store.versions.of_episode(it.episode_id)) == versions_before
        assert experiments.items(store, out["experiment"])[0].metrics["answered_by"] == "cot-sc"
