"""Pure rendering for the Experiments page: summaries -> rows laid out like the paper's
tables (Table 1: HotpotQA EM/F1, FEVER accuracy; Table 3: ALFWorld per type and All)."""

from __future__ import annotations

from typing import Any

from agent.experiment import family_or_none, task_types, type_label
from trajectory.numbers import bound_texts


def pct(rate: float | None) -> str:
    return "-" if rate is None else f"{100 * rate:.1f}"


def table_caption(env: str) -> str:
    """What a results table of this kind shows (the family says: paper layout, as Table 3)."""
    fam = family_or_none(env)
    if fam is None:  # results of a plugin not installed here
        return f"{env}: success rate %"
    return fam.results_caption or f"{fam.label}: success rate % per task type"


TABLE_NOTE = "; each row names the task set it ran on"
PARTIAL_NOTE = ". Rows marked partial are scored over their finished tasks only."


def is_partial(s: dict[str, Any]) -> bool:
    """A summary's `partial` flag, or (older summaries) fewer done than episodes."""
    return bool(s.get("partial", s["done"] < s["episodes"]))


def paper_row(s: dict[str, Any]) -> dict[str, Any]:
    """One experiment as a row of the paper's table for its environment (percentages); a
    partial run says so and over how many finished tasks its numbers are."""
    scored = f"partial: {s['done']} finished" if is_partial(s) else "all"
    row: dict[str, Any] = {
        "experiment": s["experiment"],
        "name": s["name"],
        "method": s["method"],
        "model": s["model"],
        "status": s["status"],
        "done": f"{s['done']}/{s['episodes']}",
        "scored over": scored,
        "task set": s.get("task_set", "-"),
    }
    fam = family_or_none(s["env"])  # None: a plugin not installed here: its overall rate
    if fam is None or fam.results_by_type:
        for t in task_types(s["env"]):
            row[type_label(s["env"], t)] = pct(s["by_type"].get(t, {}).get("rate"))
        row["All"] = pct(s["success_rate"])
    for m in fam.metrics if fam else ():
        row[m.label] = pct(s.get(m.name))
    row.update(tokens=s["tokens"], cost=f"${s['cost']:.4f}", wall_s=round(s["wall_s"], 1))
    return row


# A row's columns of how the run went, in a second table under the rates: in one table,
# ALFWorld's six types made it 1154 px and HotpotQA's 894, wider than the page at 1280 px
# with the sidebar open (818 px), so their last columns were hidden.
RUN_COLUMNS = ("model", "status", "done", "tokens", "cost", "wall_s")


