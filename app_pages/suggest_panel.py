"""Issue 29 in the app: "Suggest fixes" on a failed version. A critic proposes edits, each is
verified by a what-if in a background job (progress, Stop), and the candidates show as cards
at their steps with the rationale and, once verified, the what-if bars and the verdict;
Accept makes the edit as a new version and resumes it, Dismiss sets a card aside.

The Editor calls `render` under the outcome box (the job's progress, Stop and the summary)
and `at_step` under each step (that step's cards); everything here goes through
`agent.suggest` (the CLI's `react-editor suggest` is the same library calls)."""

from __future__ import annotations

import uuid
from typing import Any, Callable, Iterable

import streamlit as st

from agent import critic_dialogue, jobs, suggest, suggest_experiment, suggest_verdict
from agent.engine import Engine, EngineError
from app_pages import alerts
from app_pages.api_styles import api_style_box
from app_pages.whatif_panel import chart_spec
from envs.base import EnvError
from sessions import numbering, suggestions
from sessions.store import Store, StoreError
from trajectory.numbers import p_text

TICK_S = 0.5
ERRORS = (EngineError, EnvError, StoreError)


def failed(v: Any) -> bool:
    return bool(v.outcome.done and v.outcome.success is not True)


def arm_rows(c: dict[str, Any]) -> list[dict[str, Any]]:
    """The verified candidate's two arms as the what-if panel's bar rows (percent)."""
    rows = []
    for name in ("control", "treatment"):
        arm = c.get(name)
        if arm and arm.get("n"):
            lo, hi = arm["ci95"]
            rows.append(
                {
                    "arm": f"{name} ({arm['success']}/{arm['n']})",
                    "rate": round(100 * arm["success_rate"], 1),
                    "lo": round(100 * lo, 1),
                    "hi": round(100 * hi, 1),
                    "n": arm["n"],
                    "success": arm["success"],
                }
            )
    return rows


def steps_marked(report: dict[str, Any] | None) -> dict[int, int]:
    """{step: candidates proposed there}: what the overview strip marks."""
    out: dict[int, int] = {}
    for c in (report or {}).get("candidates", []):
        if c["step"] is not None and c["state"] != "dismissed":
            out[c["step"]] = out.get(c["step"], 0) + 1
    return out


def marks_css(steps: Iterable[int]) -> str:
    """A dashed purple outline on the overview strip's marks of the steps with candidates."""
    from app_pages.overview import anchor

    sel = ", ".join(f'.ov-mark[href="#{anchor(int(i))}"]' for i in sorted(steps))
    return f"<style>{sel} {{ outline: 3px dashed #8250df; outline-offset: 1px; }}</style>" if sel else ""


def _start(
    eng: Engine, vid: int, k: int, n: int, critic_model: str | None, critic_style: str | None = None
) -> jobs.Handle:
    """The critic call and the what-ifs as one job with its own Engine and connections."""
    path, api_key = eng.store.file, eng.api_key

    def work(h: jobs.Handle) -> dict[str, Any]:
        w = Engine(Store(path, create=False), api_key=api_key)
        how = suggest.Verify(
            n=n,
            stop=h.stop,
            should_stop=h.sync_stop,
            on_progress=lambda done, total: h.progress(done=done, total=total),
        )
        try:
            critic = suggest.Critic(model=critic_model or None, api_style=critic_style)
            return suggest.report(suggest.suggest_version(w, vid, critic, k, how))
        finally:
            w.store.close()

    ep = eng.store.versions.get(vid).episode_id
    tab = st.session_state.setdefault("tab_id", uuid.uuid4().hex)
    return jobs.start(
        eng.store, "suggest", work, episode_id=ep, version_id=vid, session=tab, target=f"suggest for {_label(eng, vid)}"
    )


