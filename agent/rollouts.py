"""Rollouts from any step: resample step K onwards N times, or measure what an edit at K
does (control vs treatment, from the same restored environment state).

Each rollout is an ordinary version: `engine.editor.branch` keeps steps 1..K-1 (control /
resample) or `engine.editor.edit` applies the edit at K (treatment), then the model runs it to the
end or the step limit. Rollouts run concurrently through `agent.batch.run_batch`, one
Engine per worker thread (its own database connection and environments, so each worker
restores the step-K state in its own game). A group remembers its members, so running the
same request again counts the finished rollouts and continues the others. What they measure
(a group's rate, an edit's effect, effects pooled over episodes) is in `agent.rollout_stats`.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from agent.batch import BatchAborted, JobResult, run_batch
from agent.client import CallWatch, ModelClient
from agent.engine import Engine, EngineError
from agent.engine_reports import version_name
from agent.rollout_stats import Effect, GroupStats, RolloutError
from envs.base import EDIT_KINDS
from envs.registry import family
from sessions import experiments, rollouts
from sessions.rollouts import RolloutEdit, RolloutGroup
from sessions.store import Store
from sessions.writer import attached
from trajectory.records import EDIT_WORDS, AgentConfig, Episode, Step, Version
from trajectory.user_regex import PatternError, compile_pattern

MAX_N = 1000


# ---------------------------------------------------------------------- results


def step_text(env: str, step: Step) -> str:
    """A step as the model wrote it, without its observation: what `first` groups by."""
    return family(env).transcript.step_text(step)


@dataclass
class RolloutRun:
    """What one call produced: each group's stats, the failures (one line each), Stop."""

    stats: list[GroupStats]
    errors: list[str] = field(default_factory=list)
    stopped: bool = False
    warnings: list[str] = field(default_factory=list)

    def check(self) -> None:
        """Raise the one-line error the CLI prints when some rollouts did not finish."""
        if self.errors:
            kept = sum(s.n for s in self.stats)
            raise RolloutError(
                f"{len(self.errors)} rollout(s) failed ({self.errors[0]}); {kept} finished rollout(s) are kept "
                "- run the same command again to continue"
            )


# ---------------------------------------------------------------------- the request


@dataclass
class Request:
    """N rollouts from step K of a version, with the model settings they run with."""

    version_id: int
    k: int
    n: int
    temperature: float | None = None
    max_steps: int | None = None
    edit: RolloutEdit | None = None  # given: a what-if (control + treatment)
    settings: dict[str, Any] = field(default_factory=dict)  # other model settings (model, endpoint, ...)


def check_n(n: int) -> int:
    if not isinstance(n, int) or not 1 <= n <= MAX_N:
        raise RolloutError(f"N must be between 1 and {MAX_N} (got {n})")
    return n


def rollout_config(
    config: AgentConfig, temperature: float | None, max_steps: int | None, settings: dict[str, Any] | None = None
) -> AgentConfig:
    """The source version's config with the rollouts' own settings; each rollout version
    pins it, so it records what its steps were sampled with."""
    update: dict[str, Any] = dict(settings or {})
    if temperature is not None:
        if not 0 <= temperature <= 2:
            raise RolloutError(f"the temperature must be between 0 and 2 (got {temperature:g})")
        update["temperature"] = float(temperature)
    if max_steps is not None:
        if max_steps < 1:
            raise RolloutError(f"the step limit must be at least 1 (got {max_steps})")
        update["max_steps"] = max_steps
    return AgentConfig.model_validate({**config.model_dump(), **update})


def sampling_warning(config: AgentConfig, n: int) -> str | None:
    if config.temperature == 0 and n > 1:
        return (
            "temperature is 0: the rollouts will be identical unless the model server is "
            "nondeterministic (give --temperature > 0 to sample)"
        )
    return None


def first_match(steps: Sequence[Step], pattern: str) -> int | None:
    """K of the first step whose action or observation matches `pattern` (a search, on RE2:
    linear time whatever the pattern)."""
    try:
        rx = compile_pattern(pattern)
    except PatternError as exc:
        raise RolloutError(f"bad regular expression {pattern[:60]!r}: {exc}") from None
    for s in steps:
        if any(t is not None and rx.search(t) for t in (s.action, s.observation)):
            return s.index
    return None


# ---------------------------------------------------------------------- workers


