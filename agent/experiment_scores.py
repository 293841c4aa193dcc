"""An experiment's score like the paper's Tables 1 and 3 (`summary`), the paired comparison of
two experiments task by task (`compare`), and the items to open in the Editor (`failures`)."""

from __future__ import annotations

from typing import Any

from agent.experiment import PRICES, PRICES_SETTING, ExperimentError, family_or_none, leaked_keys, task_types
from sessions import experiments
from sessions.store import Store
from trajectory.multiplicity import holm
from trajectory.stats import METHOD_PAIRED, mcnemar_exact, paired_test, tango_diff


def _rate(k: int, n: int) -> float | None:
    return round(k / n, 4) if n else None


def _metrics(env: str, done: list, wins: int, n: int) -> dict[str, float | None]:
    """The kind's extra scores (HotpotQA's EM and F1, FEVER's accuracy, ...) over n tasks."""
    out: dict[str, float | None] = {}
    for m in fam.metrics if (fam := family_or_none(env)) else ():
        if m.of is None:
            out[m.name] = _rate(wins, n)
        else:
            out[m.name] = round(sum(float(it.metrics.get(m.of) or 0.0) for it in done) / n, 4) if n else None
    return out


def _usage(store: Store, episode_ids: list[int], model: str) -> tuple[int, float]:
    """(tokens, USD) of the calls that reached the model server (cache hits are free)."""
    p_tok, c_tok = store.calls.billed_tokens(episode_ids)
    saved = (store.settings.get(PRICES_SETTING, {}) or {}).get(model)
    if saved:
        p_price, c_price = float(saved.get("prompt", 0.0)), float(saved.get("completion", 0.0))
    else:
        p_price, c_price = PRICES.get(model, (0.0, 0.0))
    return p_tok + c_tok, round((p_tok * p_price + c_tok * c_price) / 1e6, 6)


def summary(store: Store, ref: int | str, *, with_items: bool = False) -> dict[str, Any]:
    """The paper-style score of an experiment (`experiment run/show --json`). Rates, EM/F1
    and accuracy are over finished items: an unfinished one is not a failure, and a run
    with unfinished items is `partial`."""
    exp = experiments.get(store, ref)
    items = experiments.items(store, exp.id)
    n = len(items)
    done = [it for it in items if it.finished]
    wins = sum(bool(it.success) for it in done)
    by_type: dict[str, dict[str, Any]] = {}
    for t in (*task_types(exp.env), *sorted({it.task.type or "other" for it in items})):
        of_type = [it for it in items if (it.task.type or "other") == t]
        fin = [it for it in of_type if it.finished]
        k = sum(bool(it.success) for it in fin)
        by_type.setdefault(t, {"n": len(of_type), "done": len(fin), "success": k, "rate": _rate(k, len(fin))})
    tokens, cost = _usage(store, [it.episode_id for it in items if it.episode_id], exp.config.model)
    out: dict[str, Any] = {
        "experiment": exp.id,
        "name": exp.name,
        "env": exp.env,
        "method": exp.method,
        "model": exp.config.model,
        "status": exp.status,
        "episodes": n,
        "done": len(done),
        "partial": len(done) < n,
        "success": wins,
        "success_rate": _rate(wins, len(done)),
        "rates_over": "finished items",
        "by_type": by_type,
        "task_set": task_set_label(exp),
    }
    out.update(_metrics(exp.env, done, wins, len(done)))  # over the finished tasks, as success_rate
    out.update(tokens=tokens, cost=cost, wall_s=round(exp.wall_s, 3))
    if with_items:
        out["items"] = [
            {
                "task": it.task.id,
                "type": it.task.type,
                "episode": it.episode_id,
                "version": it.version_id,
                "done": it.finished,
                "success": it.success if it.finished else None,
                "status": it.status,
                "error": it.error,
            }
            for it in items
        ]
    return out


def task_set_label(exp: experiments.Experiment) -> str:
    """The task set an experiment ran on, in words a results table can print."""
    tasks, source = exp.params.get("tasks", "builtin"), exp.params.get("source")
    if exp.params.get("sample") == "paper":
        return "the notebooks' subset"
    if tasks == "official":
        return f"official {exp.params.get('split') or 'valid_unseen'}"
    if tasks == "react" or source == "react":
        return "the ReAct release's tasks"
    if tasks == "builtin" and not source:
        fam = family_or_none(exp.env)
        return fam.builtin_label if fam else "built-in sample"
    return f"selected tasks ({source or 'builtin'})"


DIFF_CI_METHOD = METHOD_PAIRED
ERROR_RULES = ("failure", "exclude")