def render(eng: Engine, vid: int, v: Any, switch_to: Callable[[int, Any], None]) -> None:
    """The panel (only on a failed version)."""
    if not failed(v):
        return
    job: jobs.Handle | None = st.session_state.get("suggest_job")
    mine = job is not None and st.session_state.get("suggest_vid") == vid
    running = job is not None and not job.finished.is_set()
    latest = suggestions.latest(eng.store, vid)
    if latest is not None:  # the steps with candidates, marked on the overview strip (CSS only)
        st.html(marks_css(steps_marked(suggest.report(latest))))
    with st.expander("Suggest fixes — a critic proposes edits, each proven by a what-if", expanded=mine):
        c = st.columns([1, 1, 2, 1])
        k = c[0].number_input(
            "Candidates", min_value=1, max_value=critic_dialogue.MAX_CANDIDATES, value=3, key=f"sg_k_{vid}"
        )
        n = c[1].number_input("Rollouts per arm", min_value=1, max_value=1000, value=10, key=f"sg_n_{vid}")
        model = c[2].text_input("Critic model (empty: the version's own)", key=f"sg_model_{vid}")
        style = api_style_box(c[3], None, f"sg_api_{vid}", label="Critic API style", inherit="(the version's own)")
        if st.button("Suggest fixes", key=f"sg_run_{vid}", type="primary", disabled=running):
            st.session_state["suggest_job"] = job = _start(eng, vid, int(k), int(n), model.strip(), style)
            st.session_state["suggest_vid"] = vid
            mine = running = True
        if mine and running:
            st.fragment(run_every=TICK_S)(_progress)(eng, job)
            return
        if mine and job is not None and job.error is not None:
            if not isinstance(job.error, ERRORS):
                raise job.error
            alerts.alert(str(job.error).splitlines()[0])
        s = suggestions.latest(eng.store, vid)
        if s is not None:
            _cards(eng, vid, suggest.report(s), switch_to)


def _progress(eng: Engine, job: jobs.Handle) -> None:
    if job.finished.is_set():
        st.rerun()
    total = job.total or 0
    st.progress(
        job.done_n / total if total else 0.0,
        text=f"Asking the critic, then verifying: {job.done_n}/{total} rollouts. Press Stop to halt.",
    )
    if st.button("Stop", key="sg_stop"):
        jobs.stop(eng.store, job.id)


def _cards(eng: Engine, vid: int, report: dict[str, Any], switch_to: Callable[[int, Any], None]) -> None:
    """The summary; each card sits under its step (`at_step`), only one with no step is here."""
    first = report["first_failure_step"]
    marked = steps_marked(report)
    st.caption(f"First failure signal at step {first}." if first else "No step raised a failure signal.")
    if marked:
        st.caption(
            "Candidates at steps "
            + ", ".join(f"{s} ({n})" for s, n in sorted(marked.items()))
            + " — each card is under its step above (marked on the overview strip)."
        )
    for line in suggest_verdict.method_lines(report):
        st.caption(line)
    if not report["candidates"]:
        st.info("The critic proposed no edit.")
    for c in report["candidates"]:
        if c["step"] is None:
            _card(eng, vid, report["suggestion"], c, switch_to)


def by_step(eng: Engine, vid: int, v: Any) -> dict[int, tuple[int, list[dict[str, Any]]]]:
    """{step: (suggestion id, its candidates best first)} of the version's latest
    suggestions, read once per draw; empty unless the version failed."""
    s = suggestions.latest(eng.store, vid) if failed(v) else None
    if s is None:
        return {}
    report = suggest.report(s)
    out: dict[int, tuple[int, list[dict[str, Any]]]] = {}
    for c in report["candidates"]:
        if c["step"] is not None:
            out.setdefault(c["step"], (report["suggestion"], []))[1].append(c)
    return out


def at_step(
    eng: Engine,
    vid: int,
    cards: dict[int, tuple[int, list[dict[str, Any]]]],
    step: int,
    switch_to: Callable[[int, Any], None],
) -> None:
    """The candidate cards of one step, drawn under it in the Editor's step list."""
    if step not in cards:
        return
    sid, cs = cards[step]
    with st.container(key=f"sg_at_step_{step}"):
        for c in cs:
            _card(eng, vid, sid, c, switch_to)


