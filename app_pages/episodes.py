"""Episodes: start a new one (environment, task, agent config) and list / filter / open
existing ones. Task lists come from the environment families (`envs.base.family`)."""

from __future__ import annotations

import streamlit as st

from agent.run_settings import check_base_url
from app_pages import alerts, app_engine, search_box, selection
from app_pages.api_styles import api_style_box
from app_pages.page_text import EPISODE_COLUMNS, episode_row, episode_title
from envs.base import EnvError
from envs.registry import family, kinds
from sessions import annotations, exemplar_sets
from sessions.edit_counts import edit_counts
from trajectory.records import AgentConfig

eng = app_engine.engine()
store = eng.store

# A link like /?episode=N&version=M on the default page opens the Editor.
if st.query_params.get("episode"):
    ep_q, ver_q = selection.selection()
    if ep_q is not None:
        selection.open_in("editor", ep_q, ver_q)

st.title("Episodes")
app_engine.model_banner()


def load_tasks(env: str, source: str):
    """The task list of one env/source, kept for the session (lists can be long)."""
    cache = st.session_state.setdefault("_tasks", {})
    if (env, source) not in cache:
        cache[(env, source)] = family(env).list_tasks(source=source)
    return cache[(env, source)]


def exemplar_set_names(store, env: str) -> list[str]:
    """Named exemplar sets of this environment kept in the database."""
    return [x.name for x in exemplar_sets.list_sets(store, env)]


def has_label(store, version_id: int | None, label: str) -> bool:
    """The current version carries this verdict or failure mode."""
    a = annotations.version_annotation(store, version_id) if version_id is not None else None
    return a is not None and (a.verdict == label or label in a.failure_modes)


PAGE_ROWS = 500  # the newest episodes first; "Show more" adds as many again


def option_inputs(env: str) -> dict:
    """The episode options the family takes (`EnvFamily.options`), blank = its default.
    Keys in their own namespace (`new_opt_`): a family's option or custom field named like
    a form field (`name`, `model`) or like each other drew two widgets with one key."""
    values = {}
    for o in family(env).options:
        if o.choices:
            values[o.key] = st.selectbox(
                o.help, o.choices, index=o.choices.index(o.default) if o.default else 0, key=f"new_opt_{o.key}_{env}"
            )
        elif o.switch:
            values[o.key] = st.checkbox(o.help, key=f"new_opt_{o.key}_{env}") or None
        else:
            values[o.key] = st.text_input(o.help, key=f"new_opt_{o.key}_{env}").strip() or None
    return family(env).env_options(values)


with st.expander("Start a new episode", expanded=store.episodes.empty()):
    d = app_engine.defaults()
    c = st.columns(3)
    env = c[0].selectbox("Environment", list(kinds()), key="new_env")
    how = c[1].radio("Task", ["From a task set", "Custom"], key="new_how", horizontal=True)
    task = None
    task_error = None
    if how == "From a task set":
        source = c[2].selectbox("Task set", family(env).sources, key=f"new_source_{env}")
        try:
            tasks = load_tasks(env, source)
        except (EnvError, OSError, ValueError) as exc:
            tasks, task_error = [], str(exc)
        if task_error:
            st.caption("This task set is not available:")
            st.text(task_error)
        elif tasks:
            labels = {t.id: f"{t.id} · {family(env).one_line(t)[:90]}" for t in tasks}  # the family's summary
            tid = st.selectbox("Task", list(labels), format_func=labels.get, key=f"new_task_{env}_{source}")
            task = next(t for t in tasks if t.id == tid)
            with st.container(key="new_task_text"):
                st.text(task.text)
        else:
            st.caption("No tasks in this set.")
    else:
        custom = {f.key: st.text_input(f.label, key=f"new_field_{f.key}_{env}") for f in family(env).custom_fields}
    options = option_inputs(env)
    st.caption("Agent")
    a = st.columns(3)
    base_url = a[0].text_input(
        "Endpoint (base URL; blank = OPENAI_BASE_URL or OpenAI)", value=d.get("base_url") or "", key="new_base_url"
    )
    model = a[1].text_input("Model", value=d["model"], key="new_model")
    api_style = api_style_box(a[2], d["api_style"], "new_api_style")
    b = st.columns(3)
    style = b[0].selectbox("Prompt style", ["react", "act"], index=["react", "act"].index(d["style"]), key="new_style")
    builtin = family(env).exemplars_label  # e.g. ALFWorld's were played by a scripted policy
    set_names = [builtin, *exemplar_set_names(store, env)]
    exemplars = b[1].selectbox("Exemplar set", set_names, key=f"new_exemplars_{env}")
    exemplars = "" if exemplars == builtin else exemplars
    max_steps = b[2].number_input(
        "Max steps (0 = environment default)",
        min_value=0,
        max_value=500,
        value=int(d.get("max_steps") or 0),
        key="new_max_steps",
    )
    name = st.text_input("Episode name (optional)", key="new_name")
    alerts.show_error("new")
    if st.button("Start episode", key="new_start", type="primary"):
        alerts.clear_error("new")
        try:
            if how == "Custom":
                fam = family(env)
                if fam.custom_task is None:
                    raise EnvError(f"{env} has no custom tasks")
                task = fam.custom_task(**{k: v.strip() or None for k, v in custom.items()})
            if task is None:
                raise EnvError("choose a task first")
            check_base_url(base_url.strip() or None)  # refused, not silently stripped
            cfg = AgentConfig.model_validate(
                {
                    **d,
                    "base_url": base_url.strip() or None,
                    "model": model.strip() or d["model"],
                    "api_style": api_style,
                    "style": style,
                    "exemplar_set": exemplars.strip() or None,
                    "max_steps": int(max_steps) or None,
                }
            )
            ep, v = eng.start_episode(task, cfg, options, name=name.strip() or None)
        except app_engine.USER_ERRORS as exc:
            alerts.set_error("new", exc)
            st.rerun()
        selection.open_in("editor", ep.id, v.id)