class _WorkerEngine(Engine):
    """One worker thread's Engine on the run's Store (its own connection; its steps go to
    the Store's one writer) and its own environments; model calls and
    the step limit follow the group's config (the episode's config is left as it is)."""

    def __init__(self, store: Store, config: AgentConfig, api_key: str | None, use_cache: bool):
        # the endpoint follows the engine's choice (`model_config`: an unconfirmed import's is not used)
        super().__init__(
            store,
            api_key=api_key,
            client_factory=lambda cfg: ModelClient(
                config.model_copy(update={"base_url": cfg.base_url}),
                api_key=api_key,
                cache=store.calls if use_cache and config.cache else None,
            ),
        )
        self.config = config

    def max_steps(self, episode: Episode) -> int:
        return self.config.max_steps or super().max_steps(episode)


@dataclass
class _Job:
    group: RolloutGroup
    pos: int
    version_id: int | None  # None: not made yet


class Rollouts:
    """Runs rollout groups of one episode for `engine` (the caller's Engine: the UI's or
    the CLI's). `stop` (a threading.Event: the job's) is every worker's: checked before each
    rollout and each step (`should_stop`: the job's own check, e.g. `Handle.sync_stop`), and the
    cancel of every model call in flight (`on_retry` hears their retries), as a run's."""

    def __init__(
        self,
        engine: Engine,
        *,
        concurrency: int = 4,
        stop: threading.Event | None = None,
        on_progress: Callable[[int, int], None] | None = None,
        max_consecutive_failures: int = 5,
        should_stop: Callable[[], bool] | None = None,
        on_retry: Callable[[int, str], None] | None = None,
    ):
        if engine.store.file == ":memory:":
            raise RolloutError("rollouts need a database file (they run on several connections)")
        if concurrency < 1:
            raise RolloutError(f"the concurrency must be at least 1 (got {concurrency})")
        self.engine = engine
        self.store = engine.store
        self.concurrency = concurrency
        self.stop = stop or threading.Event()
        self.should_stop = should_stop or self.stop.is_set
        self.watch = CallWatch(self.stop, on_retry=on_retry)  # shared by the workers' calls
        self.on_progress = on_progress
        self.max_failures = max_consecutive_failures

    # -- planning
    def _source(self, req: Request) -> tuple[Version, Episode]:
        check_n(req.n)
        v = self.store.versions.get(req.version_id)
        ep = self.store.episodes.get(v.episode_id)
        n = len(self.engine.steps(v))
        can_go_on = not v.outcome.done and n < self.engine.max_steps(ep)
        last = n + 1 if can_go_on else n
        if not 1 <= req.k <= last:
            raise RolloutError(
                f"step {req.k} is out of range: version {version_name(self.store, v)} has {n} step(s), "
                f"so K must be between 1 and {last}"
            )
        return v, ep

    def groups_for(self, req: Request) -> tuple[list[RolloutGroup], list[str]]:
        """Open (or find) the groups a request samples: [resample] or [control, treatment].
        An edit is checked by making the first treatment rollout before anything else."""
        v, ep = self._source(req)
        config = rollout_config(self.store.versions.config(v.id), req.temperature, req.max_steps, req.settings)
        limit = config.max_steps or self.engine.max_steps(ep)
        room = req.k + (1 if req.edit is not None else 0)  # a treatment's edit may take step K itself
        if limit < room:
            raise RolloutError(f"the step limit ({limit}) leaves no room for rollouts from step {req.k}")
        warn = sampling_warning(config, req.n)
        warnings = [warn] if warn else []
        where = dict(episode_id=ep.id, source_version=v.id, step=req.k, config=config)
        if req.edit is None:
            return [rollouts.open_group(self.store, kind="resample", n=req.n, **where)], warnings
        if req.edit.kind not in EDIT_KINDS:
            raise RolloutError(f"unknown edit {req.edit.kind!r}")
        if req.edit.kind not in family(ep.task.env).edit_kinds:
            raise RolloutError(f"edit {req.edit.kind!r} does not apply to {family(ep.task.env).label} steps")
        known = rollouts.find_group(self.store, kind="treatment", edit=req.edit, **where)
        if known is None or 0 not in known.members:  # an invalid edit stops here: nothing is made
            with self.engine.locked(ep.id), self.store.transaction():
                treatment = rollouts.open_group(self.store, kind="treatment", edit=req.edit, n=req.n, **where)
                self._member(self.engine, treatment, 0)
        control = rollouts.open_group(self.store, kind="control", n=req.n, **where)
        treatment = rollouts.open_group(self.store, kind="treatment", edit=req.edit, n=req.n, **where)
        return [control, treatment], warnings

    @staticmethod
    def _make(engine: Engine, edit: RolloutEdit | None, version_id: int, k: int, config: AgentConfig) -> Version:
        """A rollout version; it never becomes the episode's current version."""
        if edit is None:
            return engine.editor.branch(version_id, k - 1, config=config, make_current=False)
        return engine.editor.edit(version_id, k, edit.kind, edit.text, config=config, make_current=False)

    @classmethod
    def _member(cls, engine: Engine, g: RolloutGroup, pos: int) -> int:
        """Rollout `pos` of the group: the version and its membership in one transaction,
        so a kill at any moment leaves both or neither (never an orphan branch)."""
        with engine.locked(g.episode_id), engine.store.transaction():
            vid = cls._make(engine, g.edit, g.source_version, g.step, g.config).id
            rollouts.add_member(engine.store, g.id, pos, vid)
        return vid

    # -- running
    def run(self, groups: Sequence[RolloutGroup]) -> RolloutRun:
        """Make and run the missing or unfinished rollouts of `groups` (interleaved, so a
        Stop or a failure leaves them balanced), then summarise each group."""
        jobs: list[_Job] = []
        for pos in range(max((g.n for g in groups), default=0)):
            for g in groups:
                vid = g.members.get(pos)
                if pos < g.n and (vid is None or not self.store.versions.get(vid).outcome.done):
                    jobs.append(_Job(g, pos, vid))
        errors: list[str] = []
        finished: list[JobResult] = []
        engines: dict[int, _WorkerEngine] = {}
        lock = threading.Lock()
        use_cache = all(g.n == 1 for g in groups)  # N > 1: every sample reaches the model

        def work(job: _Job) -> int:
            with lock:
                eng = engines.get(threading.get_ident())
                if eng is None:
                    eng = engines[threading.get_ident()] = _WorkerEngine(
                        self.store, job.group.config, self.engine.api_key, use_cache
                    )
            vid = job.version_id
            if vid is None:
                vid = self._member(eng, job.group, job.pos)
            report = eng.run(vid, should_stop=self.should_stop, watch=self.watch)
            if report.error:
                raise RolloutError(report.error)
            return vid

        def on_result(res: JobResult) -> None:
            finished.append(res)
            if not res.ok:
                errors.append(res.error or "failed")
            if self.on_progress:
                self.on_progress(len(finished), len(jobs))

        try:
            with attached(self.store):  # one writer for the workers' steps: group commits
                run_batch(
                    jobs,
                    work,
                    concurrency=self.concurrency,
                    stop=self.stop,
                    on_result=on_result,
                    max_consecutive_failures=self.max_failures,
                )
        except BatchAborted:
            pass  # the failures are in `errors`; finished rollouts are kept
        finally:
            for eng in engines.values():
                for episode_id in {g.episode_id for g in groups}:
                    eng.envs.forget_env(episode_id)
        stats = [group_stats(self.engine, rollouts.group(self.store, g.id)) for g in groups]
        return RolloutRun(stats, errors, stopped=self.stop.is_set() or self.should_stop())