def _label(eng: Engine, version_id: int) -> str:
    """A version as people read it (v3; the stored id is global)."""
    try:
        return numbering.label_of(eng.store, version_id)
    except StoreError:
        return f"version {version_id}"


def _card(eng: Engine, vid: int, sid: int, c: dict[str, Any], switch_to: Callable[[int, Any], None]) -> None:
    """One candidate: where, what, why (plain text: it comes from a model), the evidence."""
    with st.container(border=True, key=f"sg_card_{sid}_{c['number']}"):
        st.text(
            f"#{c['rank']} · step {c['step']} · {(c['kind'] or '').replace('_', ' ')} · candidate {c['number']}"
            + (" · dismissed" if c["state"] == "dismissed" else "")
            + (f" · accepted as {_label(eng, c['accepted_version'])}" if c["accepted_version"] else "")
        )
        st.text(c["text"] or "")
        if c["rationale"]:
            st.text(f"Why: {c['rationale']}")
        st.text(c["verdict"] + (" · leaks the answer" if c["leaks_answer"] else ""))
        rows = arm_rows(c)
        if rows:
            st.vega_lite_chart(chart_spec(rows), width="stretch")
        if c["state"] in ("verified", "pending", "flagged"):
            b = st.columns(2)
            if b[0].button(
                "Accept", key=f"sg_accept_{sid}_{c['number']}", type="primary" if c["proven"] else "secondary"
            ):
                try:
                    new = suggest.accept(eng, vid, c["number"])
                except ERRORS as exc:
                    alerts.alert(str(exc).splitlines()[0])
                else:
                    switch_to(new.id, None)
            if b[1].button("Dismiss", key=f"sg_dismiss_{sid}_{c['number']}"):
                suggest.dismiss(eng, sid, c["number"])
                st.rerun()


# ---------------------------------------------------------------------- the Experiments page


def experiment_rows(eng: Engine, exp_id: int) -> list[dict[str, Any]]:
    """`suggest --experiment`'s table for the page (what the CLI prints with --json)."""
    return suggest_experiment.failure_rows(eng, suggestions.for_experiment(eng.store, exp_id))


def table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        b = r["best"] or {}
        c = r["cost"]
        out.append(
            {
                "episode": r["episode"],
                "version": r["version"],
                "first signal": f"{r['first_signal']} @{r['first_failure_step']}" if r["first_signal"] else "",
                "best candidate": f"step {b.get('step')} {b.get('kind')}: {b.get('text')}" if b else "",
                "effect": None if r["effect"] is None else round(100 * r["effect"]),
                "raw p (one-sided)": p_text(b["p_better"])[4:] if b.get("p_better") is not None else "",
                "adjusted p": (
                    f"{p_text(b['p_adjusted'])[4:]} ({b['adjustment']})" if b.get("p_adjusted") is not None else ""
                ),
                "verdict": r["verdict"],
                "cost": f"{c['calls']} calls, {c['tokens']} tokens, ${c['usd']:.4f}",
            }
        )
    return out


def _start_experiment(
    eng: Engine,
    exp_id: int,
    k: int,
    n: int,
    limit: int | None,
    critic_model: str | None,
    critic_style: str | None = None,
) -> jobs.Handle:
    """`suggest --experiment ID --where failed [--limit M]` as one background job: each
    failure claimed once, a finished one never redone (a rerun continues), Stop halts it."""
    path, api_key = eng.store.file, eng.api_key
    critic = suggest.Critic(model=critic_model or None, api_style=critic_style)

    def work(h: jobs.Handle) -> dict[str, Any]:
        w = Engine(Store(path, create=False), api_key=api_key)
        try:
            _, rows = suggest_experiment.experiment_rows(w, exp_id, critic, k, n, limit)
            h.progress(done=0, total=len(rows))
            how = suggest.Verify(
                n=n,
                stop=h.stop,
                should_stop=h.sync_stop,
                on_progress=lambda done, total: h.progress(detail=f"{done}/{total} rollouts"),
            )
            done = suggest_experiment.suggest_experiment(
                w, rows, critic, how, h.id, lambda s: h.progress(done=h.done_n + 1, total=len(rows))
            )
            return suggest_experiment.experiment_report(w, exp_id, suggest_experiment.failure_rows(w, done))
        finally:
            w.store.close()

    tab = st.session_state.setdefault("tab_id", uuid.uuid4().hex)
    return jobs.start(
        eng.store,
        "suggest",
        work,
        experiment_id=exp_id,
        session=tab,
        target=f"suggest for the failures of experiment {exp_id}",
    )


