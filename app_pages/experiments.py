"""Experiments: create a batch (env, tasks, method, model, concurrency) and launch it in a
background thread (a long batch never blocks this or any other session), follow its
progress with Stop / Resume, read the paper-style results, compare experiments per type and
paired, and open failed episodes in the Editor. Same library calls as `react-editor experiment`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from agent import experiment, experiment_background, experiment_scores
from agent.methods import methods_of
from agent.run_settings import check_config
from app_pages import alerts, app_engine, selection, suggest_panel, version_names
from app_pages.api_styles import api_style_box
from app_pages.experiment_form import exemplar_choice, launch, leak_offer, new_experiment_form
from app_pages.experiment_views import (
    PARTIAL_NOTE,
    TABLE_NOTE,
    chart_note,
    chart_spec,
    compare_rows,
    is_partial,
    paper_row,
    results_columns,
    signal_rows,
    split_row,
    table_caption,
)
from envs.registry import kinds
from sessions import experiments
from sessions.search import signal_counts


@st.cache_resource(show_spinner=False)
def _background(path: str) -> experiment_background.Background:
    return experiment_background.Background(path)


@dataclass(frozen=True)
class Listing:
    """What the panels read, once per run of the page: the store, the background runner, the
    experiments listed (ids, their labels and environments) and the one selected."""

    store: Any
    bg: experiment_background.Background
    sel: int
    ids: list[int]
    labels: dict[int, str]
    env_of: dict[int, str]


bg = _background(app_engine.db_path())
store = app_engine.store()


st.title("Experiments")
app_engine.model_banner()

with st.expander("New experiment", expanded=not experiments.list_all(store)):
    new_experiment_form(store, bg)

exps = experiments.list_all(store)
if not exps:
    st.caption("No experiments yet: create one above.")
    st.stop()
ids = [e.id for e in exps]
labels = {e.id: f"{e.id} · {e.name} ({e.method} on {e.env})" for e in exps}
if st.session_state.get("x_select") in ids:
    st.session_state["x_pick"] = st.session_state.pop("x_select")
if st.session_state.get("x_pick") not in ids:
    st.session_state["x_pick"] = st.session_state.get("x_sel") if st.session_state.get("x_sel") in ids else ids[-1]
sel = st.selectbox("Experiment", ids, format_func=labels.get, key="x_pick")
st.session_state["x_sel"] = sel
env_of = {e.id: e.env for e in exps}
page = Listing(store=store, bg=bg, sel=sel, ids=ids, labels=labels, env_of=env_of)


@st.cache_data(show_spinner=False, max_entries=1000)
def _summary(db: str, exp_id: int, changed: tuple) -> dict:
    """An experiment's summary, recomputed only when the experiment changed (`changed`)."""
    return experiment_scores.summary(app_engine.store(), exp_id)


@st.cache_data(show_spinner=False, max_entries=200)
def _compare(db: str, a: int, b: int, changed: tuple, include_leaked: bool = False) -> dict:
    return experiment_scores.compare(app_engine.store(), a, b, include_leaked=include_leaked)


@st.cache_data(show_spinner=False, max_entries=200)
def _failures(db: str, exp_id: int, changed: tuple) -> tuple[list, Any]:
    """The failed items and their signal counts, recomputed only when the experiment changed."""
    failed = experiment_scores.failures(app_engine.store(), exp_id)
    return failed, signal_counts(app_engine.store(), [it.episode_id for it in failed if it.episode_id])


def summaries(x: Listing, keys: dict[int, tuple] | None = None) -> dict[int, dict]:
    """Every experiment's (cached) summary; keys: xs.changes(store) when already read."""
    store, ids = x.store, x.ids
    keys = experiments.changes(store) if keys is None else keys
    return {i: _summary(app_engine.db_path(), i, keys.get(i, ())) for i in ids}


def live(bg: experiment_background.Background, s: dict) -> dict:
    """The summary with what the page knows now: running (this process runs it) and partial."""
    running = bg.running(s["experiment"])
    partial = is_partial(s)
    return {
        **s,
        "running": running,
        "partial": partial,
        "status": status_label(s["status"], running, partial, s["done"]),
    }


def status_label(status: str, running: bool, partial: bool, done: int) -> str:
    """One status for the bar and the table: live runs say running; unfinished ones say partial."""
    if running:
        return "running"
    if not partial:
        return status
    if status == "created" and not done:
        return "not started"
    return f"{'stopped' if status in ('running', 'created') else status} (partial)"


