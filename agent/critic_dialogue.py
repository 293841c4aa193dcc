"""What the critic model reads and what its answer becomes: `critic_view` (the transcript the agent
saw, its outcome and failure signals; never the gold answer or the environment's state), `parse_answer`
and `review` (the candidate edits that apply to their step and do not state the gold answer), and
`SuggestError`, the one-line error of a bad request or an unusable answer."""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Sequence

from agent.engine import Engine, EngineError
from envs.registry import family
from envs.transcript.critic import COMMAND, CriticPrompt
from trajectory.records import Step, Version
from trajectory.signals import version_step_signals

CRITIC_KINDS = ("rewrite_thought", "insert_thought_before", "insert_thought_after", "rewrite_action")
MAX_CANDIDATES = 20


class SuggestError(EngineError):
    """A bad request or an unusable critic answer (one line; nothing is written)."""


# ---------------------------------------------------------------------- the critic's view


def first_failure_step(steps: Sequence[Step], outcome: Any) -> int | None:
    """The first step that raises a failure signal (the hint the critic gets), or None."""
    for s, sigs in zip(steps, version_step_signals(steps, outcome)):
        if sigs:
            return s.index
    return None


def template_of(env: str) -> CriticPrompt:
    """The family's critic prompt, else its transcript layout's, else the command layout's."""
    fam = family(env)
    return fam.critic_prompt or getattr(fam.transcript, "critic_prompt", None) or COMMAND


def load_template(path: str) -> CriticPrompt:
    """`--critic-prompt FILE`: a template of one's own, named by its file."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise SuggestError(f"cannot read the critic prompt {path!r}: {exc}") from None
    if "{transcript}" not in text:
        raise SuggestError(f"the critic prompt {path!r} has no {{transcript}} placeholder")
    return CriticPrompt(f"file:{path.rsplit('/', 1)[-1]}", 0, text)


def _outcome_words(v: Version) -> str:
    if not v.outcome.done:
        return "unfinished (the agent had not ended the task)"
    if v.outcome.success:
        return "success"
    return "failure (stopped at the step limit)" if v.outcome.metrics.get("limit") else "failure"


def critic_view(engine: Engine, version_id: int, template: CriticPrompt, k: int) -> tuple[str, int | None]:
    """(the critic prompt, the first failure step): only what the agent saw, the outcome
    and the signals - the task's gold answer and the environment's state never enter."""
    v = engine.store.versions.get(version_id)
    ep = engine.store.episodes.get(v.episode_id)
    steps = engine.steps(v)
    tr = family(ep.task.env).transcript
    sigs = version_step_signals(steps, v.outcome)
    lines = []
    for s, found in zip(steps, sigs):
        lines.append(f"Step {s.index}: {tr.step_text(s)}")
        if s.observation is not None:
            lines.append(f"  Observation: {s.observation}")
        if found:
            lines.append(f"  Signals: {', '.join(found)}")
    first = first_failure_step(steps, v.outcome)
    every = sorted({x for f in sigs for x in f})
    kinds = [c for c in CRITIC_KINDS if _base_kind(c) in family(ep.task.env).edit_kinds]
    text = template.fill(
        {
            "task": ep.task.text,
            "transcript": "\n".join(lines) or "(no steps)",
            "outcome": _outcome_words(v),
            "signals": ", ".join(every) or "none",
            "first_failure": f"step {first}" if first else "not marked (no signal)",
            "k": str(k),
            "kinds": ", ".join(kinds),
        }
    )
    return text, first


# ---------------------------------------------------------------------- the critic's answer


def parse_answer(text: str) -> list[dict[str, Any]]:
    """The candidates of a critic answer, read leniently (code fences, text around the
    object); SuggestError when no JSON object with a `candidates` list is in it."""
    body = re.sub(r"```(?:json)?", "", text or "")
    dec = json.JSONDecoder()
    for i, ch in enumerate(body):
        if ch != "{":
            continue
        try:
            obj, _ = dec.raw_decode(body[i:])
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("candidates"), list):
            return [c for c in obj["candidates"] if isinstance(c, dict)][:MAX_CANDIDATES]
    raise SuggestError(
        'the critic\'s answer has no JSON object with a "candidates" list '
        f"(it began {' '.join((text or '').split())[:80]!r}); nothing was written"
    )


def _base_kind(kind: str) -> str:
    return "insert_thought" if kind.startswith("insert_thought") else kind


def as_edit(kind: str, step: int) -> tuple[int, str]:
    """(the what-if's step K, the engine's edit kind) of a critic candidate."""
    if kind == "insert_thought_after":
        return step + 1, "insert_thought"
    return step, _base_kind(kind)


def applies(c: dict[str, Any], steps: Sequence[Step], v: Version, allowed: Sequence[str]) -> str | None:
    """Why a candidate does not apply to its step (as the what-if panel offers edits), or None."""
    kind, step, text = c.get("kind"), c.get("step"), c.get("text")
    if kind not in CRITIC_KINDS:
        return f"unknown kind {kind!r}"
    if not isinstance(step, int) or isinstance(step, bool) or not 1 <= step <= len(steps):
        return f"step {step!r} is not a step of this version (1..{len(steps)})"
    if not isinstance(text, str) or not text.strip():
        return "no text"
    if _base_kind(kind) not in allowed:
        return f"{kind} does not apply to this environment's steps"
    s = steps[step - 1]
    if kind == "rewrite_thought" and s.thought is None:
        return f"step {step} has no thought to rewrite"
    if kind == "rewrite_action" and s.action is None:
        return f"step {step} has no action to rewrite"
    if kind == "insert_thought_after" and step == len(steps) and v.outcome.done:
        return f"step {step} ends the episode: nothing follows it"
    return None


def leaks_answer(text: str, gold: str | None, normalize: Callable[[str], str] | None) -> bool:
    """Whether the text states the gold answer, both normalised as the scorer normalises
    (whole words; a family without text answers has none to leak)."""
    if not gold or not text:
        return False
    norm = normalize or (lambda s: " ".join(re.sub(r"[^\w\s]", " ", s.lower()).split()))
    g, t = norm(gold).strip(), norm(text)
    return bool(g) and f" {g} " in f" {t} "


def review(engine: Engine, version_id: int, raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Number the candidates and mark the ones not to verify (and why)."""
    v = engine.store.versions.get(version_id)
    ep = engine.store.episodes.get(v.episode_id)
    fam = family(ep.task.env)
    steps = engine.steps(v)
    out = []
    for i, c in enumerate(raw, 1):
        d = {
            "number": i,
            "step": c.get("step") if isinstance(c.get("step"), int) else None,
            "kind": c.get("kind") if isinstance(c.get("kind"), str) else None,
            "text": c.get("text") if isinstance(c.get("text"), str) else None,
            "rationale": str(c.get("rationale") or "")[:2000],
        }
        why = applies(c, steps, v, fam.edit_kinds)
        d["leaks_answer"] = leaks_answer(d["text"] or "", ep.task.gold, fam.qa.normalize if fam.qa else None)
        if why is not None:
            d.update(skip=f"does not apply: {why}", state="skipped")
        elif d["leaks_answer"]:
            d.update(skip="leaks the answer: its text states the gold answer", state="flagged")
        out.append(d)
    return out
