"""The Editor's "What if…" panel on a step: N rollouts from that step, without and with an
edit, run in a background thread (progress bar, Stop), then control vs treatment success
bars with 95% intervals, the effect with its interval, and what the model did first.

The rollouts are ordinary versions in a rollout group (see Versions). Untrusted text (model
steps) is only shown in a dataframe or with st.text."""

from __future__ import annotations

import hashlib
import threading
import uuid
from dataclasses import dataclass
from typing import Any

import streamlit as st

from agent import jobs
from agent.engine import Engine, EngineError
from agent.rollout_stats import Effect, GroupStats
from agent.rollouts import MAX_N, Request, group_stats, resample, whatif
from app_pages import app_engine, selection
from app_pages.page_text import EDIT_CHOICES, applicable_edits
from envs.base import EnvError
from envs.registry import family
from sessions import rollouts
from sessions.numbering import label_of
from sessions.rollouts import RolloutEdit
from sessions.store import Store, StoreError

TICK_S = 0.5
NO_EDIT = "No edit (resample from this step)"


def edit_options(step: Any, allowed: Any = None) -> dict[str, str | None]:
    """{label: edit kind} of the edits that apply to this step, worded as in the edit form
    (a step without a thought offers no thought to rewrite or delete; `allowed`: the
    family's edit kinds)."""
    kinds = applicable_edits(step, can_insert_after=False, allowed=allowed)
    return {NO_EDIT: None, **{EDIT_CHOICES[k]: k for k in kinds}}


ARM_NAMES = {"resample": "resample", "control": "control (as it was)", "treatment": "treatment (edited)"}


@dataclass
class Job:
    """This tab's what-if: a job of the one runner (`agent.jobs`); the page reads it."""

    key: tuple[int, int]  # (version, step)
    handle: jobs.Handle

    @property
    def running(self) -> bool:
        return not self.handle.finished.is_set()

    @property
    def stop(self) -> threading.Event:
        return self.handle.stop

    @property
    def progress(self) -> list[int]:
        return [self.handle.done_n, self.handle.total or 0]

    def _result(self, name: str) -> list:
        out = self.handle.result or {}
        return list(out.get(name, []))

    @property
    def groups(self) -> list[int]:
        return self._result("groups")

    @property
    def errors(self) -> list[str]:
        err = self.handle.error
        if err is not None and not self.running:
            if not isinstance(err, (EngineError, EnvError, StoreError)):
                raise err
            return [str(err)]
        return self._result("errors")

    @property
    def warnings(self) -> list[str]:
        return self._result("warnings")


def _start(eng: Engine, req: Request, concurrency: int, tab: str) -> jobs.Handle:
    """The rollouts as a job: its own Engine and connections (the page's Engine stays free)."""
    path, api_key = eng.store.file, eng.api_key

    def work(h: jobs.Handle) -> dict[str, Any]:
        w = Engine(Store(path, create=False), api_key=api_key)
        kw: dict[str, Any] = dict(
            concurrency=concurrency,
            stop=h.stop,
            should_stop=h.sync_stop,
            on_retry=h.on_retry,
            on_progress=lambda done, total: h.progress(done=done, total=total),
        )
        try:
            run = whatif(w, req, **kw)[1] if req.edit else resample(w, req, **kw)
        finally:
            w.store.close()
        return {"groups": [s.group.id for s in run.stats], "errors": run.errors, "warnings": run.warnings}

    ep = eng.store.versions.get(req.version_id).episode_id
    kind = "whatif" if req.edit else "resample"
    return jobs.start(
        eng.store,
        kind,
        work,
        episode_id=ep,
        version_id=req.version_id,
        session=tab,
        target=f"{kind} @{req.k} of episode {ep} {label_of(eng.store, req.version_id)}",
    )


# ---------------------------------------------------------------------- pure views


def rate_rows(stats: list[GroupStats]) -> list[dict[str, Any]]:
    """One row per arm for the bar chart: rate and its Wilson interval, in percent."""
    rows = []
    for s in stats:
        lo, hi = s.ci95
        rows.append(
            {
                "arm": ARM_NAMES[s.group.kind],
                "rate": round(100 * (s.rate or 0.0), 1),
                "lo": round(100 * lo, 1),
                "hi": round(100 * hi, 1),
                "n": s.n,
                "success": s.success,
            }
        )
    return rows


