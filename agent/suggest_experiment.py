"""`suggest --experiment` (issue 29) with issue 40's rules: every failure of an experiment
as one job, its candidates adjusted together (Benjamini-Hochberg), and `--accept-all-proven`,
which confirms each failure's winner on fresh rollouts (`--confirm N`) before it accepts it,
so the effect reported for an accepted fix is not the screening's winner's-curse estimate."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from agent.client import CallWatch
from agent.critic_dialogue import SuggestError, as_edit
from agent.engine import Engine
from agent.rollouts import Request, group_stats, whatif
from agent.suggest import (
    Critic,
    Plan,
    Verify,
    accept,
    ask,
    plan,
    sampling_temperature,
    total_cost,
    verify,
)
from agent.suggest_verdict import assess, candidate_json, comparison_of, experiment_adjusted, ranked, verdict
from sessions import rollouts, suggestions
from sessions.rollouts import RolloutEdit
from trajectory.signals import version_step_signals


def _free(engine: Engine, s: suggestions.Suggestion, job_id: int) -> bool:
    """Whether job `job_id` may take the suggestion: nobody holds it, or its holder's job
    no longer runs (killed, even by kill -9: its lease ran out or its process is gone)."""
    from sessions import jobs

    if s.claimed_by in (None, job_id):
        return True
    try:
        holder = jobs.get(engine.store, s.claimed_by)
    except Exception:  # noqa: BLE001 - a holder row that is gone holds nothing
        return True
    return not holder.active or jobs.owner_gone(holder)


def experiment_rows(
    engine: Engine, ref: int | str, critic: Critic, k: int, n: int, limit: int | None
) -> tuple[int, list[tuple[Plan, suggestions.Suggestion]]]:
    """The experiment's failures (its first `limit`), each with its suggestion row (made
    once: a rerun finds the same rows)."""
    from agent.rollouts import experiment_versions
    from sessions import experiments

    exp = experiments.get(engine.store, ref)
    items = experiment_versions(engine.store, exp.id, failed_only=True)
    if limit is not None:
        items = items[: max(0, limit)]
    out = []
    for ep, vid in items:
        p = plan(engine, vid, critic, k, n)
        s = suggestions.find(engine.store, vid, p.key, exp.id) or suggestions.create(
            engine.store,
            episode_id=ep,
            version_id=vid,
            request_key=p.key,
            critic=critic.public(p.config),
            verify_n=n,
            experiment_id=exp.id,
            first_failure_step=p.first_failure,
        )
        out.append((p, s))
    return exp.id, out


def suggest_experiment(
    engine: Engine,
    rows: list[tuple[Plan, suggestions.Suggestion]],
    critic: Critic,
    how: Verify,
    job_id: int,
    on_failure: Callable[[suggestions.Suggestion], None] | None = None,
) -> list[suggestions.Suggestion]:
    """Each failure claimed by one job at a time; a finished one is never redone."""
    from sessions.jobs import LEASE_S

    done = []
    for p, s in rows:
        s = suggestions.get(engine.store, s.id)
        if how.stopped():
            break
        if s.state != "done":
            if not _free(engine, s, job_id) or not suggestions.claim(
                engine.store, s.id, job_id, LEASE_S, holder=s.claimed_by
            ):
                continue  # another live job works on it
            try:
                if s.state == "asking":
                    try:
                        s = ask(engine, p, row=s, watch=CallWatch(how.stop))
                    except SuggestError as exc:  # recorded: the table says why, a rerun does not pay again
                        s = suggestions.record_answer(
                            engine.store,
                            s.id,
                            prompt_label=p.template.label,
                            prompt_hash=p.template.hash,
                            prompt_text=p.sent,
                            response=str(exc),
                            call_id=None,
                            candidates=[],
                        )
                s = verify(engine, s, how)
            finally:
                suggestions.release(engine.store, s.id, job_id)
        done.append(s)
        if on_failure:
            on_failure(s)
    return done


def failure_rows(engine: Engine, ss: Sequence[suggestions.Suggestion]) -> list[dict[str, Any]]:
    """`suggest --experiment`'s rows: every tested candidate of these failures adjusted
    together (Benjamini-Hochberg), each failure's best one shown."""
    adjusted = experiment_adjusted(ss)
    return [failure_row(engine, s, adjusted) for s in ss]


