"""The Editor's overview of a whole version, as pure functions (no Streamlit, unit-tested):
the strip of step marks (who wrote each step, its signals, the edit points, the outcome),
the styles that make edited steps stand out, and per-step timing/token lines.

Safety: the strip is HTML, so it is built ONLY from integers and fixed vocabulary (source
kinds, signal names from trajectory.signals, outcome words), each passed through
html.escape anyway. No step text ever reaches it."""

from __future__ import annotations

import html
from typing import Any, Iterable, Sequence

from app_pages.page_text import provenance, replaced_text, step_lines
from app_pages.textdiff import diff_html
from trajectory.signals import SIGNALS

SOURCE_WORDS = {
    "model": "model",
    "carried": "carried over",
    "person": "written by a person",
    "edited": "edited by a person",
    "imported": "imported",
}


def step_kind(step: Any) -> str:
    """One of SOURCE_WORDS' keys: who wrote this step."""
    if step.source == "imported":
        return "imported"
    if step.source == "model":
        return "carried" if step.info.get("carried_from") else "model"
    return "edited" if step.edit is not None else "person"


def anchor(index: int) -> str:
    """The fragment a mark links to; the Editor's page script scrolls the step's box
    (`.st-key-step_<index>`) into view when a mark is clicked."""
    return f"step-{int(index)}"


def _mark(step: Any, signals: Sequence[str], last: bool, outcome: Any) -> str:
    kind = step_kind(step)
    sig = [s for s in signals if s in SIGNALS]
    classes = ["ov-mark", f"ov-{kind}"]
    words = [f"Step {int(step.index)}", SOURCE_WORDS[kind]]
    if sig:
        classes.append("ov-signal")
        words.append(", ".join(s.replace("_", " ") for s in sig))
    if last and outcome.done:
        classes.append("ov-success" if outcome.success else "ov-failure")
        words.append("success" if outcome.success else "failure")
    flag = "!" if sig else ""
    label = html.escape(" · ".join(words), quote=True)
    return (
        f'<a class="{" ".join(classes)}" href="#{anchor(step.index)}" title="{label}" aria-label="{label}">{flag}</a>'
    )


def strip_html(steps: Sequence[Any], signals: Sequence[Sequence[str]], outcome: Any) -> str:
    """One mark per step (colour: who wrote it; "!" and a red underline: a signal; a thick
    green/red border on the last mark: the outcome), and one line saying where people
    intervened and where signals fired. `signals[i]` are the signals of `steps[i]`."""
    n = len(steps)
    marks = "".join(_mark(s, sig, i == n - 1, outcome) for i, (s, sig) in enumerate(zip(steps, signals)))
    edits = [int(s.index) for s in steps if step_kind(s) in ("edited", "person")]
    flagged = [int(s.index) for s, sig in zip(steps, signals) if sig]
    summary = [
        f"{n} step{'' if n == 1 else 's'}",
        f"person: {_where(edits)}" if edits else "no edits",
        f"signals: {_where(flagged)}" if flagged else "no signals",
    ]
    if outcome.done:
        summary.append("success" if outcome.success else "failure")
    legend = "".join(f'<span class="ov-key ov-{k}"></span>{html.escape(w)} ' for k, w in SOURCE_WORDS.items())
    return (
        f'{STRIP_CSS}<div class="ov-strip" role="navigation" aria-label="Steps of this version">{marks}</div>'
        f'<div class="ov-summary">{html.escape(" · ".join(summary))}'
        f'<span class="ov-legend">{legend}<span class="ov-key ov-model ov-signal">!</span>signal</span></div>'
    )


def _where(indices: list[int]) -> str:
    """ "steps 3, 7, 12" (at most 12 listed)."""
    head = ", ".join(str(i) for i in indices[:12])
    more = f" (+{len(indices) - 12})" if len(indices) > 12 else ""
    return f"step{'' if len(indices) == 1 else 's'} {head}{more}"


STRIP_CSS = """<style>
.ov-strip { display: flex; flex-wrap: wrap; gap: 2px; padding: 4px 0; }
.ov-mark { display: inline-block; width: 14px; height: 22px; border-radius: 3px; text-align: center;
  font: bold 12px/22px sans-serif; color: #cf222e; text-decoration: none; border: 2px solid transparent; }
.ov-mark:hover { outline: 2px solid #1f6feb; }
.ov-model { background: #b6c7e3; }
.ov-carried { background: #dde3ec; }
.ov-person { background: #c9b3f5; }
.ov-edited { background: #f2c94c; }
.ov-imported { background: #b8e0d2; }
.ov-signal { border-bottom: 4px solid #cf222e; }
.ov-success { border: 2px solid #1a7f37; box-shadow: 0 0 0 2px #1a7f37; }
.ov-failure { border: 2px solid #cf222e; box-shadow: 0 0 0 2px #cf222e; }
.ov-summary { font-size: 0.85rem; color: #57606a; }
.ov-legend { margin-left: 1rem; }
.ov-key { display: inline-block; width: 10px; height: 12px; margin: 0 3px 0 8px; border-radius: 2px;
  font: bold 10px/12px sans-serif; color: #cf222e; text-align: center; vertical-align: middle; }
</style>"""