def group_stats(engine: Engine, group: RolloutGroup) -> GroupStats:
    """The group's finished rollouts among its first N, and what each did first."""
    ep = engine.store.episodes.get(group.episode_id)
    versions, success, first = [], 0, Counter()
    for pos in range(group.n):
        vid = group.members.get(pos)
        if vid is None:
            continue
        v = engine.store.versions.get(vid)
        if not v.outcome.done:
            continue
        versions.append(vid)
        success += bool(v.outcome.success)
        regenerated = [s for s in engine.steps(v) if s.index >= group.step and s.call_ids]
        if regenerated:
            first[step_text(ep.task.env, regenerated[0])] += 1
    pending = group.n - len(versions)
    ranked = sorted(first.items(), key=lambda kv: (-kv[1], kv[0]))
    return GroupStats(group, versions, success, [{"text": t, "count": c} for t, c in ranked], pending)


def group_label(stats: GroupStats) -> str:
    """One line for a group node: 'resample @3: 7/10 success'."""
    return counts_label(stats.group, stats.n, stats.success, stats.pending)


def counts_label(group: RolloutGroup, finished: int, success: int, pending: int) -> str:
    """`group_label` from the group's counts alone."""
    edit = f" ({EDIT_WORDS.get(group.edit.kind, group.edit.kind)})" if group.edit else ""
    rest = f", {pending} unfinished" if pending else ""
    return f"{group.label}{edit}: {success}/{finished} success{rest}"


