"""Suggested fixes, proven before a person accepts them (issue 29).

A critic model reads the transcript the agent saw, its outcome and its failure signals
(never the gold answer, the scorer or the environment's hidden state) and proposes up to K
edits. Each edit that applies to its step and does not state the gold answer is verified by
a what-if from the same restored state (`agent.rollouts.whatif`: the control arm is the
step's one control group, so candidates at one step share it) and ranked by the lower bound
of its effect's interval. "Proven" means better: the interval's lower bound is above 0 and
the one-sided test, adjusted for the other candidates, is below 0.025 (`agent.suggest_verdict`,
issue 40); `suggest --experiment --accept-all-proven` confirms each winner on fresh rollouts
first (`agent.suggest_experiment`).
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from agent import local_model
from agent.client import CallWatch, ModelClient, ModelError, chat_message
from agent.critic_dialogue import (
    MAX_CANDIDATES,
    SuggestError,
    as_edit,
    critic_view,
    parse_answer,
    review,
    template_of,
)
from agent.engine import Engine, EngineError, StepCancelled
from agent.engine_reports import version_name
from agent.rollout_stats import Effect
from agent.rollouts import Request, whatif
from agent.suggest_verdict import assess, comparison_of, verdict
from agent.suggest_verdict import report as report  # (re-exported: the app reads `suggest.report`)
from envs.transcript.critic import CriticPrompt
from sessions import suggestions
from sessions.rollouts import RolloutEdit
from trajectory.records import AgentConfig, ModelCall, Version

CRITIC_INSTRUCTION = "Answer with the JSON object only."
CRITIC_MAX_TOKENS = 1024
JSON_MODE = {"response_format": {"type": "json_object"}}


# ---------------------------------------------------------------------- asking


@dataclass
class Critic:
    """Which model criticises (default: the version's own model and endpoint)."""

    model: str | None = None
    base_url: str | None = None
    api_style: str | None = None
    template: CriticPrompt | None = None

    def config(self, version_config: AgentConfig) -> AgentConfig:
        update: dict[str, Any] = {"temperature": 0.0, "max_tokens": CRITIC_MAX_TOKENS, "cache": False}
        for name in ("model", "base_url", "api_style"):
            if getattr(self, name):
                update[name] = getattr(self, name)
        if update.get("model"):
            update["model"] = local_model.resolved_name(update["model"])
        cfg = AgentConfig.model_validate({**version_config.model_dump(), **update})
        if local_model.wanted(cfg) and not self.api_style:  # the built-in model: chat, so JSON mode applies (a grammar)
            cfg = cfg.model_copy(update={"api_style": "chat"})
        return cfg

    def public(self, cfg: AgentConfig) -> dict[str, Any]:
        return {"model": cfg.model, "base_url": cfg.base_url, "api_style": cfg.api_style}


@dataclass
class Plan:
    """What one suggest request sends: the exact text, its template, the critic config."""

    version_id: int
    episode_id: int
    template: CriticPrompt
    prompt: str  # the critic prompt (before a chat instruction)
    sent: str  # the exact text sent (the chat message, or the prompt)
    first_failure: int | None
    config: AgentConfig
    k: int
    n: int

    @property
    def key(self) -> str:
        """Same version, critic, template, K and N: the same request (a rerun continues it)."""
        blob = json.dumps(
            [self.config.model, self.config.base_url, self.config.api_style, self.template.hash, self.k, self.n],
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def plan(engine: Engine, version_id: int, critic: Critic, k: int, n: int) -> Plan:
    if not 1 <= k <= MAX_CANDIDATES:
        raise SuggestError(f"--candidates must be between 1 and {MAX_CANDIDATES} (got {k})")
    if not 1 <= n <= 1000:
        raise SuggestError(f"--verify must be between 1 and 1000 (got {n})")
    v = engine.store.versions.get(version_id)
    ep = engine.store.episodes.get(v.episode_id)
    template = critic.template or template_of(ep.task.env)
    # an unconfirmed imported endpoint gets no request (nor the key): the user's own instead, or one line
    cfg = engine.envs.model_config(ep, critic.config(engine.store.versions.config(version_id)))
    prompt, first = critic_view(engine, version_id, template, k)
    # the chat styles (chat, messages, tools) send it as one user message; the critic answers JSON (no tools)
    sent = chat_message(prompt, CRITIC_INSTRUCTION) if cfg.api_style != "completions" else prompt
    return Plan(version_id, ep.id, template, prompt, sent, first, cfg, k, n)


def ask(
    engine: Engine,
    p: Plan,
    *,
    experiment_id: int | None = None,
    row: suggestions.Suggestion | None = None,
    watch: CallWatch | None = None,
) -> suggestions.Suggestion:
    """Call the critic and record its answer with the reviewed candidates; an answer
    without candidates raises SuggestError and nothing is written (`watch`: the job's Stop
    cancels the call in flight: StepCancelled, nothing is written)."""
    text, call = _critic_call(engine, p, watch)
    cands = review(engine, p.version_id, parse_answer(text)[: p.k])
    call_id = engine.store.calls.record(p.episode_id, [call])[0]
    if row is None:
        row = suggestions.create(
            engine.store,
            episode_id=p.episode_id,
            version_id=p.version_id,
            request_key=p.key,
            critic=Critic().public(p.config),
            verify_n=p.n,
            experiment_id=experiment_id,
            first_failure_step=p.first_failure,
        )
    return suggestions.record_answer(
        engine.store,
        row.id,
        prompt_label=p.template.label,
        prompt_hash=p.template.hash,
        prompt_text=p.sent,
        response=text,
        call_id=call_id,
        candidates=cands,
    )


def _critic_call(engine: Engine, p: Plan, watch: CallWatch | None = None) -> tuple[str, ModelCall]:
    """The critic's answer: a chat endpoint is asked for a JSON object (JSON mode), and
    asked again without it when it refuses the field (a server without JSON mode)."""
    for extra in (JSON_MODE, None) if p.config.api_style != "completions" else (None,):
        client = ModelClient(p.config, api_key=engine.api_key, chat_extra=extra)
        try:
            return client.complete(p.prompt, [], chat_instruction=CRITIC_INSTRUCTION, purpose="critic", watch=watch)
        except ModelError as exc:
            if watch is not None and watch.cancel.is_set():
                raise StepCancelled("the critic call was stopped; nothing was recorded", exc.call) from None
            error = exc.call.error or "failed"
            if extra is None or "response_format" not in error:
                break
    raise SuggestError(f"the critic call failed: {error}")


# ---------------------------------------------------------------------- proof


def calls_cost(engine: Engine, version_ids: Sequence[int], from_step: int) -> dict[str, Any]:
    """Model calls, billed tokens and USD of the steps these versions sampled from `from_step`."""
    ids = [
        cid
        for vid in version_ids
        for s in engine.store.versions.steps(vid)
        if s.index >= from_step
        for cid in s.call_ids
    ]
    return cost_of(engine, engine.store.calls.read(sorted(set(ids))) if ids else [])


def cost_of(engine: Engine, calls: Sequence[ModelCall]) -> dict[str, Any]:
    from agent.experiment import PRICES, PRICES_SETTING

    saved = engine.store.settings.get(PRICES_SETTING, {}) or {}
    usd = p_tok = c_tok = 0.0
    billed = [c for c in calls if not c.cached]
    for c in billed:
        prices = saved.get(c.model)
        pp, cp = (
            (float(prices.get("prompt", 0)), float(prices.get("completion", 0)))
            if prices
            else PRICES.get(c.model, (0.0, 0.0))
        )
        p, q = c.usage.prompt_tokens or 0, c.usage.completion_tokens or 0
        p_tok, c_tok, usd = p_tok + p, c_tok + q, usd + (p * pp + q * cp) / 1e6
    return {"calls": len(calls), "tokens": int(p_tok + c_tok), "usd": round(usd, 6)}


def result_of(engine: Engine, effect: Effect, k: int) -> dict[str, Any]:
    """A candidate's recorded verification: the what-if's arms and statistics, its words."""
    data = effect.as_json()
    cmp = comparison_of(data)
    state, words = verdict(cmp.diff, cmp.ci95, cmp.p_better, cmp.p_worse) if cmp else ("not shown", "not shown")
    data.update(
        proven=state == "proven",
        verdict=words + " (unadjusted)",
        step=k,
        groups={"control": effect.control.group.id, "treatment": effect.treatment.group.id},
        cost=calls_cost(engine, effect.treatment.versions, k),
    )
    data["control_cost"] = calls_cost(engine, effect.control.versions, k)
    return data


@dataclass
class Verify:
    """How candidates are verified: rollouts per arm, their sampling, Stop and progress."""

    n: int = 10
    temperature: float | None = None
    concurrency: int = 4
    stop: threading.Event = field(default_factory=threading.Event)
    should_stop: Callable[[], bool] | None = None  # the job's check before each step (default: stop.is_set)
    on_progress: Callable[[int, int], None] | None = None
    on_candidate: Callable[[suggestions.Candidate], None] | None = None

    def stopped(self) -> bool:
        """The job's Stop, read before each request (`should_stop` sets `stop` when it holds)."""
        return self.stop.is_set() or bool(self.should_stop and self.should_stop())


def sampling_temperature(config: AgentConfig, asked: float | None) -> float:
    """The rollouts' temperature: as asked, else the version's, else 1 when it ran at 0
    (identical arms would prove nothing)."""
    if asked is not None:
        return asked
    return config.temperature if config.temperature > 0 else 1.0


def verify(engine: Engine, s: suggestions.Suggestion, how: Verify) -> suggestions.Suggestion:
    """Verify the suggestion's pending candidates, one what-if each (finished ones are
    never redone: each is recorded as it ends); the step's control arm is shared."""
    temp = sampling_temperature(engine.store.versions.config(s.version_id), how.temperature)
    for c in s.candidates:
        if c.state != "pending" or how.stopped():
            continue
        k, kind = as_edit(c.kind or "", c.step or 0)
        req = Request(s.version_id, k, s.verify_n, temp, None, RolloutEdit(kind=kind, text=c.text))
        try:
            effect, run = whatif(
                engine,
                req,
                concurrency=how.concurrency,
                stop=how.stop,
                should_stop=how.should_stop,
                on_progress=how.on_progress,
            )
        except EngineError as exc:  # the edit could not be made from the restored state
            suggestions.record_result(
                engine.store, c.id, {"proven": False, "verdict": f"does not apply: {exc}"}, state="skipped"
            )
            continue
        if run.stopped:
            break
        run.check()
        suggestions.record_result(engine.store, c.id, result_of(engine, effect, k))
        if how.on_candidate:
            how.on_candidate(suggestions.get(engine.store, s.id).candidates[c.number - 1])
    fresh = suggestions.get(engine.store, s.id)
    if all(c.state != "pending" for c in fresh.candidates):
        suggestions.finish(engine.store, s.id)
    return suggestions.get(engine.store, s.id)


# ---------------------------------------------------------------------- the report


def total_cost(engine: Engine, s: suggestions.Suggestion) -> dict[str, Any]:
    """The critic call and every rollout (each step's shared control arm counted once)."""
    parts = [
        cost_of(engine, engine.store.calls.read([s.call_id])) if s.call_id else {"calls": 0, "tokens": 0, "usd": 0}
    ]
    seen: set[int] = set()
    for c in s.candidates:
        r = c.result or {}
        parts.append(r.get("cost") or {})
        control = (r.get("groups") or {}).get("control")
        if control is not None and control not in seen:
            seen.add(control)
            parts.append(r.get("control_cost") or {})
    return {
        k: round(sum(p.get(k, 0) for p in parts), 6) if k == "usd" else sum(p.get(k, 0) for p in parts)
        for k in ("calls", "tokens", "usd")
    }


# ---------------------------------------------------------------------- accept


def accept(engine: Engine, version_id: int, number: int, *, bulk: bool = False) -> Version:
    """Candidate `number` of the version's latest suggestions as a new version, made
    exactly as `edit` makes it; its edit records where it came from. In bulk only a
    candidate that does not state the answer, is not harmful and was proven again on fresh
    rollouts (its recorded confirmation, `agent.suggest_experiment.confirm`) is accepted."""
    s = suggestions.latest(engine.store, version_id)
    if s is None:
        raise SuggestError(
            f"version {version_name(engine.store, engine.store.versions.get(version_id))} has no "
            "suggestions yet: run `react-editor suggest` first"
        )
    c = next((x for x in s.candidates if x.number == number), None)
    if c is None:
        raise SuggestError(f"suggestion {s.id} has no candidate {number} (it has {len(s.candidates)})")
    if c.state == "skipped":
        raise SuggestError(f"candidate {number} cannot be accepted: {c.skip or (c.result or {}).get('verdict')}")
    if bulk and (
        c.leaks_answer
        or assess(s)[c.number].state == "harmful"
        or not ((c.result or {}).get("confirmation") or {}).get("proven")
    ):
        raise SuggestError(f"candidate {number} is not a proven fix confirmed on fresh rollouts")
    k, kind = as_edit(c.kind or "", c.step or 0)
    r = c.result or {}
    origin = {
        "suggestion": s.id,
        "candidate": c.number,
        "critic_model": s.critic.get("model"),
        "critic_prompt": s.prompt_label,
        "critic_prompt_hash": s.prompt_hash,
        "whatif_groups": [g for g in ((r.get("groups") or {}).get(a) for a in ("control", "treatment")) if g],
        "verdict": assess(s)[c.number].words if r else c.skip,
        "leaks_answer": c.leaks_answer,
    }
    if r.get("confirmation"):
        origin["confirmation"] = r["confirmation"]["verdict"]
    new = engine.editor.edit(version_id, k, kind, c.text, origin=origin)
    suggestions.set_state(engine.store, c.id, "accepted", accepted_version=new.id)
    return new


def dismiss(engine: Engine, suggestion_id: int, number: int) -> None:
    s = suggestions.get(engine.store, suggestion_id)
    c = next((x for x in s.candidates if x.number == number), None)
    if c is None:
        raise SuggestError(f"suggestion {s.id} has no candidate {number}")
    suggestions.set_state(engine.store, c.id, "dismissed")


# ---------------------------------------------------------------------- one version, or an experiment's failures


def suggest_version(engine: Engine, version_id: int, critic: Critic, k: int, how: Verify) -> suggestions.Suggestion:
    """Ask the critic and verify its candidates: an interrupted request (same version,
    critic, template, K, N) continues where it stopped; a finished one asks afresh (the
    what-ifs of candidates proposed again are found, not rerun)."""
    p = plan(engine, version_id, critic, k, how.n)
    s = suggestions.find(engine.store, version_id, p.key)
    if s is None or s.state != "asked":
        how.stopped()  # (a Stop the database holds cancels the critic call before it is sent)
        s = ask(engine, p, row=s if s is not None and s.state == "asking" else None, watch=CallWatch(how.stop))
    return verify(engine, s, how)
