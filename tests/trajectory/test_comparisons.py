"""Issue 27: every reported comparison is one procedure (its interval excludes 0 exactly when
its p < 0.05), empty comparisons have no p, errors are counted apart from unfinished tasks,
pooled what-ifs refuse one episode and do not print summed-arm intervals."""

from __future__ import annotations

import json
from contextlib import closing

import pytest

from react_editor.main import main
from sessions import experiments
from sessions.store import Store
from tests.toy_envs import ROOM_TASK
from trajectory.records import AgentConfig


def _pairs(both: int, a_only: int, b_only: int, neither: int) -> tuple[list[bool], list[bool]]:
    xa = [True] * both + [True] * a_only + [False] * b_only + [False] * neither
    xb = [True] * both + [False] * a_only + [True] * b_only + [False] * neither
    return xa, xb


def _excludes_zero(ci) -> bool:
    return ci[0] > 0 or ci[1] < 0


# ---------------------------------------------------------------- item 2: one procedure


def test_paired_interval_and_p_value_are_one_procedure_on_the_issues_examples():
    """5 vs 0 discordant of 26: the old interval excluded 0 beside exact p 0.0625. Now the
    interval goes with `p_value` (and 4 vs 0 stays not significant)."""
    from agent.experiment_scores import _pair_counts

    for a_only, p in ((5, 0.0625), (4, 0.125)):
        for both in (0, 10, 21 - a_only):
            r = _pair_counts(*_pairs(both, a_only, 0, 26 - a_only - both))
            assert r["p_value"] == pytest.approx(p) and r["mcnemar_p"] == pytest.approx(p)
            assert not _excludes_zero(r["diff_ci"]) and r["diff_ci"][0] < 0 < r["diff"] < r["diff_ci"][1]
    r = _pair_counts(*_pairs(3, 6, 0, 17))  # 6 vs 0: exact p = 0.03125 < 0.05
    assert r["p_value"] == pytest.approx(0.03125) and r["diff_ci"][0] > 0


def test_paired_interval_excludes_zero_exactly_when_p_is_below_005():
    from agent.experiment_scores import _pair_counts

    for n in (1, 7, 26):
        for b in range(n + 1):
            for c in range(n + 1 - b):
                r = _pair_counts(*_pairs(0, b, c, n - b - c))
                assert _excludes_zero(r["diff_ci"]) == (r["p_value"] < 0.05), (n, b, c)
                assert r["diff_ci"][0] <= r["diff"] <= r["diff_ci"][1]


def _arm(success: int, n: int):
    from agent.rollout_stats import GroupStats

    return GroupStats(None, list(range(n)), success)


def test_whatif_interval_and_p_value_are_one_procedure():
    """3/5 vs 0/5: Newcombe's [+3, +88] points stood beside Fisher p = 0.167."""
    from agent.rollout_stats import Effect

    e = Effect(_arm(0, 5), _arm(3, 5)).as_json()
    assert e["p_value"] > 0.05 and e["effect_ci95"][0] < 0 < e["effect"] and "Boschloo" in e["method"]
    for n in (3, 5, 10):
        for k1 in range(n + 1):
            for k2 in range(n + 1):
                e = Effect(_arm(k2, n), _arm(k1, n))
                assert _excludes_zero(e.ci95) == (e.p_value < 0.05), (n, k1, k2)


# ---------------------------------------------------------------- item 3: pooled what-if


def test_pooled_interval_does_not_collapse_and_one_episode_is_refused():
    from agent.rollout_stats import Effect, RolloutError, pooled

    with pytest.raises(RolloutError, match="at least 2 episodes"):
        pooled([Effect(_arm(0, 1), _arm(1, 1))])
    with pytest.raises(RolloutError, match="at least 2 episodes"):
        pooled([Effect(_arm(0, 1), _arm(1, 1)), Effect(_arm(0, 0), _arm(1, 1))])  # an empty arm adds nothing
    two = pooled([Effect(_arm(0, 1), _arm(1, 1))] * 2)  # both episodes: 1/1 vs 0/1
    lo, hi = two.ci95
    assert two.effect == 1.0 and lo < 1.0 and hi == 1.0
    assert _excludes_zero(two.ci95) == (two.p_value < 0.05)
    same = pooled([Effect(_arm(5, 5), _arm(5, 5))] * 2)  # every rate 1: not the point [0, 0]
    assert same.effect == 0.0 and same.ci95[0] < 0 < same.ci95[1] and same.p_value == 1.0


# ---------------------------------------------------------------- item 4: empty -> no p