def any_running(bg: experiment_background.Background, ids: list[int]) -> bool:
    return any(bg.running(i) for i in ids)


def live_panel(x: Listing) -> None:
    """Progress, results, chart and failures: redrawn together while a run moves, and once
    more when it ends, so the table, the bar and the chart never disagree."""
    store, sel, ids = x.store, x.sel, x.ids
    keys = experiments.changes(store)  # read once per tick: the summaries, comparison and failures share it
    sums = {i: live(x.bg, s) for i, s in summaries(x, keys).items()}
    progress_panel(x, sel, sums[sel])
    rerun = experiments.get(store, sel).params.get(experiment.RERUN_KEY) in ids
    if rerun:  # a re-run's question is its comparison with its source: first, under its progress
        compare_panel(x, sums, keys)
    results_tables(sums, x.env_of[sel])
    chart_panel(x, sums)
    if not rerun:
        compare_panel(x, sums, keys)
    failures_panel(x, keys)
    was = st.session_state.get("x_was_running")
    now = any_running(x.bg, ids)
    st.session_state["x_was_running"] = now
    if was and not now:
        st.rerun()  # the run ended: one full rerun stops the ticking and shows the final numbers


def progress_panel(x: Listing, exp_id: int, s: dict) -> None:
    store, bg = x.store, x.bg
    total, done = s["episodes"], s["done"]
    running = s["running"]
    p = bg.progress(exp_id)
    eta = f", ETA {int(p.eta_s)} s" if running and p and p.eta_s is not None else ""
    st.progress(
        done / total if total else 1.0, text=progress_text(s, experiments.counts(store, exp_id).get("error", 0)) + eta
    )
    slot = st.columns([1, 7])[0]  # Stop, or Resume once stopped: the same place, no gap before it
    if running and slot.button("Stop", key="x_stop"):
        bg.stop(exp_id)
        st.rerun()
    if not running and done < total and slot.button("Resume", key="x_resume", type="primary"):
        launch(bg, exp_id, int(st.session_state.get("x_conc", 4)))
        st.rerun()
    err = bg.error(exp_id)
    if err:
        st.error("The batch stopped:")
        st.text(err)


def progress_text(s: dict, errors: int) -> str:
    """done/total with successes, failures (finished, not solved) and errors (the run broke)
    each by its own word, then the status."""
    return (
        f"{s['done']}/{s['episodes']} done: {plural(s['success'], 'success', 'successes')}, "
        f"{plural(s['done'] - s['success'], 'failure')}, {plural(errors, 'error')} · {s['status']}"
    )


def plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def results_tables(sums: dict[int, dict], env: str) -> None:
    """The selected experiment's environment's table; other environments' tables folded below
    it (a HotpotQA experiment opened under ALFWorld's table and caption)."""
    st.subheader("Results")
    results_table(sums, env)
    others = [
        k
        for k in dict.fromkeys([*kinds(), *(s["env"] for s in sums.values())])  # plugins' too
        if k != env and any(s["env"] == k for s in sums.values())
    ]
    if others:
        with st.expander(f"Results on other environments ({', '.join(others)})"):
            for k in others:
                results_table(sums, k)


def results_table(sums: dict[int, dict], env_kind: str) -> None:
    rows = [paper_row(s) for s in sums.values() if s["env"] == env_kind]
    if rows:
        st.caption(
            table_caption(env_kind)
            + TABLE_NOTE
            + PARTIAL_NOTE * any(s["partial"] for s in sums.values() if s["env"] == env_kind)
        )
        rates, runs = map(list, zip(*(split_row(r) for r in rows)))
        st.dataframe(rates, hide_index=True, key=f"x_results_{env_kind}", column_config=results_columns(rates[0]))
        st.dataframe(runs, hide_index=True, key=f"x_runs_{env_kind}", column_config=results_columns(runs[0]))


def chart_panel(x: Listing, sums: dict[int, dict]) -> None:
    sel, ids, labels, env_of = x.sel, x.ids, x.labels, x.env_of
    st.subheader("By task type")
    same_env = [i for i in ids if env_of[i] == env_of[sel]]
    chosen = st.multiselect(
        "Experiments to chart", same_env, default=[sel], format_func=labels.get, key=f"x_chart_{sel}"
    )  # follows the selected experiment
    scored = [sums[i] for i in chosen if sums[i]["done"]]
    if not scored:
        st.caption("Nothing to chart yet: no task of these experiments has finished.")
        return
    st.vega_lite_chart(chart_spec(scored), width="stretch")
    if note := chart_note(scored):
        st.caption(note)
    if any(s["partial"] for s in scored):
        st.caption("Partial: rates are over the finished tasks only.")