def version_groups(engine: Engine, episode_id: int) -> tuple[dict[int, int], dict[int, str]]:
    """(version id -> group id, group id -> label) for the episode's grouped versions: the labels
    from each group's counts (one query, `sessions.rollouts.finished_counts`), not from reading
    its members' steps, so a page or listing costs the same whatever a group holds."""
    counts = rollouts.finished_counts(engine.store, episode_id)
    labels = {}
    for g in rollouts.groups(engine.store, episode_id):
        finished, success = counts.get(g.id, (0, 0))
        labels[g.id] = counts_label(g, finished, success, g.n - finished)
    return rollouts.group_of_versions(engine.store, episode_id), labels


# ---------------------------------------------------------------------- entry points


def resample(engine: Engine, req: Request, **kw: Any) -> RolloutRun:
    """N rollouts that keep steps 1..K-1 and let the model write step K onwards."""
    runner = Rollouts(engine, **kw)
    gs, warnings = runner.groups_for(
        Request(req.version_id, req.k, req.n, req.temperature, req.max_steps, settings=req.settings)
    )
    out = runner.run(gs)
    out.warnings = warnings
    return out


def whatif(engine: Engine, req: Request, **kw: Any) -> tuple[Effect, RolloutRun]:
    """Control (as `resample`) and treatment (the edit at K, then the model) from the same
    state; the effect of the edit on the success rate."""
    if req.edit is None:
        raise RolloutError("a what-if needs an edit")
    runner = Rollouts(engine, **kw)
    gs, warnings = runner.groups_for(req)
    out = runner.run(gs)
    out.warnings = warnings
    return Effect(out.stats[0], out.stats[1]), out


@dataclass
class EpisodeWhatIf:
    """One episode of a batch what-if: its effect, or why it was skipped."""

    episode: int
    version: int
    k: int | None = None
    effect: Effect | None = None
    skipped: str | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"episode": self.episode, "version": self.version, "step": self.k}
        if self.effect is not None:
            out.update(self.effect.as_json())
        else:
            out["skipped"] = self.skipped
        return out


def resolve_at(engine: Engine, version_id: int, at: str) -> int | None:
    """`--at`: a step number K, or `first:REGEX` - the first step whose action or
    observation matches (None when no step does)."""
    if at.startswith("first:"):
        return first_match(engine.steps(engine.store.versions.get(version_id)), at[len("first:") :])
    if at.strip().isascii() and at.strip().isdigit() and len(at.strip()) <= 18:  # not `²`, not 5,000 digits
        return int(at)
    raise RolloutError(f"--at takes a step number K or first:REGEX (got {at[:40]!r})")


def experiment_versions(store: Store, ref: int | str, *, failed_only: bool = False) -> list[tuple[int, int]]:
    """(episode, version) of each task an experiment ran (its recorded version, else the
    episode's current one); `failed_only`: the finished ones that did not succeed."""
    exp = experiments.get(store, ref)
    out = []
    for item in experiments.items(store, exp.id):
        if item.episode_id is None or (failed_only and not (item.status == "done" and item.success is not True)):
            continue
        out.append((item.episode_id, item.version_id or store.episodes.get(item.episode_id).current_version))
    return out


def whatif_many(
    engine: Engine,
    items: Sequence[tuple[int, int]],
    at: str,
    edit: RolloutEdit,
    n: int,
    *,
    temperature: float | None = None,
    max_steps: int | None = None,
    settings: dict[str, Any] | None = None,
    on_episode: Callable[[EpisodeWhatIf], None] | None = None,
    **kw: Any,
) -> list[EpisodeWhatIf]:
    """The same edit on many (episode, version) pairs, each at step K or before the first
    step matching a pattern. A pair where the edit cannot apply is skipped with the reason;
    failing rollouts stop the batch (one line; what finished is kept)."""
    check_n(n)
    out: list[EpisodeWhatIf] = []
    for episode_id, version_id in items:
        item = EpisodeWhatIf(episode_id, version_id, resolve_at(engine, version_id, at))
        if item.k is None:
            item.skipped = f"no step matches {at[len('first:') :]!r}"
        else:
            try:
                item.effect, run = whatif(
                    engine, Request(version_id, item.k, n, temperature, max_steps, edit, settings or {}), **kw
                )
            except EngineError as exc:  # K out of range, or the edit does not apply there
                item.skipped = str(exc)
            else:
                if not run.stopped:  # (stopped: what failed meanwhile is the caller's to say)
                    run.check()
        out.append(item)
        if on_episode:
            on_episode(item)
        if kw.get("stop") is not None and (kw["stop"].is_set() or (kw.get("should_stop") or bool)()):
            break
    return out