def chart_spec(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Vega-Lite: success-rate bars with their 95% intervals as error bars. The arm names
    are level; the interval is a dark bar with caps, written out ("12-55%") above it."""
    x = {"field": "arm", "type": "nominal", "title": None, "sort": None, "axis": {"labelAngle": 0, "labelLimit": 200}}
    values = [{**r, "interval": f"{r['lo']:g}-{r['hi']:g}%"} for r in rows]
    return {
        "data": {"values": values},
        "layer": [
            {
                "mark": {"type": "bar", "opacity": 0.6},
                "encoding": {
                    "x": x,
                    "y": {"field": "rate", "type": "quantitative", "title": "success %", "scale": {"domain": [0, 100]}},
                },
            },
            {
                "mark": {"type": "rule", "strokeWidth": 2, "color": "#222"},
                "encoding": {"x": x, "y": {"field": "lo", "type": "quantitative"}, "y2": {"field": "hi"}},
            },
            {
                "mark": {"type": "tick", "thickness": 2, "size": 14, "color": "#222"},
                "encoding": {"x": x, "y": {"field": "lo", "type": "quantitative"}},
            },
            {
                "mark": {"type": "tick", "thickness": 2, "size": 14, "color": "#222"},
                "encoding": {"x": x, "y": {"field": "hi", "type": "quantitative"}},
            },
            {
                "mark": {"type": "text", "dy": -8, "fontSize": 11},
                "encoding": {"x": x, "y": {"field": "hi", "type": "quantitative"}, "text": {"field": "interval"}},
            },
        ],
    }


def effect_text(effect: Effect) -> str:
    """The effect as the CLI prints it (`trajectory.numbers.effect_text`), and its procedure."""
    from trajectory.numbers import effect_text as fmt

    return f"Effect of the edit: {fmt(effect.effect, effect.ci95, effect.p_value, ci_label='95% CI')}; {effect.method}"


def first_rows(stats: list[GroupStats]) -> list[dict[str, Any]]:
    return [
        {"arm": ARM_NAMES[s.group.kind], "first regenerated step": f["text"], "rollouts": f["count"]}
        for s in stats
        for f in s.first
    ]


# ---------------------------------------------------------------------- the panel


def render(eng: Engine, ep: Any, vid: int, step: Any) -> None:
    """The panel for `step` of version `vid` (the Editor shows it under the step being edited)."""
    k = step.index
    job: Job | None = st.session_state.get("whatif_job")
    with st.expander(
        f"What if… — N rollouts from step {k}, without and with an edit",
        expanded=job is not None and job.key == (vid, k),
    ):
        c = st.columns([1, 1, 1, 3])
        n = c[0].number_input("N rollouts", min_value=1, max_value=MAX_N, value=10, key=f"wi_n_{vid}_{k}")
        temp = c[1].number_input(
            "Temperature", min_value=0.0, max_value=2.0, value=0.7, step=0.1, key=f"wi_temp_{vid}_{k}"
        )
        conc = c[2].number_input("At once", min_value=1, max_value=32, value=4, key=f"wi_conc_{vid}_{k}")
        app_engine.queue_caption(ep.config.model, ep.config.base_url, int(conc))  # the built-in model: one at a time
        edits = edit_options(step, family(ep.task.env).edit_kinds)
        kind, text = treatment(c[3], edits, vid, step)
        same = (
            text is not None
            and kind != "insert_thought"
            and text.strip() == (step.thought if kind == "rewrite_thought" else step.action or "").strip()
        )
        if same:
            st.warning("The treatment equals the control: change the text (or type it in the edit form above).")
        busy = job is not None and job.running  # one what-if per tab at a time: Stop it first
        if st.button(
            f"Run {int(n)} rollouts" + (" per arm" if kind else ""),
            key=f"wi_run_{vid}_{k}",
            type="primary",
            disabled=busy or same,
        ):
            edit = RolloutEdit(kind=kind, text=text) if kind else None
            req = Request(vid, k, int(n), float(temp), None, edit)
            tab = st.session_state.setdefault("tab_id", uuid.uuid4().hex)
            job = Job((vid, k), _start(eng, req, int(conc), tab))
            st.session_state["whatif_job"] = job
        if job is not None and (job.key == (vid, k) or job.running):  # a running one shows wherever the panel is
            if job.key != (vid, k):
                st.caption(f"The what-if on {label_of(eng.store, job.key[0])} step {job.key[1]} is still running:")
            st.fragment(run_every=TICK_S if job.running else None)(_status)(eng, job)


EDIT_FORM_KEYS = {"rewrite_thought": "ed_thought", "insert_thought": "ed_insert", "rewrite_action": "ed_action"}


def typed_fix(vid: int, step: Any) -> tuple[str | None, str | None]:
    """(edit kind, text) the edit form above holds when it differs from the step, else (None, None)."""
    k = step.index
    kind = {EDIT_CHOICES[x]: x for x in EDIT_FORM_KEYS}.get(st.session_state.get(f"ed_kind_{vid}_{k}"))
    typed = st.session_state.get(f"{EDIT_FORM_KEYS[kind]}_{vid}_{k}") if kind else None
    was = {"rewrite_thought": step.thought, "rewrite_action": step.action}.get(kind or "") or ""
    return (kind, typed) if typed is not None and typed.strip() and typed.strip() != was.strip() else (None, None)


def treatment(where: Any, edits: dict[str, str | None], vid: int, step: Any) -> tuple[str | None, str | None]:
    """The edit to test; by default the fix typed in the edit form above, so it is tested
    without typing it again."""
    k, labels = step.index, list(edits)
    fix_kind, fix_text = typed_fix(vid, step)
    fix_label = next((lab for lab, x in edits.items() if x == fix_kind and x), None)
    tag = f"_{hashlib.sha1(fix_text.encode()).hexdigest()[:8]}" if fix_label else ""  # follows the typed fix
    choice = where.selectbox(
        "Edit (treatment)", labels, key=f"wi_edit_{vid}_{k}{tag}", index=labels.index(fix_label) if fix_label else 0
    )
    kind = edits.get(choice)
    if kind not in EDIT_FORM_KEYS:
        return kind, None
    default = (
        fix_text
        if kind == fix_kind and fix_text
        else ({"rewrite_thought": step.thought, "rewrite_action": step.action}.get(kind) or "")
    )
    return kind, st.text_input("New text", value=default, key=f"wi_text_{vid}_{k}_{kind}{tag}")


def _status(eng: Engine, job: Job) -> None:
    if job.running:
        done, total = job.progress
        st.progress(done / total if total else 0.0, text=f"Rollouts: {done}/{total} finished. Press Stop to halt.")
        if st.button("Stop", key="wi_stop"):
            jobs.stop(eng.store, job.handle.id)
        return
    for w in job.warnings:
        st.warning(w)
    if job.errors:
        st.error("Some rollouts did not finish — the finished ones are kept; run again to continue. Details:")
        st.text(job.errors[0])
    if not job.groups:
        return
    stats = [group_stats(eng, rollouts.group(eng.store, g)) for g in job.groups]
    if job.stop.is_set():
        st.caption("Stopped: the counts below are the rollouts that finished.")
    st.vega_lite_chart(chart_spec(rate_rows(stats)), width="stretch")
    for s in stats:
        lo, hi = s.ci95
        st.text(f"{ARM_NAMES[s.group.kind]}: {s.success}/{s.n} success, 95% CI {100 * lo:.0f}-{100 * hi:.0f}%")
    if len(stats) == 2:
        st.text(effect_text(Effect(stats[0], stats[1])))
    st.dataframe(first_rows(stats), hide_index=True, key="wi_first")
    # a link, not a button: a page switch from inside this ticking fragment could leave a blank page
    g = stats[0].group
    st.page_link(
        selection.page_path("versions"),
        label="Open the rollouts in Versions",
        query_params={"episode": str(g.episode_id), "version": str(g.source_version)},
    )