def compare_panel(x: Listing, sums: dict[int, dict], keys: dict[int, tuple] | None = None) -> None:
    store, sel, ids, labels, env_of = x.store, x.sel, x.ids, x.labels, x.env_of
    st.subheader("Paired comparison")
    others = [i for i in ids if env_of[i] == env_of[sel] and i != sel]
    if not others:
        st.caption("Run another experiment on the same environment to compare task by task.")
        return
    source = experiments.get(store, sel).params.get(experiment.RERUN_KEY)
    if source in others and st.session_state.get("x_compare_for") != sel:
        st.session_state["x_compare"] = source  # a re-run opens on its comparison with its source
    st.session_state["x_compare_for"] = sel
    b = st.selectbox("Compare with", others, format_func=labels.get, key="x_compare")
    if b == source:
        alerts.plain_caption(f"{labels[sel]} re-ran {labels[b]} on the same tasks with a change.")  # names: plain
    unfinished = [x for x in (sel, b) if sums[x]["running"] or sums[x]["partial"]]
    if unfinished:
        alerts.plain_caption(
            "Partial: "
            + " and ".join(
                f"{labels[x]} ({sums[x]['done']}/{sums[x]['episodes']} done{', running' if sums[x]['running'] else ''})"
                for x in unfinished
            )
            + ". A comparison now pairs only the tasks finished on both sides."
        )
        if not st.toggle("Compare anyway", key="x_compare_partial"):
            return
    keys = experiments.changes(store) if keys is None else keys
    include = bool(st.session_state.get("x_include_leaked"))
    c = _compare(app_engine.db_path(), sel, b, (keys.get(sel), keys.get(b)), include)
    excluded = c.get("excluded")
    st.text(
        f"A = {labels[sel]}; B = {labels[b]}; {c['common']} tasks in common"
        + (f", {excluded} excluded (not finished on both sides)" if excluded else "")
    )
    leaked_note(c)
    st.dataframe(compare_rows(c, env_of[sel]), hide_index=True, key="x_compare_table")
    e = c.get("errors") or {}
    st.caption(
        f"Interval and p: {c.get('p_method')}. Errors: A {e.get('a', 0)}, B {e.get('b', 0)}, "
        "counted as failures in the paired test (CLI `--errors exclude` leaves them out)."
    )
    if (c.get("excluded_why") or {}).get("warning"):
        st.warning(c["excluded_why"]["warning"])


def leaked_note(c: dict) -> None:
    """The leaked tasks of a comparison, and whether the paired test counts them."""
    if not c.get("leaked"):
        return
    st.warning(
        f"Leaked: {len(c['leaked'])} task(s) whose own trajectory was an exemplar are "
        f"{'kept in' if c['leaked_included'] else 'left out of'} the paired test:"
    )
    st.text(", ".join(c["leaked"]))  # task ids come from data: plain text
    st.toggle("Include leaked tasks", key="x_include_leaked")


def rerun_panel(x: Listing, exp_id: int) -> None:
    """'Re-run with...': the experiment's tasks and settings with a change; the new run is
    selected and launched, and its comparison with this one opens when it finishes."""
    store = x.store
    src = experiments.get(store, exp_id)
    names = methods_of(src.env) if experiment.family_or_none(src.env) else [src.method]
    with st.expander(f"Re-run with a change: same {len(experiments.items(store, exp_id))} tasks"):
        c = st.columns(4)
        ex_set = exemplar_choice(store, c[0], src.env, f"x_rr_set_{exp_id}", src.config.exemplar_set)
        model = c[1].text_input("Model", value=src.config.model, key=f"x_rr_model_{exp_id}")
        temp = float(
            c[2].number_input(
                "Temperature",
                min_value=0.0,
                max_value=2.0,
                value=float(src.config.temperature),
                step=0.1,
                key=f"x_rr_temp_{exp_id}",
            )
        )
        method = c[3].selectbox(
            "Method", names, index=names.index(src.method) if src.method in names else 0, key=f"x_rr_method_{exp_id}"
        )
        api = api_style_box(st.columns(4)[0], src.config.api_style, f"x_rr_api_{exp_id}")
        new = {
            "exemplar_set": ex_set,
            "model": model.strip() or src.config.model,
            "temperature": temp,
            "api_style": api,
        }
        changes = {k: v for k, v in new.items() if v != getattr(src.config, k)}
        leave_out = leak_offer(
            store, ex_set, [it.task for it in experiments.items(store, exp_id)], f"x_rr_leave_{exp_id}"
        )
        what = [
            f"{k.replace('_', ' ')} {getattr(src.config, k) or 'built-in'} -> {v or 'built-in'}"
            for k, v in changes.items()
        ] + ([f"method {src.method} -> {method}"] if method != src.method else [])
        alerts.plain_caption("Changes: " + ("; ".join(what) if what else "none yet (pick one above)"))
        alerts.show_error("x_rerun")
        if st.button("Re-run", key="x_rerun", type="primary", disabled=not what):
            start_rerun(x, exp_id, changes, method, leave_out)


