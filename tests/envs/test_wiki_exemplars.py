"""Built-in few-shot prompts: built by executing the exemplar plans on the built-in wiki,
in the original prompt files' layout; the committed file equals a fresh build."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from envs.base import EnvError
from envs.wikipedia import exemplars
from envs.wikipedia.builtin import CORPUS_DIR
from tests.mediawiki_server import SAMPLE_PLANS, write_corpus

REF_PROMPTS = Path(__file__).resolve().parents[3] / "shared" / "reference" / "react-repo" / "prompts"


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REACT_EDITOR_CACHE", str(tmp_path / "cache"))


def _layout(s: str) -> list[str]:
    """The skeleton of a prompt: which line kinds follow which, blank lines included."""
    out = []
    for line in s.split("\n"):
        m = re.match(r"(Question|Claim|Thought \d+|Action \d+|Observation \d+|Determine)", line)
        out.append(m.group(1).split(" ")[0] if m else ("" if not line else "?"))
    return out


def test_fixture_plans_build_with_real_observations(tmp_path):
    corpus = write_corpus(tmp_path / "c")
    built = exemplars.build_builtin_prompts(corpus)
    assert {k: set(v) for k, v in built.items()} == {
        "hotpotqa": {"webthink_simple3", "webact_simple3"},
        "fever": {"webthink_simple2", "webact_simple2"},
    }
    p = {**built["hotpotqa"], **built["fever"]}
    think = p["webthink_simple3"]
    assert think.startswith("\nQuestion: What is the elevation range")
    assert "Action 3: Search[High Plains]\nObservation 3: Could not find [High Plains]. Similar: [" in think
    assert "Observation 2: (Result 1 / 3) The eastern sector extends into the High Plains" in think
    assert "Action 5: Finish[1,800 to 7,000 ft]\nQuestion: Which is taller" in think
    assert "Finish[1,800 to 7,000 ft]\nObservation" not in think
    act = p["webact_simple3"]
    assert act.startswith("Question: ") and act.endswith("Finish[a teacher of the cartoonist]\n\n")
    assert "Thought" not in act
    fever = p["webthink_simple2"]
    assert fever.startswith("\n" + exemplars.FEVER_INSTRUCTION + "Claim: The Zürich Opera House opened in 1891.")
    assert "Action 2: Finish[SUPPORTS]\n\nClaim: Milhouse Example likes pizza." in fever
    assert fever.endswith("Finish[NOT ENOUGH INFO]\n\n")


def test_plan_errors_are_caught(tmp_path):
    corpus = write_corpus(tmp_path / "c")
    bad = json.loads(json.dumps(SAMPLE_PLANS))
    bad["hotpotqa"][0]["steps"][0]["miss"] = True  # Colorado orogeny is a page, not a miss
    (corpus / "exemplar_plans.json").write_text(json.dumps(bad))
    with pytest.raises(EnvError, match="expected a miss"):
        exemplars.build_builtin_prompts(corpus)
    bad = json.loads(json.dumps(SAMPLE_PLANS))
    bad["hotpotqa"][1]["steps"][-1]["action"] = "Finish[AT&T Tower]"
    (corpus / "exemplar_plans.json").write_text(json.dumps(bad))
    with pytest.raises(EnvError, match="gold"):
        exemplars.build_builtin_prompts(corpus)


@pytest.mark.skipif(not (CORPUS_DIR / "exemplar_plans.json").is_file(), reason="built-in corpus not written yet")
def test_committed_prompts_equal_a_fresh_build():
    built = exemplars.build_builtin_prompts()
    for kind, path in exemplars.PROMPTS_FILES.items():
        assert path.read_text(encoding="utf-8") == exemplars.dump(built[kind]), (
            f"{path.name} is stale: run `react-editor wiki prompts --write`"
        )
    assert set(built["hotpotqa"]) == {"webthink_simple6", "webact_simple6", "cotqa_simple6", "webqa_simple6"}
    assert set(built["fever"]) == {"webthink_simple3", "webact_simple3", "cotqa_simple3", "webqa_simple3"}
    assert exemplars.builtin_prompt("hotpotqa", "react").startswith("\nQuestion: ")
    assert exemplars.builtin_prompt("fever", "act").startswith("\n" + exemplars.FEVER_INSTRUCTION + "Claim: ")


@pytest.mark.skipif(not REF_PROMPTS.is_dir(), reason="ReAct reference prompts not available")
def test_layout_matches_the_original_prompt_files(tmp_path):
    built = exemplars.build_builtin_prompts(write_corpus(tmp_path / "c"))
    ours = {**built["hotpotqa"], **built["fever"]}
    ref_hp = json.loads((REF_PROMPTS / "prompts_naive.json").read_text())
    ref_fv = json.loads((REF_PROMPTS / "fever.json").read_text())
    pairs = [
        (ours["webthink_simple3"], ref_hp["webthink_simple6"]),
        (ours["webact_simple3"], ref_hp["webact_simple6"]),
        (ours["webthink_simple2"], ref_fv["webthink_simple3"]),
        (ours["webact_simple2"], ref_fv["webact_simple3"]),
    ]
    for mine, ref in pairs:
        a, b = _layout(mine), _layout(ref)
        # same opening and closing, same separators between examples
        assert a[:2] == b[:2] and a[-3:] == b[-3:]
        sep_a = {tuple(a[i - 1 : i + 1]) for i, x in enumerate(a) if x in ("Question", "Claim") and i}
        sep_b = {tuple(b[i - 1 : i + 1]) for i, x in enumerate(b) if x in ("Question", "Claim") and i}
        assert sep_a == sep_b
    assert exemplars.reference_prompt("fever", "react", REF_PROMPTS) == ref_fv["webthink_simple3"]