def _experiment_progress(eng: Engine, job: jobs.Handle) -> None:
    if job.finished.is_set():
        st.rerun()
    total = job.total or 0
    st.progress(
        job.done_n / total if total else 0.0,
        text=f"Suggesting and verifying fixes: {job.done_n}/{total} failures"
        + (f" ({job.detail})" if job.detail else "")
        + ". Press Stop to halt; starting again continues.",
    )
    if st.button("Stop", key="sg_x_stop"):
        jobs.stop(eng.store, job.id)


def experiment_start(eng: Engine, exp_id: int) -> bool:
    """The form that starts `suggest --experiment` (or its progress and Stop while it runs);
    True while the job runs."""
    job: jobs.Handle | None = st.session_state.get("sg_x_run")
    if job is not None and st.session_state.get("sg_x_exp") != exp_id:
        job = None
    if job is not None and not job.finished.is_set():
        st.fragment(run_every=TICK_S)(_experiment_progress)(eng, job)
        return True
    if job is not None and job.error is not None:
        if not isinstance(job.error, ERRORS):
            raise job.error
        alerts.alert(str(job.error).splitlines()[0])
    c = st.columns([1, 1, 1, 2, 1])
    k = c[0].number_input("Candidates", min_value=1, max_value=critic_dialogue.MAX_CANDIDATES, value=3, key="sg_x_k")
    n = c[1].number_input("Rollouts per arm", min_value=1, max_value=1000, value=10, key="sg_x_n")
    m = c[2].number_input("Failures (0: all)", min_value=0, value=0, key="sg_x_limit")
    model = c[3].text_input("Critic model (empty: each version's own)", key="sg_x_model")
    style = api_style_box(c[4], None, "sg_x_api", label="Critic API style", inherit="(each version's own)")
    if st.button("Suggest fixes for the failures", key="sg_x_run_btn", type="primary"):
        try:
            st.session_state["sg_x_run"] = _start_experiment(
                eng, exp_id, int(k), int(n), int(m) or None, model.strip(), style
            )
        except ERRORS as exc:
            alerts.alert(str(exc).splitlines()[0])
            return False
        st.session_state["sg_x_exp"] = exp_id
        st.rerun()
    return False