def failure_row(
    engine: Engine, s: suggestions.Suggestion, adjusted: dict[int, tuple[float, str]] | None = None
) -> dict[str, Any]:
    """One failure of `suggest --experiment`: first signal, best candidate, effect, verdict,
    cost (alone: Holm within the failure; from `failure_rows`: the experiment's adjustment)."""
    v = engine.store.versions.get(s.version_id)
    steps = engine.steps(v)
    sigs = version_step_signals(steps, v.outcome)
    first = next((f[0] for f in sigs if f), None)
    a = assess(s, adjusted)
    best = ranked(s, a)[0] if s.candidates else None
    data = candidate_json(best, 1, a[best.number]) if best else None
    return {
        "episode": s.episode_id,
        "version": s.version_id,
        "first_failure_step": s.first_failure_step,
        "first_signal": first,
        "suggestion": s.id,
        "state": s.state,
        "best": data,
        "effect": data["effect"] if data else None,
        "proven": bool(data and data["proven"]),
        "verdict": data["verdict"] if data else (s.response or "no candidates")[:200],
        "where": where(s.first_failure_step, data["step"] if data else None),
        "cost": total_cost(engine, s),
    }


def where(first: int | None, step: int | None) -> str | None:
    """Whether a fix sits at, before or after the first step that raised a signal."""
    if first is None or step is None:
        return None
    return "at" if step == first else ("before" if step < first else "after")


def experiment_report(engine: Engine, experiment_id: int, rows: list[dict[str, Any]]) -> dict[str, Any]:
    proven = sum(r["proven"] for r in rows)
    total = {k: sum(r["cost"][k] for r in rows) for k in ("calls", "tokens", "usd")}
    per = {k: (round(v / proven, 6) if proven else None) for k, v in total.items()}
    return {"experiment": experiment_id, "failures": rows, "proven": proven, "cost": total, "cost_per_proven_fix": per}


# ---------------------------------------------------------------------- confirmation on fresh rollouts


def _fresh(engine: Engine, group_id: int, start: int, m: int):
    """The group's rollouts at positions start .. start + m - 1 (made after the screening)."""
    g = rollouts.group(engine.store, group_id)
    members = {p - start: v for p, v in g.members.items() if start <= p < start + m}
    return group_stats(engine, g.model_copy(update={"members": members, "n": m}))


def confirm(
    engine: Engine, s: suggestions.Suggestion, c: suggestions.Candidate, m: int, how: Verify | None = None
) -> dict[str, Any]:
    """Run candidate `c` again on m fresh rollouts per arm (positions N+1..N+m of its control
    and treatment groups, N the screening's) and judge it on those alone (one-sided, 0.025)."""
    if not 1 <= m or s.verify_n + m > 1000:
        raise SuggestError(f"--confirm must be between 1 and {1000 - s.verify_n} (got {m})")
    how = how or Verify(n=s.verify_n)
    temp = sampling_temperature(engine.store.versions.config(s.version_id), how.temperature)
    k, kind = as_edit(c.kind or "", c.step or 0)
    req = Request(s.version_id, k, s.verify_n + m, temp, None, RolloutEdit(kind=kind, text=c.text))
    effect, run = whatif(engine, req, concurrency=how.concurrency, stop=how.stop, on_progress=how.on_progress)
    if run.stopped or run.errors:
        run.check()
        raise SuggestError("stopped before the confirmation rollouts finished; run the same command again")
    n = s.verify_n
    ctl, trt = _fresh(engine, effect.control.group.id, n, m), _fresh(engine, effect.treatment.group.id, n, m)
    data = {"control": ctl.as_json(), "treatment": trt.as_json()}
    cmp = comparison_of(data)
    state, words = verdict(cmp.diff, cmp.ci95, cmp.p_better, cmp.p_worse) if cmp else ("not shown", "not shown")
    data.update(
        effect=cmp.diff if cmp else None,
        effect_ci95=list(cmp.ci95) if cmp and cmp.ci95 else None,
        p_value=cmp.p_value if cmp else None,
        p_better=cmp.p_better if cmp else None,
        method=cmp.method if cmp else None,
        proven=state == "proven",
        verdict=words,
        rollouts=(
            f"the {m} fresh rollouts per arm at positions {n + 1}-{n + m} of control group "
            f"{ctl.group.id} and treatment group {trt.group.id} (not the {n} screening rollouts)"
        ),
        groups={"control": ctl.group.id, "treatment": trt.group.id},
        positions=[n + 1, n + m],
    )
    suggestions.record_result(engine.store, c.id, {**(c.result or {}), "confirmation": data}, state=c.state)
    return data


