"""The ReAct loop, one step at a time, over the version tree. `Engine` is the one entry
point; it is composed of parts that live beside it: `agent.prompting` (`engine.prompts`: the
model and the prompt), `agent.environments` (`engine.envs`: live environments, restoring a
step's state), `agent.editing` (`engine.editor`: edits, branches, new settings),
`agent.version_paths` (`engine.paths`: a version's episode and steps, cached) and
`agent.engine_errors`, `agent.engine_reports` (errors; a step's and a run's reports),
`agent.step_parts` (a step's parts beside the model's reply) and `agent.episode_locks` (the
per-episode locks).

`Engine.step` builds the prompt (a pure function of config, exemplars, task and the
version's steps), calls the model, parses, executes the action in the environment, and
records the step with its model calls in one transaction. Edits branch the tree and never
touch an existing step. Before any step or edit the environment is put in exactly the
state of the version's last step: from an in-process state token, else from the step's
stored snapshot, else by replaying the recorded actions and checking every observation.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, ContextManager, Iterator

from agent.client import CallWatch
from agent.editing import Editor
from agent.engine_errors import EngineError, ModelCallFailed, StepCancelled, WriteBlocked
from agent.engine_reports import (
    FROZEN,
    QA_METHODS,
    RunReport,
    StepReport,
    _clean_text,
    _outcome_text,
    qa_method_of,
    version_name,
)
from agent.environments import EnvironmentPool
from agent.episode_locks import EpisodeLocks
from agent.prompting import PromptBuilder
from agent.run_settings import check_config
from agent.step_parts import _blocked, _ending, _run_report, _Turn, _typed_call, _with_message
from agent.version_paths import PATH_CACHE, VersionPaths
from envs.base import EnvError, Environment, StepResult
from envs.registry import family
from sessions.connection import Fence, FenceLost
from sessions.store import Store, StoreError, VersionChanged, VersionFrozen
from sessions.writer import write
from trajectory import signals
from trajectory.records import AgentConfig, EditInfo, Episode, ModelCall, Step, Task, ToolCall, Version

__all__ = [
    "FROZEN",
    "PATH_CACHE",
    "QA_METHODS",
    "Engine",
    "EngineError",
    "ModelCallFailed",
    "RunReport",
    "StepCancelled",
    "StepReport",
    "WriteBlocked",
    "qa_method_of",
]


class Engine:
    """Steps, runs and edits versions stored in `store`. Keeps environments alive across
    calls (the UI holds one Engine per process), so resuming a visited step is cheap.

    Made of parts that receive what they use: `paths` (a version's episode and steps,
    cached), `envs` (the environment pool), `prompts` (the prompt builder and the model
    call) and `editor` (edits and branches); the Engine itself steps and runs.

    Thread-safe per episode: environment and database work on an episode runs under that
    episode's lock, never the model call (the append is compare-and-set on the leaf, so a
    step whose version moved while it waited for the model fails cleanly)."""

    def __init__(
        self,
        store: Store,
        *,
        api_key: str | None = None,
        client_factory: Callable[[AgentConfig], Any] | None = None,
        max_live_envs: int = 8,
        on_retry: Callable[[int, str], None] | None = None,
    ):
        self.store = store
        self.api_key = api_key
        self._signal_states = signals.PathStates()
        self._locks = EpisodeLocks()  # kept only while held
        self._fences: dict[int, Fence] = {}  # episode id: what its writes must still hold (`fenced`)
        self.paths = VersionPaths(store)
        self.envs = EnvironmentPool(store, self._locks, self.paths, max_live=max_live_envs)
        self.prompts = PromptBuilder(
            store, self.paths, self.envs.model_config, api_key=api_key, client_factory=client_factory, on_retry=on_retry
        )
        self.editor = Editor(
            store,
            self._locks,
            self.paths,
            self.envs,
            execute=self._execute,
            max_steps=self.max_steps,
            revision_of=self.prompts.revision_of,
        )

    @contextlib.contextmanager
    def fenced(self, episode_id: int, fence: Fence) -> Iterator[None]:
        """While the block runs, every write the engine makes for the episode checks `fence`
        (an experiment item's claim) in its own transaction: a step in the statement that
        moves the version's leaf, the calls and error of a failed step in theirs. A fence
        that no longer holds raises its `lost()` (FenceLost) and nothing is written."""
        self._fences[episode_id] = fence
        try:
            yield
        finally:
            self._fences.pop(episode_id, None)

    def _fenced(self, episode_id: int) -> ContextManager[Any]:
        """One transaction for the block's writes, its fence checked first (none: no transaction)."""
        fence = self._fences.get(episode_id)
        if fence is None:
            return contextlib.nullcontext()
        return _fenced_tx(self.store, fence)

    def record_calls(self, episode_id: int, calls: list[ModelCall]) -> None:
        """Record model calls whose step was not taken (fenced as the episode's steps are)."""
        with self._fenced(episode_id):
            self.store.calls.record(episode_id, calls)

    def locked(self, episode_id: int) -> ContextManager[Any]:
        """The episode's lock, for a caller that makes several engine calls one transaction
        (take it before `store.transaction()`, as the engine does)."""
        return self._locked(episode_id)

    def _locked(self, episode_id: int) -> ContextManager[Any]:
        """The episode's lock: held around its environment and database work."""
        return self._locks.hold(episode_id)

    # ------------------------------------------------------------------ episodes
    def start_episode(
        self, task: Task, config: AgentConfig, env_options: dict | None = None, name: str | None = None
    ) -> tuple[Episode, Version]:
        """A new episode and its first version, its environment started for the first step.
        Raises EnvError (unknown environment, a task these settings cannot start), ConfigError or
        EngineError (an unknown exemplar set) before anything is written."""
        family(task.env)  # unknown env -> EnvError before anything is written
        check_config(config, task.env, self.store)  # ConfigError before anything is written
        rev = self.prompts.revision_of(config.exemplar_set, task.env)  # so is an unknown exemplar set
        env = self.envs.start(task, env_options or {})  # so is a task these settings cannot start
        # the first version's prompts use the set (or the built-in exemplars) as it is now
        episode, version = self.store.episodes.create(task, config, env_options or {}, name, exemplar_rev=rev)
        self.paths.remember_revision(version, rev)
        self.envs.adopt(episode.id, env)  # the first step uses the environment just started
        return episode, version

    def max_steps(self, episode: Episode) -> int:
        """The episode's step limit: its config's, else its environment family's default."""
        return episode.config.max_steps or family(episode.task.env).default_max_steps

    def steps(self, version: Version) -> list[Step]:
        """The version's path (cached by leaf: `paths.steps`)."""
        return self.paths.steps(version)

    # ------------------------------------------------------------------ stepping
    def _begin(self, version_id: int, episode_id: int | None = None, known: Version | None = None):
        """Under the episode's lock: the version, its episode (pinned config), its steps,
        and the environment after them (a replay mismatch shows before any model call).
        None if the version is not of `episode_id` (the lock held is not its episode's).
        `known`: the version's row as the caller just read it (not read again; the leaf
        is compare-and-set at the record either way)."""
        options = None
        if known is not None and known.id == version_id:
            v = known
        else:
            v, options = self.store.versions.with_env_options(version_id)
        if episode_id is not None and v.episode_id != episode_id:
            return None
        ep = self.paths.episode(v, options)
        if v.outcome.done:
            raise EngineError(
                f"version {version_name(self.store, v)} is finished ({_outcome_text(v.outcome)}); edit or branch it to go on"
            )
        steps = self.steps(v)
        if len(steps) >= self.max_steps(ep):
            raise EngineError(
                f"version {version_name(self.store, v)} has reached its step limit ({self.max_steps(ep)})"
            )
        return v, ep, steps, self.envs.restore(ep, steps)

    def step(self, version_id: int, *, watch: CallWatch | None = None, known: Version | None = None) -> StepReport:
        """One model step (ALFWorld: one line; Wikipedia: Thought/Action/Observation).
        Prepare (locked), call the model (unlocked), execute and record (locked). `watch`
        reports retries and can cancel the step while its model call is in flight.
        `known`: the version's row as the caller just read it (`run`'s first step).
        Raises StepCancelled when `watch` cancelled it (the calls made are recorded, no step)."""
        eid = self.paths.episode_id(version_id)
        with self._locks.hold(eid):  # (the hot path takes the lock itself, not through `_locked`)
            self.prompts.take_kept_calls()  # answers an earlier blocked write kept: the next attempt uses them
            began = self._begin(version_id, eid, known)
            if began is None:  # a deleted version's id reused in another episode: take its lock
                self.paths.forget_episode(version_id)
                return self.step(version_id, watch=watch)
            v, ep, steps, _ = began
            self.envs.model_config(ep)  # an unconfirmed imported endpoint: one line before anything
            rev = self.prompts.pin_exemplars(v, ep, self._fences.get(ep.id))
        calls: list[ModelCall] = []
        source, edit = ("human", v.draft_edit) if v.draft_thought is not None else ("model", None)
        try:
            thought, action, extra = self.prompts.ask(ep, steps, rev, v.draft_thought, calls, watch)
        except ModelCallFailed as exc:
            with self._locks.hold(ep.id), self._fenced(ep.id):  # (a claim taken over meanwhile: nothing written)
                if calls:
                    self.store.calls.record(ep.id, calls)
                if not isinstance(exc, StepCancelled):
                    try:
                        self.store.versions.update(v.id, error=str(exc))
                    except VersionFrozen:  # frozen meanwhile: its record never changes; the error is raised
                        pass
            raise
        with self._locks.hold(ep.id), self.store.blobs.deferred():  # pages fetched commit with the step
            if watch is not None and watch.cancel.is_set():  # Stop came while the answer was on its way
                self.record_calls(ep.id, calls)
                raise StepCancelled("step cancelled; the model's answer was not used", calls[-1] if calls else None)
            env = self.envs.restore(ep, steps)
            new = self._execute(
                ep,
                env,
                steps,
                thought,
                action,
                source=source,
                edit=edit,
                call_ids=[-(n + 1) for n in range(len(calls))],
            )
            if extra:  # a conversation style's reasoning, tool call, raw message, parse error
                new = _with_message(new, extra)
            return self._record(v, ep, steps, [new], calls, clear_draft=v.draft_thought is not None)

    def answer(
        self, version_id: int, thought: str | None, answer: str, calls: list[ModelCall], *, info: dict | None = None
    ) -> StepReport:
        """Record a Standard / CoT answer (experiments) as one model step - the thought and
        `Finish[answer]`, scored by the environment - with the calls that produced it.
        Raises EngineError for an environment without text answers."""
        with self._locked(self.store.versions.get(version_id).episode_id):
            v, ep, steps, env = self._begin(version_id)
            fam = family(ep.task.env)
            if fam.qa is None:
                raise EngineError(f"Standard and CoT answers are for text-answer tasks, not {fam.label}")
            ids = [-(n + 1) for n in range(len(calls))]
            new = self._execute(ep, env, steps, thought, fam.qa.answer_action(answer), source="model", call_ids=ids)
            if info:
                new = new.model_copy(update={"info": {**new.info, **info}})
            return self._record(v, ep, steps, [new], calls, clear_draft=False)

    def human_step(self, version_id: int, *, thought: str | None = None, action: str | None = None) -> StepReport:
        """Human agent mode: a person writes the next turn (how new exemplars are authored).
        ALFWorld: a thought and/or an action (two turns when both). Wikipedia: an action,
        with an optional thought (the version's pending thought is used when none is given).
        Raises EngineError when neither a thought nor an action is given."""
        thought = _clean_text(thought, "thought", allow_none=True)
        action = _clean_text(action, "action", allow_none=True)
        if thought is None and action is None:
            raise EngineError("write a thought or an action")
        with self._locked(self.store.versions.get(version_id).episode_id):
            return self._human_step(version_id, thought, action)

    def _human_step(self, version_id: int, thought: str | None, action: str | None) -> StepReport:
        v, ep, steps, env = self._begin(version_id)
        tr = family(ep.task.env).transcript
        action, call = _typed_call(tr, action)
        new: list[Step] = []
        if tr.thoughts_are_turns:
            thoughts = [thought] if thought is not None else []
            if action is not None and tr.split_thought(action) is not None:  # "think: X" is a thought turn
                thoughts.append(tr.split_thought(action))
                action = None
            for t in thoughts:
                new.append(self._execute(ep, env, steps + new, t, None, source="human"))
            if action is not None:
                if len(steps) + len(new) >= self.max_steps(ep) or (new and new[-1].done):
                    raise EngineError("no room for the action: the step limit is reached")
                new.append(self._execute(ep, env, steps + new, None, action, source="human"))
        else:
            if action is None:
                raise EngineError(f"in the {family(ep.task.env).label} format a step needs an action")
            if thought is None and v.draft_thought is not None:
                thought = v.draft_thought
            if ep.config.style == "act":
                thought = None
            new.append(self._execute(ep, env, steps, thought, action, source="human", edit=v.draft_edit))
        if call is not None and ep.config.api_style == "tools" and new and new[-1].action is not None:
            new[-1] = new[-1].model_copy(
                update={"tool_call": ToolCall(id=f"call_{new[-1].index}", name=call[0], arguments=call[1])}
            )
        return self._record(v, ep, steps, new, [], clear_draft=v.draft_thought is not None)

    def _execute(
        self,
        ep: Episode,
        env: Environment,
        earlier: list[Step],
        thought: str | None,
        action: str | None,
        *,
        source: str,
        edit: EditInfo | None = None,
        call_ids: list[int] | None = None,
    ) -> Step:
        transcript = family(ep.task.env).transcript
        command = transcript.command(thought, action)
        known = env.admissible_actions() if action is not None else None  # what the env knew before it
        self.envs.live(ep.id).at = None  # the env moves: it names no recorded step until the commit
        try:
            res: StepResult = env.step(command)
        except EnvError:
            raise
        except Exception as exc:  # an environment bug must not lose the version: say what failed
            raise EngineError(f"the environment failed on {command[:80]!r}: {exc}") from exc
        state = self._signal_states.after(earlier, transcript.signals, ep.task.text)
        return Step(  # (the signals read only the action and observation: the step is built once)
            index=len(earlier) + 1,
            thought=thought,
            action=action,
            observation=res.observation,
            done=res.done,
            reward=res.reward,
            info=res.info,
            source=source,
            edit=edit,
            call_ids=call_ids or [],
            snapshot=env.snapshot(),
            signals=state.signals(_Turn(action, res.observation), known),
        )

    def _record(
        self, v: Version, ep: Episode, steps: list[Step], new: list[Step], calls: list[ModelCall], *, clear_draft: bool
    ) -> StepReport:
        """Append compare-and-set on the leaf the steps were computed from; a frozen version
        gets a new child at that leaf instead (same transaction). Only after the commit does
        the live environment name the new leaf again."""
        live = self.envs.live(ep.id)
        outcome, status = _ending(ep, new[-1], len(steps) + len(new), lambda: self.max_steps(ep), live.env)
        leaf = steps[-1] if steps else None

        fence = self._fences.get(ep.id)  # (an experiment item's claim: checked as the leaf moves)

        def append(target: Version) -> tuple[list[Step], Version]:
            return self.store.versions.append(
                target.id,
                new,
                calls,
                status=status,
                outcome=outcome,
                error=None,
                clear_draft=clear_draft,
                expected_leaf=leaf.id if leaf else None,
                known=target,
                fence=fence,
            )

        def record() -> tuple[Version, str | None, list[Step], Version]:
            try:  # the store's trigger refuses a frozen version: then it goes on in a child (one transaction)
                return (v, None, *append(v))
            except VersionFrozen:
                with self.store.transaction():
                    frozen = self.editor.frozen_reason(v.id)
                    if frozen is None:
                        raise
                    target = self.editor.continuation(v, leaf)
                    return (target, frozen, *append(target))

        try:  # on the store's writer when the runner has one: reported once its group committed
            target, frozen, rows, v2 = write(self.store, record)
        except VersionChanged:
            if calls:  # nothing about a call is lost, even when its step is
                self.record_calls(ep.id, calls)
            raise
        except FenceLost:  # the item's claim was taken over while the step was computed: nothing of it lands
            raise
        except StoreError as exc:  # blocked (a write lock held too long, disk full): keep the paid answers
            live.at = None  # the env moved past the recorded leaf
            if not calls:
                raise
            raise _blocked(exc, self.store.calls.keep_pending(ep.id, calls)) from None
        live.tokens[rows[-1].id] = live.env.state()  # the env is after the last new step
        live.at = rows[-1].id
        self.paths.remember(target.id, v2.leaf_step_id, steps + rows)
        return StepReport(version=v2, steps=rows, calls=calls, frozen=frozen, continued_from=v.id if frozen else None)

    def run(
        self,
        version_id: int,
        *,
        max_steps: int | None = None,
        should_stop: Callable[[], bool] | None = None,
        on_step: Callable[[StepReport], None] | None = None,
        watch: CallWatch | None = None,
        known: Version | None = None,
    ) -> RunReport:
        """Step until done, the step limit, `max_steps` new steps, an error, or Stop. A
        frozen version goes on in a new child version; the report names it. `watch`
        (a job's) cancels the model call in flight at Stop: that step is not taken.
        `known`: the version's row as the caller just read it (not read again)."""
        added, stopped, error, continued_from, vid = 0, False, None, None, version_id
        v = known if known is not None and known.id == vid else self.store.versions.get(vid)
        self.paths.know_episode(vid, v.episode_id)  # (its first step need not read it again)
        first: Version | None = v
        while not v.outcome.done:
            if max_steps is not None and added >= max_steps:
                break
            if should_stop and should_stop():
                stopped = True
                break
            try:
                rep, first = self.step(vid, watch=watch, known=first), None
            except StepCancelled:
                stopped = True
                break
            except (WriteBlocked, FenceLost):  # a blocked writer stops the command (exit 2), its answer kept;
                raise  # a claim taken over stops the item, nothing written
            except (EngineError, EnvError, StoreError) as exc:
                error = str(exc)
                break
            added += len(rep.steps)
            if rep.frozen and continued_from is None:
                continued_from = vid
            v, vid = rep.version, rep.version.id
            if on_step:
                on_step(rep)
        try:
            if not v.outcome.done:  # a finished last step's version is the row it just wrote
                v = self.store.versions.get(vid)
            if stopped and not v.outcome.done and self.editor.frozen_reason(vid) is None:  # frozen: never changes
                v = self.store.versions.update(vid, status="stopped")
        except VersionFrozen:  # frozen meanwhile: it keeps its status
            pass
        except StoreError as exc:  # the report still says how far the run got
            error = error or str(exc)
        return _run_report(v, len(self.steps(v)), added, stopped, error, continued_from)


@contextlib.contextmanager
def _fenced_tx(store: Store, fence: Fence) -> Iterator[None]:
    """One transaction whose first act is `fence.check` (Engine._fenced)."""
    with store.transaction():
        fence.check(store.db)
        yield