def experiment_panel(eng: Engine, exp_id: int) -> None:
    """Suggested fixes of an experiment's failures (`react-editor suggest --experiment`):
    start the job, its table, and "Accept all proven" (optionally adding the new versions
    to an exemplar set)."""
    st.subheader("Suggested fixes")
    if experiment_start(eng, exp_id):
        return
    rows = experiment_rows(eng, exp_id)
    if not rows:
        st.caption(
            "None yet: the button above (or `react-editor suggest --experiment NAME --where failed`) "
            "proposes and proves fixes."
        )
        return
    st.dataframe(table(rows), hide_index=True, key="sg_x_table")
    proven = [
        r
        for r in rows
        if r["proven"]
        and not r["best"]["leaks_answer"]
        and not r["best"].get("harmful")
        and r["best"]["state"] != "accepted"
    ]
    cols = st.columns([2, 2, 1], vertical_alignment="bottom")
    target = cols[0].text_input("Add them to exemplar set (optional)", key="sg_x_set")
    start = _new_set_base(eng, exp_id, cols[1], target.strip())
    if cols[2].button(f"Accept all proven ({len(proven)})", key="sg_x_accept", disabled=not proven):
        name = target.strip() or None
        try:
            if name is not None:
                from sessions import exemplar_sets

                if start is None:
                    exemplar_sets.get_set(eng.store, name)  # (an unknown name is a new set: `start` says its base)
                else:  # checked before anything is made
                    from agent import exemplars

                    exemplars.create_set(eng.store, name, experiments_env(eng, exp_id), start[1])
            made = suggest_experiment.accept_all_proven(eng, proven)
        except ERRORS as exc:
            alerts.alert(str(exc).splitlines()[0])
            return
        st.session_state["sg_x_job"] = _resume_all(eng, made, name)
        alerts.alert(
            f"Accepted {len(made)} of {len(proven)} proven fix(es) as new versions, each confirmed on fresh "
            "rollouts; they are resuming" + (f" and join exemplar set {name} when they finish." if name else "."),
            "success",
        )
        for r in proven:
            if r.get("confirmation"):
                st.text(
                    f"{numbering.label_of(eng.store, r['version'])} #{r['best']['number']}: confirmation "
                    f"{r['confirmation']['verdict']}; effect from {r['confirmation']['rollouts']}"
                )
        if name is not None and made:
            _leak_caption(eng, exp_id, name, made)


def experiments_env(eng: Engine, exp_id: int) -> str:
    from sessions import experiments

    return experiments.get(eng.store, exp_id).env


def _new_set_base(eng: Engine, exp_id: int, where: Any, name: str) -> tuple[str, str | None] | None:
    """For a set name that does not exist yet: what the new set starts from (label, base),
    by default the set the experiment ran with, else the built-in exemplars; None otherwise."""
    from app_pages.annotate_widgets import base_options, default_base
    from sessions import exemplar_sets, experiments

    x = experiments.get(eng.store, exp_id)
    if not name or exemplar_sets.exists(eng.store, name):
        where.caption("A new set name starts a set built on a base (the experiment's set by default).")
        return None
    bases = base_options(x.env, [s.name for s in exemplar_sets.list_sets(eng.store, x.env)])
    pick = where.selectbox(
        "Start from (the new set)",
        list(bases),
        index=list(bases.values()).index(default_base(bases, x.config.exemplar_set)),
        key="sg_x_base",
    )
    return pick, bases[pick]


def _leak_caption(eng: Engine, exp_id: int, name: str, made: list[int]) -> None:
    """The experiment's tasks leaked for the set once the accepted fixes join it (the rule of
    the experiments, `agent.leakage`)."""
    from sessions import experiments

    leaked = suggest_experiment.leaked_for_set(eng, exp_id, name, made)
    if leaked:
        alerts.plain_caption(
            "Leakage: "
            + suggest_experiment.leak_line(name, experiments.get(eng.store, exp_id).name or str(exp_id), leaked)
            + "."
        )


def _resume_all(eng: Engine, version_ids: list[int], exemplar_set: str | None) -> jobs.Handle | None:
    """Resume the accepted versions in one background job (each in its turn), then add each
    finished one to the exemplar set (an exemplar needs its steps)."""
    path, api_key = eng.store.file, eng.api_key

    def work(h: jobs.Handle) -> None:
        from sessions import exemplar_sets

        w = Engine(Store(path, create=False), api_key=api_key)
        try:
            for i, vid in enumerate(version_ids):
                if h.should_stop():
                    break
                w.run(vid, should_stop=h.should_stop, watch=h.watch())
                if exemplar_set:
                    exemplar_sets.add_version(w.store, exemplar_set, vid, by="suggest")
                h.progress(done=i + 1, total=len(version_ids))
        finally:
            w.store.close()

    if not version_ids:
        return None
    return jobs.start(
        eng.store, "edit-and-resume", work, total=len(version_ids), target=f"resume {len(version_ids)} accepted fix(es)"
    )