def test_empty_comparisons_have_no_p_value():
    from agent.experiment_scores import _pair_counts
    from agent.rollout_stats import Effect

    r = _pair_counts([], [])
    assert r["p_value"] is None and r["mcnemar_p"] is None and r["diff_ci"] == [None, None]
    e = Effect(_arm(0, 0), _arm(2, 3))
    assert e.p_value is None and e.as_json()["p_value"] is None and e.ci95 is None


# ---------------------------------------------------------------- items 5 and 6: errors, labels


def _two_runs(db, a_outcomes: list[str], b_outcomes: list[str]) -> None:
    """Experiments A and B over the same tasks; an outcome is 'win', 'fail', 'error' or 'pending'."""
    tasks = [ROOM_TASK.model_copy(update={"id": f"toy/room-{i}"}) for i in range(len(a_outcomes))]
    with closing(Store(db)) as store:
        for name, outcomes in (("A", a_outcomes), ("B", b_outcomes)):
            exp = experiments.create(
                store, name=name, env="alfworld", method="react", config=AgentConfig(model="m"), tasks=tasks
            )
            for item, out in zip(experiments.items(store, exp.id), outcomes):
                if out == "error":
                    experiments.record_item(store, item.id, status="error", error="timed out")
                elif out != "pending":
                    experiments.record_item(store, item.id, status="done", success=out == "win")


def _compare(capsys, db, *extra: str):
    assert main(["experiment", "compare", "A", "B", "--db", str(db), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_errors_count_as_failures_by_default_and_apart_from_unfinished(tmp_path, capsys):
    """B's failures end as errors (timeouts) on 6 tasks A wins: leaving errors out (the old
    rule) hides B's losses; by default an error is a failure, said in the output."""
    db = tmp_path / "x.db"
    _two_runs(db, ["win"] * 6 + ["win", "fail", "pending"], ["error"] * 6 + ["win", "fail", "win"])
    c = _compare(capsys, db)
    assert c["errors"] == {"a": 0, "b": 6, "counted_as": "failure"}
    assert (c["common"], c["a_only"], c["b_only"]) == (8, 6, 0) and c["p_value"] < 0.05
    why = c["excluded_why"]
    assert why["unfinished_in_a"] == 1 and why["error_in_b"] == 0 and "errors differ" in why["warning"]
    old = _compare(capsys, db, "--errors", "exclude")
    assert old["errors"]["counted_as"] == "exclude" and old["common"] == 2
    assert old["excluded_why"]["error_in_b"] == 6 and old["excluded_why"]["unfinished_in_a"] == 1
    assert main(["experiment", "compare", "A", "B", "--db", str(db)]) == 0
    text = capsys.readouterr().out
    assert "errors: A 0, B 6 - counted as failures in the paired test" in text
    assert "warning: errors differ between the sides (A 0, B 6)" in text


def test_compare_text_puts_rates_over_the_paired_tasks_in_points(tmp_path, capsys):
    db = tmp_path / "x.db"
    _two_runs(db, ["win", "win", "fail", "pending"], ["win", "fail", "fail", "win"])
    assert main(["experiment", "compare", "A", "B", "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "paired over 3 tasks: A 66.7%, B 33.3% of these tasks" in lines[2]
    assert lines[3].startswith("difference A - B: +33.3 points, 95% CI [") and "exact McNemar test" in lines[3]
    assert lines[4] == "exact McNemar p = 1.0"


def test_app_labels_name_the_exact_mcnemar_p_and_the_method():
    from agent.experiment_scores import _pair_counts
    from agent.rollout_stats import Effect
    from app_pages.experiment_views import compare_rows
    from app_pages.whatif_panel import effect_text

    c = {**_pair_counts(*_pairs(1, 5, 0, 20)), "by_type": {}}
    (row,) = compare_rows(c, "alfworld")
    assert row["exact McNemar p"] == "0.062" and row["p"] == "0.062" and "McNemar p" not in row
    assert row["A % (paired tasks)"] == "23.1" and row["A - B (points)"] == "19.2"
    text = effect_text(Effect(_arm(0, 5), _arm(3, 5)))
    assert "Boschloo" in text and "Newcombe" not in text and "Fisher" not in text


def test_pooled_text_prints_no_summed_arm_interval():
    """Simpson's paradox: summed arms 5-45% vs 55-95% beside an effect of +0 read as one sample."""
    from agent.rollout_stats import Effect, pooled
    from react_editor.whatif import _pooled_text

    text = _pooled_text(pooled([Effect(_arm(2, 2), _arm(10, 10)), Effect(_arm(0, 10), _arm(0, 2))] * 5))
    assert "control 10/60, treatment 50/60" in text and text.count("95% CI") == 1
    assert "effect:    +0 points" in text and "Cochran-Mantel-Haenszel" in text