search_box.render(store)

st.subheader("Your episodes")
f = st.columns(5)
f_env = f[0].selectbox("Environment", ["all", *kinds()], key="f_env")
f_type = f[1].text_input("Task type", key="f_type")
f_outcome = f[2].selectbox("Outcome", ["all", "success", "failure", "unfinished"], key="f_outcome")
f_edited = f[3].selectbox("Edited", ["all", "edited", "not edited"], key="f_edited")
f_label = f[4].selectbox(
    "Label (current version)",
    ["all", *annotations.VERDICTS, *annotations.FAILURE_MODES],
    key="f_label",
    format_func=lambda m: m.replace("_", " "),
)
shown_max = int(st.session_state.get("episodes_shown", PAGE_ROWS))
rows = store.episodes.list(
    env=None if f_env == "all" else f_env,
    task_type=f_type.strip() or None,
    outcome=None if f_outcome == "all" else f_outcome,
    edited=None if f_edited == "all" else f_edited == "edited",
    limit=shown_max + 1,
)
more = len(rows) > shown_max
rows = rows[:shown_max]
if f_label != "all":
    rows = [r for r in rows if has_label(store, r["current_version"], f_label)]
if not rows:
    st.caption("No episodes yet: start one above." if store.episodes.empty() else "No episodes match.")
else:
    edits = edit_counts(store, [r["episode"] for r in rows])
    table = [episode_row(r, edits.get(r["episode"], 0)) for r in rows]
    st.caption(
        "Click a row to open the episode in the Editor."
        + (f" The newest {len(rows):,} are shown: narrow the filters or show more." if more else "")
    )
    picked = st.dataframe(
        table,
        hide_index=True,
        key="episodes_table",
        on_select="rerun",
        selection_mode="single-row",
        column_config=EPISODE_COLUMNS,
    )
    chosen_rows = picked.selection.rows if picked is not None else []
    if chosen_rows:
        selection.open_in("editor", rows[chosen_rows[0]]["episode"], None)
    ids = [r["episode"] for r in rows]
    names = {r["episode"]: episode_title(r) for r in rows}
    o = st.columns([3, 1, 1])
    pick = o[0].selectbox("Episode", ids, format_func=names.get, key="open_pick")
    if o[1].button("Open in Editor", key="open_btn", type="primary"):
        selection.open_in("editor", pick, None)
    if o[2].button("Versions", key="open_versions"):
        selection.open_in("versions", pick, None)
    if more and st.button(f"Show {PAGE_ROWS} more", key="episodes_more"):
        st.session_state["episodes_shown"] = shown_max + PAGE_ROWS
        st.rerun()