def _pair_counts(xa: list[bool], xb: list[bool]) -> dict[str, Any]:
    """The paired 2x2 table, the rates of A and B over these same tasks, and one procedure:
    the exact McNemar test with the interval that inverts it (`stats.paired_test`), so the
    interval excludes 0 exactly when p_value < 0.05. `mcnemar_p` is the exact McNemar p.
    Unrounded (issue 40): a bound of 0.0004 stays 0.0004. Tango's score interval beside it."""
    n = len(xa)
    both = sum(p and q for p, q in zip(xa, xb))
    a_only = sum(p and not q for p, q in zip(xa, xb))
    b_only = sum(q and not p for p, q in zip(xa, xb))
    neither = n - both - a_only - b_only
    r = paired_test(a_only, b_only, n)
    ci = [None, None] if r.ci95 is None else list(r.ci95)
    return {
        "n": n,
        "both": both,
        "a_only": a_only,
        "b_only": b_only,
        "neither": neither,
        "a_rate": _rate(sum(xa), n),
        "b_rate": _rate(sum(xb), n),
        "rates_over": "the paired tasks",
        "diff": (a_only - b_only) / n if n else None,
        "mcnemar_p": mcnemar_exact(a_only, b_only) if n else None,
        "p_value": r.p_value,
        "p_method": r.method,
        "diff_ci": ci,
        "tango_ci": list(tango_diff(a_only, b_only, n)) if n else [None, None],
        "tango_method": "Tango's score interval (Stat Med 1998;17:891), for comparison: not the reported test",
    }


def _side(it: experiments.Item) -> str:
    """'done', 'error' (stopped on an error: timeout, refusal) or 'unfinished' (pending, running)."""
    return "done" if it.finished else ("error" if it.status == "error" else "unfinished")


def _exclusions(a_items: dict, b_items: dict, listed: list[str], errors: str) -> tuple[list[str], dict[str, Any]]:
    """The paired tasks and why the others are left out: unfinished apart from errors (an
    error is a failure unless `errors` is 'exclude'), with a warning when the sides' error
    counts differ (errors are not missing at random)."""
    keep = ("done", "error") if errors == "failure" else ("done",)
    why: dict[str, Any] = {f"{r}_in_{s}": 0 for r in ("unfinished", "error") for s in ("a", "b", "both")}
    common = []
    for k in listed:
        sa, sb = _side(a_items[k]), _side(b_items[k])
        if sa in keep and sb in keep:
            common.append(k)
            continue
        reason = "unfinished" if "unfinished" in (sa, sb) else "error"
        where = "both" if sa == sb == reason else ("a" if sa == reason else "b")
        why[f"{reason}_in_{where}"] += 1
    ea = sum(_side(a_items[k]) == "error" for k in listed)
    eb = sum(_side(b_items[k]) == "error" for k in listed)
    why["warning"] = (
        f"errors differ between the sides (A {ea}, B {eb}): the comparison may be biased" if ea != eb else None
    )
    return common, why


def compare(
    store: Store, a_ref: int | str, b_ref: int | str, *, errors: str = "failure", include_leaked: bool = False
) -> dict[str, Any]:
    """Both summaries and the paired comparison over the tasks both sides ended. A task
    unfinished on either side is `excluded`, with the reason counted; a task that ended on
    an error counts as a failure (`errors="exclude"`: left out, the old rule). A task whose
    own trajectory was an exemplar on either side is `leaked` and left out of the paired test
    unless `include_leaked`."""
    if errors not in ERROR_RULES:
        raise ExperimentError(f"--errors takes failure or exclude (got {errors!r})")
    a, b = experiments.get(store, a_ref), experiments.get(store, b_ref)
    if a.env != b.env:
        raise ExperimentError(
            f"experiments {a.name!r} ({a.env}) and {b.name!r} ({b.env}) are on different environments"
        )
    a_items = {it.task.key: it for it in experiments.items(store, a.id)}
    b_items = {it.task.key: it for it in experiments.items(store, b.id)}
    leaked_set = set(leaked_keys(store, a)) | set(leaked_keys(store, b))
    leaked = [k for k in a_items if k in b_items and k in leaked_set]
    listed = [k for k in a_items if k in b_items and (include_leaked or k not in leaked_set)]
    common, why = _exclusions(a_items, b_items, listed, errors)

    def paired(keys: list[str]) -> dict[str, Any]:
        return _pair_counts([bool(a_items[k].success) for k in keys], [bool(b_items[k].success) for k in keys])

    types = dict.fromkeys([*task_types(a.env), *sorted({a_items[k].task.type or "other" for k in listed})])
    by_type = {t: paired([k for k in common if (a_items[k].task.type or "other") == t]) for t in types}
    for t, p_holm in zip(by_type, holm([v["p_value"] for v in by_type.values()])):  # issue 40: per-type p, Holm
        by_type[t]["p_holm"] = p_holm
    sa, sb = summary(store, a.id), summary(store, b.id)
    err = {
        "a": sum(_side(a_items[k]) == "error" for k in listed),
        "b": sum(_side(b_items[k]) == "error" for k in listed),
        "counted_as": errors,
    }
    return {
        "a": sa,
        "b": sb,
        "common": len(common),
        "listed_in_both": len(listed),
        "excluded": len(listed) - len(common),
        "excluded_why": why,
        "errors": err,
        "partial": bool(sa["partial"] or sb["partial"]),
        **paired(common),
        "leaked": [a_items[k].task.id for k in leaked],
        "leaked_included": include_leaked,
        "diff_ci_method": DIFF_CI_METHOD,
        "by_type": by_type,
        "by_type_adjustment": f"Holm over the {sum(v['p_value'] is not None for v in by_type.values())} task types",
    }


def failures(store: Store, ref: int | str) -> list[experiments.Item]:
    """Items that finished without success or stopped on an error (to open in the Editor)."""
    exp = experiments.get(store, ref)
    return [
        it
        for it in experiments.items(store, exp.id)
        if it.status == "error" or (it.status == "done" and not it.success)
    ]
