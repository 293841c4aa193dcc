"""The parts of a step the engine builds beside the model's reply: a person's action typed as a JSON tool
call (`_typed_call`), what a conversation style's reply adds to a step (`_with_message`), the outcome of
running out of steps (`_give_up`) and what a step's signals read of it (`_Turn`)."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from agent.engine_errors import EngineError, WriteBlocked
from agent.engine_reports import RunReport, _outcome
from envs.base import Environment
from sessions.store import StoreError
from trajectory.records import Episode, Outcome, Step, Version
from trajectory.tools import ToolCallError


class _Turn(NamedTuple):
    """What a step's signals read of it, before the step is built."""

    action: str | None
    observation: str | None


def _typed_call(tr: Any, action: str | None) -> tuple[str | None, tuple[str, dict] | None]:
    """A person's action given as a JSON tool call (`{"name": ..., "arguments": {...}}`): its
    text form and the call, checked against the family's tools (one line when it does not fit)."""
    if action is None or not action.lstrip().startswith("{"):
        return action, None
    try:
        name, args = tr.tools.parse_call_text(action)
        return tr.tools.to_action(name, args), (name, args)
    except ToolCallError as exc:
        raise EngineError(f"not an action of this environment's tools: {exc}") from None


def _with_message(step: Step, extra: dict[str, Any]) -> Step:
    """The step with what a conversation style's reply gave beside its thought and action."""
    update = {k: extra[k] for k in ("reasoning", "tool_call", "message") if k in extra}
    if "parse_error" in extra:
        update["info"] = {**step.info, "parse_error": extra["parse_error"]}
    return step.model_copy(update=update)


def _give_up(ep: Episode, env: Environment) -> Outcome:
    """Out of steps. Wikipedia scores `finish[]` as the notebook does; the env's
    state is put back so a branch from this step still sees the real state."""
    give_up = getattr(env, "give_up", None)
    if give_up is None:
        return Outcome(done=True, success=False, reward=0.0, metrics={"limit": True})
    token = env.state()
    res = give_up()
    env.set_state(token)
    oc = _outcome(ep.task.env, res.reward, res.info, True)
    oc.metrics["limit"] = True
    return oc


def _ending(
    ep: Episode, last: Step, total: int, max_steps: Callable[[], int], env: Environment
) -> tuple[Outcome | None, str]:
    """(outcome, status) of a version whose last new step is `last`, `total` steps long: done when
    the step ends the episode or reaches the step limit (`max_steps`, read only then), else open
    (a resumed "stopped" version is running again)."""
    if last.done:
        return _outcome(ep.task.env, last.reward, last.info, True), "done"
    if total >= max_steps():
        return _give_up(ep, env), "done"
    return None, "open"


def _blocked(exc: StoreError, kept: bool) -> WriteBlocked:
    """A step's write blocked (a write lock held too long, disk full), the model's answer kept or not."""
    return WriteBlocked(f"{exc}; the model's answer was {'kept: the next attempt uses it' if kept else 'lost'}")


def _run_report(
    v: Version, steps: int, added: int, stopped: bool, error: str | None, continued_from: int | None
) -> RunReport:
    """A run's report from the version as the run left it (`steps`: its path's length)."""
    return RunReport(
        row=v,
        episode=v.episode_id,
        version=v.id,
        done=v.outcome.done,
        success=v.outcome.success,
        steps=steps,
        added=added,
        stopped=stopped,
        error=error,
        continued_from=continued_from,
    )