def edited_css(indices: Iterable[int]) -> str:
    """Colour and a thick border for the step boxes a person edited or wrote (keys step_<i>)."""
    sel = ", ".join(f".st-key-step_{int(i)}" for i in indices)
    if not sel:
        return ""
    return (
        f"<style>{sel} {{ background: #fff8c5; border: 2px solid #bf8700 !important; "
        "border-left: 8px solid #bf8700 !important; }</style>"
    )


# ---------------------------------------------------------------------- earlier steps in one block


def steps_html(env: str, steps: Sequence[Any], signals: dict[int, Sequence[str]], tags: dict[int, Any]) -> str:
    """The earlier steps of a long version as ONE block of escaped HTML (a Streamlit element per
    line of 200 steps costs a second per rerun). Same content as the live steps: who wrote
    it, its signals, its lines, what an edit replaced (word diff), tags and note."""
    out = [OLD_STEPS_CSS]
    for s in steps:
        cls = "ov-step ov-step-edited" if s.edit is not None else "ov-step"
        head = f"Step {int(s.index)} · {provenance(s)}"
        sig = [x.replace("_", " ") for x in signals.get(s.id, []) if x in SIGNALS]
        lines = [f'<div class="ov-head">{html.escape(head)}</div>']
        if sig:
            lines.append(f'<div class="ov-sig">⚑ {html.escape(" · ".join(sig))}</div>')
        lines += [f'<div class="ov-line">{html.escape(f"{label}: {text}")}</div>' for label, text in step_lines(env, s)]
        if replaced_text(s):
            was, now = (
                (s.edit.old_action, s.action) if s.edit.kind == "rewrite_action" else (s.edit.old_thought, s.thought)
            )
            left, right = diff_html(was, now)
            lines.append(f'<div class="rd-was"><b>before:</b> {left}<br><b>after:</b> {right}</div>')
        a = tags.get(s.id)
        if a is not None and (a.tags or a.note):
            note = f" · Note: {a.note}" if a.note else ""
            lines.append(f'<div class="ov-line">{html.escape("Tags: " + (", ".join(a.tags) or "-") + note)}</div>')
        out.append(f'<div class="{cls}" data-step="{int(s.index)}">{"".join(lines)}</div>')
    return "".join(out)


OLD_STEPS_CSS = """<style>
.ov-step { border: 1px solid #d0d7de; border-radius: 0.5rem; padding: 0.5rem 0.75rem; margin: 0 0 0.5rem 0;
  scroll-margin-top: calc(3.75rem + 100px); }
.ov-step-edited { background: #fff8c5; border: 2px solid #bf8700; border-left: 8px solid #bf8700; }
.ov-head, .ov-sig { font-size: 0.85rem; color: #57606a; }
.ov-line { font-family: "Source Code Pro", monospace; font-size: 0.85rem; white-space: pre-wrap; word-break: break-word; }
</style>"""


# ---------------------------------------------------------------------- timing and tokens


def call_line(calls: Sequence[Any]) -> str:
    """One step's model calls: latency, tokens, retries (fixed words and numbers only)."""
    if not calls:
        return "no model call"
    lat = sum(c.latency_ms or 0 for c in calls) / 1000
    p = sum(c.usage.prompt_tokens or 0 for c in calls)
    c_ = sum(c.usage.completion_tokens or 0 for c in calls)
    retries = sum(max(c.attempts - 1, 0) for c in calls)
    cached = " · from cache" if all(c.cached for c in calls) else ""
    return (
        f"{lat:.2f} s · {p:,} prompt + {c_:,} completion tokens · "
        f"{retries} retr{'y' if retries == 1 else 'ies'} · {len(calls)} call{'' if len(calls) == 1 else 's'}{cached}"
    )


def version_timing(calls: Iterable[Any]) -> str:
    """The sum over a version's calls (each call once)."""
    seen = {c.id: c for c in calls}
    if not seen:
        return "no model calls"
    return "model total: " + call_line(list(seen.values()))