def accept_all_proven(
    engine: Engine,
    rows: list[dict[str, Any]],
    *,
    exemplar_set: str | None = None,
    resume: Callable[[int], Any] | None = None,
    confirm_n: int | None = None,
    how: Verify | None = None,
) -> list[int]:
    """Confirm each failure's best proven fix (never a harmful one or one that states the
    answer) on `confirm_n` fresh rollouts per arm (default: as many as it was verified
    with), accept the confirmed ones, resume them, and optionally add the new versions to an
    exemplar set. Each row gets `confirmation`: the effect reported for an accepted fix is the
    confirmation's, measured on rollouts the screening never saw."""
    made = []
    for r in rows:
        best = r.get("best")
        if not best or not best["proven"] or best.get("harmful") or best["leaks_answer"] or best["state"] == "accepted":
            continue
        s = suggestions.latest(engine.store, r["version"])
        c = next(x for x in s.candidates if x.number == best["number"])
        r["confirmation"] = conf = confirm(engine, s, c, confirm_n or s.verify_n, how)
        if not conf["proven"]:
            continue
        new = accept(engine, r["version"], best["number"], bulk=True)
        r["accepted_version"] = new.id
        if resume is not None:
            resume(new.id)
        made.append(new.id)
    if exemplar_set and made:
        from sessions import exemplar_sets

        for vid in made:  # (the experiments' leakage rule applies to these entries like any other)
            exemplar_sets.add_version(engine.store, exemplar_set, vid, by="suggest")
    return made


def leaked_for_set(engine: Engine, experiment_id: int, exemplar_set: str, version_ids: Sequence[int] = ()) -> list[Any]:
    """The experiment's tasks that leak for `exemplar_set` once `version_ids` are in it: the
    experiments' one rule (`agent.leakage`: the set holds a trajectory of the task). A fix
    accepted into a set is such a trajectory, so a run with the set warns about these tasks
    (`--leave-out-leaked` leaves them out) and `experiment compare` leaves them out of its test."""
    from agent import leakage
    from sessions import experiments

    store = engine.store
    keys = leakage.set_task_keys(store, exemplar_set)
    keys |= {store.episodes.get(store.versions.get(v).episode_id).task.key for v in version_ids}
    seen: dict[str, Any] = {}
    for it in experiments.items(store, experiment_id):
        if it.task.key in keys:
            seen.setdefault(it.task.key, it.task)
    return list(seen.values())


def leak_line(exemplar_set: str, experiment: str, tasks: list[Any]) -> str:
    """What a person is told when accepted fixes join a set (one line, CLI and app alike)."""
    from agent.leakage import describe

    return (
        f"exemplar set {exemplar_set!r} now holds a trajectory of {len(tasks)} task(s) of experiment "
        f"{experiment}: {describe(tasks)} - leaked for that set: a run with it warns about them "
        "(--leave-out-leaked leaves them out) and `experiment compare` leaves them out of the paired test"
    )
