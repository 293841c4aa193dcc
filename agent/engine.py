"""The ReAct loop, one step at a time, over the version tree. `Engine` is the one entry
point; its parts live beside it: `agent.prompting` (the model and the prompt),
`agent.environments` (live environments, restoring a step's state), `agent.editing`
(edits, branches, new settings) and `agent.engine_records` (errors, reports, helpers).

`Engine.step` builds the prompt (a pure function of config, exemplars, task and the
version's steps), calls the model, parses, executes the action in the environment, and
records the step with its model calls in one transaction. Edits branch the tree and never
touch an existing step. Before any step or edit the environment is put in exactly the
state of the version's last step: from an in-process state token, else from the step's
stored snapshot, else by replaying the recorded actions and checking every observation.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, ContextManager

from agent.client import CallWatch
from agent.editing import EditingMixin
from agent.engine_records import (FROZEN, PATH_CACHE, QA_METHODS, EngineError, EpisodeLocks, ModelCallFailed, RunReport,
                                  StepCancelled, StepReport, WriteBlocked, _clean_text, _Live, _outcome, _outcome_text,
                                  qa_method_of, version_name)
from agent.environments import EnvironmentsMixin
from agent.prompting import PromptingMixin
from agent.run_settings import check_config
from envs.base import EnvError, Environment, StepResult
from envs.registry import family
from sessions.store import Store, StoreError, VersionChanged, VersionFrozen
from trajectory import signals
from trajectory.kinds import ModelRequest
from trajectory.records import AgentConfig, EditInfo, Episode, ModelCall, Outcome, Step, Task, Version, env_only

__all__ = ["FROZEN", "PATH_CACHE", "QA_METHODS", "Engine", "EngineError", "ModelCallFailed", "RunReport",
           "StepCancelled", "StepReport", "WriteBlocked", "qa_method_of"]



VERSION_EPISODE_CACHE = 65_536  # version ids whose episode the engine remembers

class Engine(PromptingMixin, EnvironmentsMixin, EditingMixin):
    """Steps, runs and edits versions stored in `store`. Keeps environments alive across
    calls (the UI holds one Engine per process), so resuming a visited step is cheap.

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
        self.on_retry = on_retry  # (attempt, reason) before each retry of a model call
        self.api_key = api_key
        self._client_factory = client_factory
        self._clients: dict[str, Any] = {}
        self._live: OrderedDict[int, _Live] = OrderedDict()  # least recently used first
        self._max_live = max_live_envs
        self._paths: OrderedDict[int, tuple[int | None, list[Step]]] = OrderedDict()
        self._signal_states = signals.PathStates()
        self._guard = threading.Lock()  # the caches
        self._locks = EpisodeLocks()  # kept only while held
        self._version_episode: dict[int, int] = {}  # version id -> episode id (fixed at creation; bounded)
        self._pinned: OrderedDict[tuple[int, str], Episode] = OrderedDict()  # (version, created_at) -> its episode
        self._kept: dict[int, list[ModelCall]] = {}  # episode -> paid answers a blocked write kept, not used yet

    def locked(self, episode_id: int) -> ContextManager[Any]:
        """The episode's lock, for a caller that makes several engine calls one transaction
        (take it before `store.transaction()`, as the engine does)."""
        return self._locked(episode_id)

    def _locked(self, episode_id: int) -> ContextManager[Any]:
        """The episode's lock: held around its environment and database work."""
        return self._locks.hold(episode_id)

    def _episode(self, v: Version) -> Episode:
        """The version's episode, with the config the version pinned. The task and a
        version's pinned config never change: they are read and validated once per version
        (keyed with its creation time, as a deleted version's id may be reused); the
        environment options, which a confirm or re-point changes, are read every time."""
        key = (v.id, v.created_at)
        with self._guard:
            ep = self._pinned.get(key)
            if ep is not None:
                self._pinned.move_to_end(key)
        if ep is None:
            ep = self.store.episodes.get(v.episode_id).model_copy(update={"config": self.store.versions.config(v.id)})
            with self._guard:
                self._pinned[key] = ep
                while len(self._pinned) > PATH_CACHE:
                    self._pinned.popitem(last=False)
            return ep.model_copy()
        return ep.model_copy(update={"env_options": self.store.episodes.env_options(v.episode_id)})

    # ------------------------------------------------------------------ episodes
    def start_episode(
        self, task: Task, config: AgentConfig, env_options: dict | None = None, name: str | None = None
    ) -> tuple[Episode, Version]:
        family(task.env)  # unknown env -> EnvError before anything is written
        check_config(config, task.env, self.store)  # ConfigError before anything is written
        rev = self._revision_of(config.exemplar_set)  # so is an unknown exemplar set
        env = self._started_env(task, env_options or {})  # so is a task these settings cannot start
        episode, version = self.store.episodes.create(task, config, env_options or {}, name)
        if rev is not None:  # the first version's prompts use the set as it is now
            self.store.versions.pin_exemplar_revision(version.id, rev)
        with self._guard:  # the first step uses the environment just started
            self._live[episode.id] = _Live(env=env, at=0, tokens={0: env.state()})
            old = self._evict(keep=episode.id)
        for x in old:
            x.env.close()
        return episode, version

    def _started_env(self, task: Task, env_options: dict) -> Environment:
        """The task's environment, reset: a game that cannot start with these options (e.g.
        a wording its grammar lacks) is one line before an episode is written."""
        env = None
        try:
            env = family(task.env).make_env(task, env_only(env_options), self.store.blobs)
            env.reset(task)
            return env
        except EnvError:
            raise
        except Exception as exc:
            if env is not None:
                env.close()
            raise EnvError(f"cannot start task {task.id!r} with these settings "
                           f"({type(exc).__name__}: {str(exc)[:120]})") from None

    def max_steps(self, episode: Episode) -> int:
        return episode.config.max_steps or family(episode.task.env).default_max_steps

    # ------------------------------------------------------------------ reading
    def steps(self, version: Version) -> list[Step]:
        """The version's path, cached by leaf so a long run does not re-read it each step."""
        with self._guard:
            cached = self._paths.get(version.id)
            if cached and cached[0] == version.leaf_step_id:
                self._paths.move_to_end(version.id)
                return cached[1]
        steps = self.store.versions.path(version.leaf_step_id)
        self._remember_path(version.id, version.leaf_step_id, steps)
        return steps

    def _remember_path(self, version_id: int, leaf: int | None, steps: list[Step]) -> None:
        with self._guard:
            self._paths[version_id] = (leaf, steps)
            self._paths.move_to_end(version_id)
            while len(self._paths) > PATH_CACHE:
                self._paths.popitem(last=False)

    # ------------------------------------------------------------------ stepping
    def _episode_of(self, version_id: int) -> int:
        """The version's episode id (never changes: cached, so a step reads its version once)."""
        eid = self._version_episode.get(version_id)
        if eid is None:
            if len(self._version_episode) >= VERSION_EPISODE_CACHE:  # a long-lived app: bounded, refilled on use
                self._version_episode.clear()
            eid = self._version_episode[version_id] = self.store.versions.get(version_id).episode_id
        return eid

    def _begin(self, version_id: int, episode_id: int | None = None):
        """Under the episode's lock: the version, its episode (pinned config), its steps,
        and the environment after them (a replay mismatch shows before any model call).
        None if the version is not of `episode_id` (the lock held is not its episode's)."""
        v = self.store.versions.get(version_id)
        if episode_id is not None and v.episode_id != episode_id:
            return None
        ep = self._episode(v)
        if v.outcome.done:
            raise EngineError(f"version {version_name(self.store, v)} is finished ({_outcome_text(v.outcome)}); edit or branch it to go on")
        steps = self.steps(v)
        if len(steps) >= self.max_steps(ep):
            raise EngineError(f"version {version_name(self.store, v)} has reached its step limit ({self.max_steps(ep)})")
        return v, ep, steps, self._env_at(ep, steps)

    def step(self, version_id: int, *, watch: CallWatch | None = None) -> StepReport:
        """One model step (ALFWorld: one line; Wikipedia: Thought/Action/Observation).
        Prepare (locked), call the model (unlocked), execute and record (locked). `watch`
        reports retries and can cancel the step while its model call is in flight."""
        eid = self._episode_of(version_id)
        with self._locked(eid):
            self._take_kept_calls()  # answers an earlier blocked write kept: the next attempt uses them
            began = self._begin(version_id, eid)
            if began is None:  # a deleted version's id reused in another episode: take its lock
                self._version_episode.pop(version_id, None)
                return self.step(version_id, watch=watch)
            v, ep, steps, _ = began
            self.model_config(ep)  # an unconfirmed imported endpoint: one line before anything
            rev = self._pin_exemplars(v, ep)
        calls: list[ModelCall] = []
        source, edit = ("human", v.draft_edit) if v.draft_thought is not None else ("model", None)
        try:
            thought, action = self._ask(ep, steps, rev, v.draft_thought, calls, watch)
        except ModelCallFailed as exc:
            with self._locked(ep.id):
                if calls:
                    self.store.calls.record(ep.id, calls)
                if not isinstance(exc, StepCancelled):
                    try:
                        self.store.versions.update(v.id, error=str(exc))
                    except VersionFrozen:  # frozen meanwhile: its record never changes; the error is raised
                        pass
            raise
        with self._locked(ep.id), self.store.blobs.deferred():  # pages fetched commit with the step
            if watch is not None and watch.cancel.is_set():  # Stop came while the answer was on its way
                self.store.calls.record(ep.id, calls)
                raise StepCancelled("step cancelled; the model's answer was not used", calls[-1] if calls else None)
            env = self._env_at(ep, steps)
            new = self._execute(ep, env, steps, thought, action, source=source, edit=edit,
                                call_ids=[-(n + 1) for n in range(len(calls))])
            return self._record(v, ep, steps, [new], calls, clear_draft=v.draft_thought is not None)

    def _ask(self, ep: Episode, steps: list[Step], rev: int | None, draft: str | None, calls: list[ModelCall],
             watch: CallWatch | None) -> tuple[str | None, str | None]:
        """(thought, action) from the model: the transcript's request, and any follow-up
        it asks for (the paper's action-only fallback)."""
        req: ModelRequest | None = self._request(ep, steps, rev, draft)
        transcript = family(ep.task.env).transcript
        while req is not None:
            text = self._complete(ep, req.prompt, req.stop, calls, purpose=req.purpose, chat=req.chat, watch=watch)
            reply = transcript.parse(req, text)
            req = reply.then
        return reply.thought, reply.action

    def answer(
        self, version_id: int, thought: str | None, answer: str, calls: list[ModelCall], *, info: dict | None = None
    ) -> StepReport:
        """Record a Standard / CoT answer (experiments) as one model step - the thought and
        `Finish[answer]`, scored by the environment - with the calls that produced it."""
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
        with an optional thought (the version's pending thought is used when none is given)."""
        thought = _clean_text(thought, "thought", allow_none=True)
        action = _clean_text(action, "action", allow_none=True)
        if thought is None and action is None:
            raise EngineError("write a thought or an action")
        with self._locked(self.store.versions.get(version_id).episode_id):
            return self._human_step(version_id, thought, action)

    def _human_step(self, version_id: int, thought: str | None, action: str | None) -> StepReport:
        v, ep, steps, env = self._begin(version_id)
        tr = family(ep.task.env).transcript
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
        self._live[ep.id].at = None  # the env moves: it names no recorded step until the commit
        try:
            res: StepResult = env.step(command)
        except EnvError:
            raise
        except Exception as exc:  # an environment bug must not lose the version: say what failed
            raise EngineError(f"the environment failed on {command[:80]!r}: {exc}") from exc
        step = Step(
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
        )
        state = self._signal_states.after(earlier, transcript.signals, ep.task.text)
        return step.model_copy(update={"signals": state.signals(step, known)})

    def _record(
        self, v: Version, ep: Episode, steps: list[Step], new: list[Step], calls: list[ModelCall], *, clear_draft: bool
    ) -> StepReport:
        """Append compare-and-set on the leaf the steps were computed from; a frozen version
        gets a new child at that leaf instead (same transaction). Only after the commit does
        the live environment name the new leaf again."""
        live = self._live[ep.id]
        total = len(steps) + len(new)
        outcome = None
        status = "open"  # a resumed "stopped" version is running again
        last = new[-1]
        if last.done:
            outcome = _outcome(ep.task.env, last.reward, last.info, True)
            status = "done"
        elif total >= self.max_steps(ep):
            outcome, status = self._give_up(ep, live.env, last), "done"
        leaf = steps[-1] if steps else None
        try:
            with self.store.transaction():
                target, frozen = v, self.frozen_reason(v.id)
                if frozen:
                    target = self._continuation(v, leaf)
                rows, v2 = self.store.versions.append(
                    target.id, new, calls, status=status, outcome=outcome, error=None, clear_draft=clear_draft,
                    expected_leaf=leaf.id if leaf else None, known=target,
                )
        except VersionChanged:
            if calls:  # nothing about a call is lost, even when its step is
                self.store.calls.record(ep.id, calls)
            raise
        except StoreError as exc:  # blocked (a write lock held too long, disk full): keep the paid answers
            live.at = None  # the env moved past the recorded leaf
            if not calls:
                raise
            kept = self.store.calls.keep_pending(ep.id, calls)
            raise WriteBlocked(f"{exc}; the model's answer was {'kept: the next attempt uses it' if kept else 'lost'}"
                               ) from None
        live.tokens[rows[-1].id] = live.env.state()  # the env is after the last new step
        live.at = rows[-1].id
        self._remember_path(target.id, v2.leaf_step_id, steps + rows)
        return StepReport(version=v2, steps=rows, calls=calls, frozen=frozen,
                          continued_from=v.id if frozen else None)

    def _give_up(self, ep: Episode, env: Environment, last: Step) -> Outcome:
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

    def run(
        self,
        version_id: int,
        *,
        max_steps: int | None = None,
        should_stop: Callable[[], bool] | None = None,
        on_step: Callable[[StepReport], None] | None = None,
        watch: CallWatch | None = None,
    ) -> RunReport:
        """Step until done, the step limit, `max_steps` new steps, an error, or Stop. A
        frozen version goes on in a new child version; the report names it. `watch`
        (a job's) cancels the model call in flight at Stop: that step is not taken."""
        added, stopped, error, continued_from = 0, False, None, None
        vid = version_id
        v = self.store.versions.get(vid)
        self._version_episode.setdefault(vid, v.episode_id)  # (its first step need not read it again)
        while not v.outcome.done:
            if max_steps is not None and added >= max_steps:
                break
            if should_stop and should_stop():
                stopped = True
                break
            try:
                rep = self.step(vid, watch=watch)
            except StepCancelled:
                stopped = True
                break
            except WriteBlocked:  # a blocked writer stops the command (exit 2), its answer kept
                raise
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
            if stopped and not v.outcome.done and self.frozen_reason(vid) is None:  # frozen: never changes
                v = self.store.versions.update(vid, status="stopped")
        except VersionFrozen:  # frozen meanwhile: it keeps its status
            pass
        except StoreError as exc:  # the report still says how far the run got
            error = error or str(exc)
        return RunReport(
            episode=v.episode_id,
            version=v.id,
            done=v.outcome.done,
            success=v.outcome.success,
            steps=len(self.steps(v)),
            added=added,
            stopped=stopped,
            error=error,
            continued_from=continued_from,
        )



