"""The paper's prompting methods (section 3-4, Tables 1 and 3), run on one episode each.

- `react`, `act`: the step engine with the react / act prompt style (ALFWorld, HotpotQA, FEVER).
- `standard`, `cot`: one call with the `webqa_*` / `cotqa_*` examples; the answer is stored
  as one step (the thought and `Finish[answer]`), scored by the environment.
- `cot-sc`: n CoT samples at temperature 0.7 (the paper: n = 21), the majority answer.
- `react-cot-sc`: ReAct; when it gives no answer within its step budget (7 HotpotQA,
  5 FEVER), back off to CoT-SC. `cot-sc-react`: CoT-SC; when the majority answer has fewer
  than n/2 votes, back off to ReAct.
A hybrid's phases are versions of the same episode, named after the phase when created and
recorded on the experiment item (renaming a version changes nothing); the last phase run is
the episode's current version. Each phase is resumable: a finished phase is kept, an
unfinished ReAct phase continues in place, a CoT phase is one atomic step.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from agent import exemplars
from agent.client import CallWatch, ModelError
from agent.engine import Engine, EngineError
from envs.base import EnvError
from envs.registry import family
from sessions.connection import FenceLost
from sessions.store import StoreError
from trajectory.answer_formats import majority, parse_qa
from trajectory.records import ModelCall, Version

PHASES: dict[str, tuple[str, ...]] = {
    "react": ("react",),
    "act": ("act",),
    "standard": ("standard",),
    "cot": ("cot",),
    "cot-sc": ("cot-sc",),
    "react-cot-sc": ("react", "cot-sc"),
    "cot-sc-react": ("cot-sc", "react"),
}
DEFAULT_SAMPLES = 21
SC_TEMPERATURE = 0.7
QA_CHAT = {
    "standard": "Continue the transcript above: reply with only the answer to the last question, on one line.",
    "cot": "Continue the transcript above: reply with the reasoning on one line, then 'Answer: ' and the answer.",
}


class MethodError(EngineError):
    """A method that does not apply (one line)."""


def methods_of(env: str) -> tuple[str, ...]:
    """The methods that apply to a kind (ReAct/Act everywhere, Standard/CoT where answers are text)."""
    try:
        return family(env).methods
    except EnvError:
        raise MethodError(f"unknown environment {env!r}") from None


def backoff_steps(env: str) -> int | None:
    """ReAct -> CoT-SC backs off when ReAct gives no answer within these steps (the paper,
    3.3: 7 HotpotQA, 5 FEVER; the family's `qa.backoff_steps`)."""
    qa = family(env).qa
    return qa.backoff_steps if qa is not None else None


def check_method(env: str, method: str) -> None:
    known = methods_of(env)
    if method not in known:
        raise MethodError(f"method {method!r} does not apply to {env}; use one of {', '.join(known)}")


def check_exemplars(env: str, method: str, exemplar_set: str | None, store) -> None:
    """Fail before anything runs when the exemplar set lacks what the method's prompts need."""
    try:
        prompts = exemplars.prompt_dict(env, exemplar_set, store)
        for phase in PHASES[method]:
            if phase in ("react", "act"):
                family(env).transcript.check_exemplars(prompts, phase)
            else:
                exemplars.qa_exemplars(prompts, env, "standard" if phase == "standard" else "cot")
    except exemplars.ExemplarError as exc:
        raise MethodError(exemplars.with_advice(exc, env, exemplar_set)) from None
    except StoreError as exc:
        raise MethodError(str(exc)) from None


def prompt_style(method: str) -> str:
    """The episode's prompt style (the engine's `react` / `act`)."""
    return "act" if method == "act" else "react"


@dataclass
class ItemOutcome:
    version_id: int
    done: bool
    success: bool | None
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    stopped: bool = False


def run_item(
    engine: Engine,
    episode_id: int,
    method: str,
    *,
    samples: int = DEFAULT_SAMPLES,
    sc_temperature: float = SC_TEMPERATURE,
    should_stop: Callable[[], bool] | None = None,
    phases: dict[str, int] | None = None,
    on_phase: Callable[[str, int], None] | None = None,
    concurrency: int = 1,
    watch: CallWatch | None = None,
    known: Version | None = None,
) -> ItemOutcome:
    """Run (or continue) `method` on the episode; return where its final version stands.
    `phases` ({phase: version id}, the experiment item's record) says which version ran
    each phase; `on_phase` records a phase's version whenever it starts or moves (a run on
    a version frozen meanwhile goes on in a child, and the phase follows it there).
    `known`: a version row the caller just wrote (not read again)."""
    store = engine.store
    names = PHASES[method]
    row, known = known, dict(phases or {})
    if not known:  # an item recorded before phases were kept: fall back to the version names
        known = {v.name: v.id for v in store.versions.of_episode(episode_id) if v.name in names}
    v: Version | None = None
    for n, phase in enumerate(names):
        fresh = known.get(phase) is None  # its version is named/created now: that and its record commit together
        with store.transaction() if fresh else contextlib.nullcontext():
            v = _phase_version(store, episode_id, phase, known.get(phase), v, row)
            if on_phase and known.get(phase) != v.id:
                on_phase(phase, v.id)
                known[phase] = v.id  # recorded: not again after the run unless it moved
        if not v.outcome.done:
            moved = functools.partial(_moved, on_phase, known, phase) if on_phase else None
            budget = _Budget(samples, sc_temperature, should_stop, concurrency, watch)
            error, stopped, ran, row = _run_phase(engine, v, phase, budget, moved)
            v = row if row is not None and row.id == ran else store.versions.get(ran)
            if on_phase and ran != known.get(phase):
                on_phase(phase, ran)
            if error or stopped:
                return ItemOutcome(v.id, False, None, dict(v.outcome.metrics), error=error, stopped=stopped)
        known[phase] = v.id
        if n + 1 < len(names) and not _backs_off(engine, v, phase):
            break
    assert v is not None
    metrics = {**v.outcome.metrics, "answered_by": _phase_of(known, v.id)}
    return ItemOutcome(v.id, True, v.outcome.success, metrics)


def _moved(on_phase: Callable[[str, int], None], known: dict[str, int], phase: str, version_id: int) -> None:
    """A run went on in a child version: record it at once (and not again after the run)."""
    on_phase(phase, version_id)
    known[phase] = version_id


def _phase_of(known: dict[str, int], version_id: int) -> str:
    return next((p for p, vid in known.items() if vid == version_id), "")


def _phase_version(
    store, episode_id: int, phase: str, recorded: int | None, prev: Version | None, row: Version | None = None
) -> Version:
    """The version that runs `phase`: the recorded one (`row` when it is that one, as just
    written), else the episode's first version (first phase), else a fresh path from the
    task's start named after the phase."""
    if recorded is not None:
        return row if row is not None and row.id == recorded else store.versions.get(recorded)
    if prev is None:
        return store.versions.update(store.versions.of_episode(episode_id)[0].id, name=phase)
    found, _ = store.versions.branch(prev, at_step=None, steps=[], name=phase)
    return found


@dataclass
class _Budget:
    samples: int
    sc_temperature: float
    should_stop: Callable[[], bool] | None
    concurrency: int  # model calls of one item at once (CoT-SC's samples)
    watch: CallWatch | None = None  # the job's: Stop cancels a ReAct step's call in flight

    def stopped(self) -> bool:
        return bool(self.should_stop and self.should_stop())


class _Stopped(Exception):
    """Stop came between two samples: the phase stays unanswered (resumable)."""


def _run_phase(
    engine: Engine, v: Version, phase: str, b: _Budget, moved: Callable[[int], None] | None = None
) -> tuple[str | None, bool, int, Version | None]:
    """(error, stopped, id of the version that ran, its row when known) after running one phase on version v:
    a ReAct run on a version frozen meanwhile goes on in a child version, and `moved` hears
    of it at once (a crash right after must not leave the item on the frozen version)."""
    if phase in ("react", "act"):

        def on_step(rep) -> None:
            if rep.frozen and moved:
                moved(rep.version.id)

        rep = engine.run(v.id, should_stop=b.should_stop, on_step=on_step, watch=b.watch, known=v)
        return rep.error, rep.stopped, rep.version, rep.row
    try:
        if phase == "cot-sc":
            _answer_sc(engine, v, b)
        else:
            _answer_once(engine, v, phase)
    except _Stopped:
        return None, True, v.id, None
    except FenceLost:  # the item's claim was taken over: the item stops, nothing written
        raise
    except (EngineError, StoreError) as exc:
        return str(exc), False, v.id, None
    return None, False, v.id, None


def _qa_prompt(engine: Engine, v: Version, method: str) -> tuple[str, list[str]]:
    """The version's pinned config and exemplar revision, as ReAct steps use them."""
    try:
        return engine.prompts.qa_prompt(v.id, method)
    except EngineError as exc:
        raise MethodError(str(exc)) from None


def _sample(
    engine: Engine, v: Version, config, method: str, n: int, b: _Budget | None = None
) -> tuple[list[str], list[str | None], list[ModelCall]]:
    """n completions of one Standard / CoT prompt: (answers, thoughts, calls), up to
    `b.concurrency` at once. Stop ends it within one call (no new call starts once the job's Stop
    is set); a failed call fails the phase. Every call made is recorded."""
    prompt, stop = _qa_prompt(engine, v, method)
    client = engine.prompts.client(engine.envs.model_config(engine.store.episodes.get(v.episode_id), config))
    b = b or _Budget(n, SC_TEMPERATURE, None, 1)
    cancel = threading.Event()  # this phase's own: a failed sample stops the others, not the job
    job_cancel = b.watch.cancel if b.watch else None
    watch = CallWatch(cancel, on_retry=b.watch.on_retry if b.watch else None)  # the job hears retries (fail fast)

    def one(_: int) -> ModelCall:
        if cancel.is_set() or b.stopped() or (job_cancel is not None and job_cancel.is_set()):
            cancel.set()
            raise _Stopped()
        try:
            return client.complete(prompt, stop, purpose="step", chat_instruction=QA_CHAT[method], watch=watch)[1]
        except ModelError as exc:
            cancel.set()
            raise _Failed(exc.call, str(exc)) from None

    calls, problem = _gather(one, n, max(1, min(b.concurrency, n)), cancel, b)
    if problem is not None:
        engine.record_calls(v.episode_id, calls)  # (fenced as the item's steps are)
        if isinstance(problem, _Failed) and not b.stopped():
            raise MethodError(f"model call failed: {problem.reason}") from None
        raise _Stopped()
    parsed = [parse_qa(c.completion or "", method) for c in calls]
    return [p.answer for p in parsed], [p.thought for p in parsed], calls


class _Failed(Exception):
    def __init__(self, call: ModelCall | None, reason: str):
        super().__init__(reason)
        self.call, self.reason = call, reason


def _gather(
    one: Callable[[int], ModelCall], n: int, width: int, cancel: threading.Event, b: _Budget
) -> tuple[list[ModelCall], Exception | None]:
    """Run `one(i)` for i < n, `width` at a time, in order; (calls made, first problem)."""
    calls: list[ModelCall | None] = [None] * n
    problem: Exception | None = None
    if width == 1:
        for i in range(n):
            try:
                calls[i] = one(i)
            except (_Stopped, _Failed) as exc:
                problem = exc
                if isinstance(exc, _Failed) and exc.call is not None:
                    calls[i] = exc.call
                break
    else:
        with ThreadPoolExecutor(max_workers=width, thread_name_prefix="sample") as pool:
            futures = [pool.submit(one, i) for i in range(n)]
            for i, fut in enumerate(futures):
                try:
                    calls[i] = fut.result()
                except (_Stopped, _Failed) as exc:
                    problem = problem or exc
                    if isinstance(exc, _Failed) and exc.call is not None:
                        calls[i] = exc.call
                    cancel.set()
    return [c for c in calls if c is not None], problem


def _answer_once(engine: Engine, v: Version, method: str) -> None:
    config = engine.store.versions.config(v.id)
    answers, thoughts, calls = _sample(engine, v, config, method, 1)
    engine.answer(v.id, thoughts[0], answers[0], calls, info={"method": method})


def _answer_sc(engine: Engine, v: Version, b: _Budget) -> None:
    samples = b.samples
    config = engine.store.versions.config(v.id).model_copy(update={"temperature": b.sc_temperature})
    answers, thoughts, calls = _sample(engine, v, config, "cot", samples, b)
    normalize = _normalizer(engine, v)
    best, votes = majority(answers, normalize)
    thought = next(
        (t for a, t in zip(answers, thoughts) if best and normalize(a) == normalize(best)),
        thoughts[0] if thoughts else None,
    )
    info = {"method": "cot-sc", "votes": votes, "samples": samples, "answers": answers}
    engine.answer(v.id, thought, best, calls, info=info)


def _normalizer(engine: Engine, v: Version) -> Callable[[str], str]:
    """How the kind compares answers (the official normalisation for HotpotQA and FEVER)."""
    qa = family(engine.store.episodes.get(v.episode_id).task.env).qa
    return qa.normalize if qa is not None else (lambda a: " ".join(a.split()).casefold())


def _backs_off(engine: Engine, v: Version, phase: str) -> bool:
    """The paper's heuristics: ReAct -> CoT-SC when ReAct returned no answer within its
    step budget; CoT-SC -> ReAct when the majority answer has fewer than n/2 votes."""
    metrics = v.outcome.metrics
    if phase == "react":
        return bool(metrics.get("limit")) or not str(metrics.get("answer") or "").strip()
    last = engine.store.versions.steps(v.id)[-1]
    votes, n = last.info.get("votes", 0), last.info.get("samples", 1)
    return votes < n / 2