def split_row(row: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A paper_row as (its rates, as the paper's table with what they are over; the run's
    model, status, progress, tokens, cost and time), each led by the experiment and its name."""
    lead = {k: row[k] for k in ("experiment", "name")}
    return (
        {k: v for k, v in row.items() if k not in RUN_COLUMNS},
        {**lead, **{k: row[k] for k in RUN_COLUMNS if k in row}},
    )


# px per column of the two tables: each fits the page at 1280 px with the sidebar open
# (ALFWorld's rates 764 px, the run table 614 px); a narrower window scrolls them with the
# experiment and its name kept in view
_WIDTHS = {
    "experiment": 34,
    "name": 130,
    "method": 56,
    "model": 104,
    "status": 120,
    "done": 44,
    "scored over": 84,
    "task set": 96,
    "tokens": 60,
    "cost": 66,
    "wall_s": 50,
}
_LABELS = {"experiment": "#"}


def results_columns(row: dict[str, Any]) -> dict[str, Any]:
    """Streamlit column settings for a results table with `row`'s columns (rates: 52 px)."""
    import streamlit as st

    return {
        c: st.column_config.Column(
            _LABELS.get(c, c), width=_WIDTHS.get(c, 52), pinned=c in ("experiment", "name") or None
        )
        for c in row
    }


def chart_spec(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """Vega-Lite grouped bars: success % per task type, one colour per experiment, a
    labelled 0-100 y axis and horizontal type labels. Each bar carries its rate as text: a
    0% bar has no height, and a chart of 0% bars looked blank."""
    rows = [
        {"experiment": label, "type": t, "rate": r, "label": f"{r:g}%"}
        for label, by in chart_data(summaries).items()
        for t, r in by.items()
    ]
    return {
        "data": {"values": rows},
        "layer": [
            {"mark": {"type": "bar", "tooltip": True}},
            {"mark": {"type": "text", "dy": -6, "fontSize": 10}, "encoding": {"text": {"field": "label"}}},
        ],
        "encoding": {
            "x": {
                "field": "type",
                "type": "nominal",
                "title": "task type",
                "sort": None,
                "axis": {"labelAngle": 0, "labelLimit": 140},
            },
            "xOffset": {"field": "experiment"},
            "y": {"field": "rate", "type": "quantitative", "title": "success %", "scale": {"domain": [0, 100]}},
            "color": {"field": "experiment", "type": "nominal", "legend": {"orient": "bottom", "title": None}},
        },
    }


def chart_note(summaries: list[dict[str, Any]]) -> str | None:
    """A line under the chart when every rate in it is 0% (its bars have no height)."""
    rates = [r for by in chart_data(summaries).values() for r in by.values()]
    if rates and not any(rates):
        return "Every rate in this chart is 0%: no task of these experiments succeeded."
    return None


def chart_data(summaries: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """{experiment label: {type label: success rate %}} for a grouped bar chart."""
    out: dict[str, dict[str, float]] = {}
    for s in summaries:
        label = f"{s['experiment']} {s['name']}" + (" (partial)" if is_partial(s) else "")
        out[label] = {
            type_label(s["env"], t): round(100 * (v["rate"] or 0.0), 1) for t, v in s["by_type"].items() if v["n"]
        }
        out[label]["All"] = round(100 * (s["success_rate"] or 0.0), 1)
    return out


def _p(x: float | None) -> str:
    """A p-value as the CLI prints it (`trajectory.numbers.p_text`: 0.04998 is "0.0499")."""
    from trajectory.numbers import p_text

    return "n/a" if x is None else p_text(x)[4:]


def compare_rows(c: dict[str, Any], env: str) -> list[dict[str, Any]]:
    """The paired comparison, overall then per type: A and B over the paired tasks, their
    difference in points with its interval and the p of the same procedure, and the exact
    McNemar p (the two p agree: the interval inverts the exact McNemar test)."""

    def row(label: str, p: dict[str, Any]) -> dict[str, Any]:
        lo, hi = p["diff_ci"]
        bounds = bound_texts(lo, hi, decimals=1) if lo is not None else ("n/a", "n/a")
        return {
            "tasks": label,
            "n": p["n"],
            "both": p["both"],
            "A only": p["a_only"],
            "B only": p["b_only"],
            "neither": p["neither"],
            "A % (paired tasks)": pct(p["a_rate"]),
            "B % (paired tasks)": pct(p["b_rate"]),
            "A - B (points)": pct(p["diff"]),
            "95% CI (points)": f"{bounds[0]} to {bounds[1]}",
            "p": _p(p["p_value"]),
            "exact McNemar p": _p(p["mcnemar_p"]),
            "Holm p (per type)": _p(p.get("p_holm")) if "p_holm" in p else "",
        }

    rows = [row("all", c)]
    rows += [row(type_label(env, t), p) for t, p in c["by_type"].items() if p["n"]]
    return rows


def signal_rows(table: dict[str, dict[str, int]]) -> list[dict[str, Any]]:
    """{type: {signal: n}} -> one row per task type, one column per signal (0 where none)."""
    names = sorted({name for by in table.values() for name in by})
    return [{"type": t or "(no type)", **{name: by.get(name, 0) for name in names}} for t, by in table.items()]