def start_rerun(x: Listing, exp_id: int, changes: dict, method: str, leave_out: bool) -> None:
    store, env_of = x.store, x.env_of
    alerts.clear_error("x_rerun")
    try:
        cfg = experiments.get(store, exp_id).config
        check_config(cfg.model_validate({**cfg.model_dump(), **changes}), env_of[exp_id], store)
        exp = experiment.rerun(store, exp_id, config=changes, method=method, leave_out_leaked=leave_out)
    except app_engine.USER_ERRORS as exc:
        alerts.set_error("x_rerun", exc)
        st.rerun()
    launch(x.bg, exp.id, int(st.session_state.get("x_conc", 4)))
    st.session_state["x_sel"] = st.session_state["x_select"] = exp.id  # the selector shows it on the next run
    st.rerun()


def failures_by_signal(counts, versions: dict[int, int | None]) -> None:
    """The failed episodes counted per task type and signal; a count opens its episodes."""
    table = counts.counts()
    if not table:
        st.caption("No failure carries an automatic signal.")
        return
    st.dataframe(signal_rows(table), hide_index=True, key="x_signal_table")
    cells = [(t, name) for t, by in table.items() for name in by]
    label = {c: f"{c[0] or '(no type)'} · {c[1]} ({table[c[0]][c[1]]})" for c in cells}
    # the key carries the counts: a keyed selector would keep drawing a stale "(2)" next to a table saying 3
    cell = st.selectbox(
        "Episodes with", cells, key=version_names.widget_key("x_signal_cell", label.values()), format_func=label.get
    )
    ids = counts.episodes[cell[0]][cell[1]]
    g = st.columns([3, 1])
    pick = g[0].selectbox("Episode", ids, format_func=lambda i: f"#{i}", key="x_signal_pick")
    if g[1].button("Open in Editor", key="x_signal_open"):
        selection.open_in("editor", pick, versions.get(pick))


def failures_panel(x: Listing, keys: dict[int, tuple] | None = None) -> None:
    store, sel = x.store, x.sel
    st.subheader("Failed episodes")
    keys = experiments.changes(store) if keys is None else keys
    failed, counts = _failures(app_engine.db_path(), sel, keys.get(sel, ()))
    if not failed:
        st.caption("No failures.")
        return
    st.dataframe(
        [
            {
                "task": it.task.id,
                "type": it.task.type or "",
                "episode": it.episode_id,
                "status": it.status,
                "answer": str(it.metrics.get("answer", "")),
                "error": it.error or "",
            }
            for it in failed
        ],
        hide_index=True,
        key="x_failed_table",
    )
    by_ep = {it.episode_id: it for it in failed if it.episode_id}
    if by_ep:
        f = st.columns([3, 1])
        pick = f[0].selectbox(
            "Failed episode", list(by_ep), format_func=lambda i: f"#{i} · {by_ep[i].task.id}", key="x_fail_pick"
        )
        if f[1].button("Open in Editor", key="x_open", type="primary"):
            selection.open_in("editor", pick, by_ep[pick].version_id)
    st.subheader("Failure signals")
    failures_by_signal(counts, {it.episode_id: it.version_id for it in failed if it.episode_id})
    suggest_panel.experiment_panel(app_engine.engine(), sel)  # `suggest --experiment`: fixes, accept all proven


rerun_panel(page, sel)
st.fragment(run_every=1.0 if any_running(bg, ids) else None)(live_panel)(page)
