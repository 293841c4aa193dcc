"""The ReAct loop, one step at a time, over the version tree.

`Engine.step` builds the prompt (a pure function of config, exemplars, task and the
version's steps), calls the model, parses, executes the action in the environment, and
records the step with its model calls in one transaction. Edits branch the tree and never
touch an existing step. Before any step or edit the environment is put in exactly the
state of the version's last step: from an in-process state token, else from the step's
stored snapshot, else by replaying the recorded actions and checking every observation.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import ValidationError

from agent import exemplars as ex
from trajectory import formats as fmt
from trajectory import signals as sig
from trajectory.answer_formats import qa_prompt
from agent.client import CallWatch, ModelClient, ModelError, public_url
from agent.run_settings import check_config
from envs.base import EnvError, Environment, ReplayMismatch, StepResult
from envs.registry import family
from trajectory.records import (MAX_TEXT, UNCONFIRMED_ENDPOINT, UNCONFIRMED_REFS, AgentConfig, EditInfo, Episode,
                                ModelCall, Outcome, Step, Task, Version, env_only)
from sessions import annotations as ann
from sessions import exemplar_sets as sets
from sessions.store import Store, StoreError, VersionChanged

PATH_CACHE = 256  # versions whose paths the engine keeps in memory
FROZEN = {"annotated": "annotated", "exemplar": "used by an exemplar set", "child": "it has a child version"}


QA_METHODS = ("standard", "cot", "cot-sc")


def qa_method_of(v: Version, steps: list[Step]) -> str | None:
    """The Standard / CoT method a version answers with: its answer step says so; an
    unanswered version is known by the phase name an experiment gave it."""
    if steps:
        method = steps[-1].info.get("method") if len(steps) == 1 else None
        return method if method in QA_METHODS else None
    return v.name if v.name in QA_METHODS else None


class EngineError(Exception):
    """A user-facing problem with a step, an edit or a run (one line)."""


class ModelCallFailed(EngineError):
    def __init__(self, message: str, call: ModelCall | None = None):
        super().__init__(message)
        self.call = call


class WriteBlocked(StoreError):
    """A step's model answer came back but the database refused the write (one line; the
    answer is kept beside the database and recorded by the next writer)."""


class StepCancelled(ModelCallFailed):
    """The caller cancelled the step (Stop in the UI): nothing was added to the version."""


@dataclass
class StepReport:
    """What one `Engine.step` added."""

    version: Version  # where the steps went: the stepped version, or its new child
    steps: list[Step]
    calls: list[ModelCall] = field(default_factory=list)
    frozen: str | None = None  # why the stepped version could not grow (a FROZEN key)
    continued_from: int | None = None  # the frozen version the new child continues

    @property
    def done(self) -> bool:
        return self.version.outcome.done

    @property
    def notice(self) -> str | None:
        """The line a face shows when the steps went to a new child version."""
        if self.frozen is None:
            return None
        return f"version {self.continued_from} is frozen ({FROZEN[self.frozen]}); continuing in new version {self.version.id}"


@dataclass
class RunReport:
    episode: int
    version: int
    done: bool
    success: bool | None
    steps: int  # steps in the version after the run
    added: int = 0
    stopped: bool = False
    error: str | None = None
    continued_from: int | None = None  # set when the run went on in a new child of a frozen version

    def as_json(self) -> dict[str, Any]:
        out = {"episode": self.episode, "version": self.version, "done": self.done, "success": self.success, "steps": self.steps}
        if self.continued_from is not None:
            out["continued_from"] = self.continued_from
        if self.error:
            out["error"] = self.error
        return out


@dataclass
class _Live:
    """An environment instance kept alive for one episode, with state tokens per step."""

    env: Environment
    at: int | None = None  # id of the step the env is after (0 = just reset)
    tokens: dict[int, Any] = field(default_factory=dict)


CHAT_INSTRUCTIONS = {
    "alfworld": "Continue the transcript above: reply with only the next command after '>' "
    "(one line: an action such as 'go to fridge 1', or 'think: ...').",
    "react": "Continue the transcript above: reply with exactly the next step, "
    "'Thought {i}: ...' then on a new line 'Action {i}: ...', and nothing else.",
    "act": "Continue the transcript above: reply with exactly the next action, 'Action {i}: ...', and nothing else.",
    "action": "Continue the transcript above: reply with only the action for step {i}, e.g. 'Search[...]'.",
}


@dataclass
class _Edit:
    """One edit being applied: the version, its steps, the step k it targets, and the record."""

    v: Version
    ep: Episode
    steps: list[Step]
    k: int
    text: str | None
    keep_rest: bool
    alf: bool
    old: Step | None
    info: EditInfo

    @property
    def prefix(self) -> list[Step]:
        return self.steps[: self.k - 1]

    def carry(self, rest: list[Step], start: int) -> list[Step]:
        """Later steps carried over unchanged (thought edits with keep_rest), renumbered."""
        if not self.keep_rest:
            return []
        return [s.model_copy(update={"id": None, "parent_id": None, "index": start + j,
                                     "info": {**s.info, "carried_from": s.id}})
                for j, s in enumerate(rest)]


class Engine:
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
        self._signal_states = sig.PathStates()
        self._guard = threading.Lock()  # the caches and the lock table
        self._locks: dict[int, threading.RLock] = {}
        self._version_episode: dict[int, int] = {}  # version id -> episode id (fixed at creation)

    def _locked(self, episode_id: int) -> threading.RLock:
        """The episode's lock: held around its environment and database work."""
        with self._guard:
            return self._locks.setdefault(episode_id, threading.RLock())

    def _episode(self, v: Version) -> Episode:
        """The version's episode, with the config the version pinned."""
        return self.store.episode(v.episode_id).model_copy(update={"config": self.store.version_config(v.id)})

    # ------------------------------------------------------------------ episodes
    def start_episode(
        self, task: Task, config: AgentConfig, env_options: dict | None = None, name: str | None = None
    ) -> tuple[Episode, Version]:
        family(task.env)  # unknown env -> EnvError before anything is written
        check_config(config, task.env, self.store)  # ConfigError before anything is written
        rev = self._revision_of(config.exemplar_set)  # so is an unknown exemplar set
        env = self._started_env(task, env_options or {})  # so is a task these settings cannot start
        episode, version = self.store.create_episode(task, config, env_options or {}, name)
        if rev is not None:  # the first version's prompts use the set as it is now
            self.store.pin_exemplar_revision(version.id, rev)
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
            env = family(task.env).make_env(task, env_only(env_options), self.store)
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

    # ------------------------------------------------------------------ model
    def client(self, config: AgentConfig):
        key = config.model_dump_json()
        if key not in self._clients:
            if self._client_factory:
                self._clients[key] = self._client_factory(config)
            else:
                cache = self.store if config.cache else None
                self._clients[key] = ModelClient(config, api_key=self.api_key, cache=cache,
                                                 on_retry=lambda n, why: self.on_retry and self.on_retry(n, why))
        return self._clients[key]

    def _complete(self, episode: Episode, prompt: str, stop: list[str], calls: list[ModelCall], *, purpose: str,
                  chat: str, watch: CallWatch | None = None):
        extra = {"watch": watch} if watch is not None else {}
        try:
            text, call = self.client(self.model_config(episode)).complete(prompt, stop, purpose=purpose,
                                                                        chat_instruction=chat, **extra)
        except ModelError as exc:
            failed = getattr(exc, "call", None)
            if failed is not None:
                calls.append(failed)
            if watch is not None and watch.cancel.is_set():
                raise StepCancelled(f"step cancelled: {exc}", failed) from None
            raise ModelCallFailed(f"model call failed: {exc}", failed) from None
        calls.append(call)
        if watch is not None and watch.cancel.is_set():  # answered after Stop: not used
            raise StepCancelled("step cancelled; the model's answer was not used", call)
        if episode.config.api_style == "chat":
            text = _strip_echo(text, prompt)
        return text

    # ------------------------------------------------------------------ environment
    def _live_env(self, episode: Episode) -> _Live:
        with self._guard:
            live = self._live.get(episode.id)
            if live is not None:
                self._live.move_to_end(episode.id)
                return live
        self._check_references(episode)
        fam = family(episode.task.env)
        env = fam.make_env(episode.task, env_only(episode.env_options), self.store)
        env.reset(episode.task)
        live = _Live(env=env, at=0, tokens={0: env.state()})
        with self._guard:
            self._live[episode.id] = live
            old = self._evict(keep=episode.id)
        for x in old:
            try:
                x.env.close()
            except Exception:  # pragma: no cover - closing is best effort
                pass
        return live

    def _evict(self, keep: int) -> list[_Live]:
        """Drop the least recently used environments over the bound (not one in use)."""
        out = []
        for eid in list(self._live):
            if len(self._live) <= self._max_live:
                break
            lock = self._locks.get(eid)
            if eid == keep or (lock is not None and not lock.acquire(blocking=False)):
                continue
            out.append(self._live.pop(eid))
            if lock is not None:
                lock.release()
        return out

    def env_at(self, episode: Episode, steps: list[Step]) -> Environment:
        """The episode's environment in exactly the state after `steps[-1]`."""
        with self._locked(episode.id):
            return self._env_at(episode, steps)

    def _env_at(self, episode: Episode, steps: list[Step]) -> Environment:
        live = self._live_env(episode)
        target = steps[-1].id if steps else 0
        if live.at == target:
            return live.env
        env = live.env
        start = None
        for j in range(len(steps), -1, -1):
            sid = steps[j - 1].id if j else 0
            if sid in live.tokens:
                try:
                    env.set_state(live.tokens[sid])
                    start = j
                    break
                except Exception:
                    live.tokens.pop(sid, None)
            if j and steps[j - 1].snapshot is not None:
                env.restore(steps[j - 1].snapshot)
                start = j
                break
        if start is None:
            env.reset(episode.task)
            start = 0
        live.at = None
        for s in steps[start:]:
            if s.action is not None:  # thoughts never touch the environment
                got = env.step(s.action).observation
                if got != s.observation:
                    raise ReplayMismatch(s.index, s.action, s.observation or "", got)
            live.tokens[s.id] = env.state()
        live.at = target
        return env

    def unconfirmed_references(self, episode: Episode) -> list[str]:
        """Files/URLs outside the data roots an imported episode points at, and the model
        endpoint its file named, until confirmed."""
        endpoint = episode.env_options.get(UNCONFIRMED_ENDPOINT)
        return self._env_references(episode) + ([f"model endpoint {public_url(endpoint)}"] if endpoint else [])

    def _env_references(self, episode: Episode) -> list[str]:
        if not episode.env_options.get(UNCONFIRMED_REFS):
            return []
        refs = family(episode.task.env).references
        return refs(episode.task, episode.env_options) if refs else []

    def model_config(self, episode: Episode, config: AgentConfig | None = None) -> AgentConfig:
        """The config a model call for `episode` runs with (`config`, else the episode's).
        The API key goes only to an endpoint the user chose: an endpoint an imported file
        named is used once confirmed; until then the user's own OPENAI_BASE_URL, or a
        one-line EngineError saying how to confirm it."""
        config = config or episode.config
        imported = episode.env_options.get(UNCONFIRMED_ENDPOINT)
        if not imported or not config.base_url or not _same_endpoint(config.base_url, imported):
            return config
        own = os.environ.get("OPENAI_BASE_URL")
        if own and _same_endpoint(own, config.base_url):
            return config
        if own:
            return config.model_copy(update={"base_url": None})
        raise EngineError(f"episode {episode.id} was imported with the model endpoint {public_url(imported)}, which "
                          f"gets no request until you confirm it: `react-editor confirm {episode.id}` (or Confirm in "
                          "the Editor); or use your own with --base-url or OPENAI_BASE_URL")

    def check_endpoint(self, version_id: int) -> None:
        """Raise the one-line EngineError `model_config` would, before anything runs."""
        self.model_config(self._episode(self.store.version(version_id)))

    def _check_references(self, episode: Episode) -> None:
        refs = self._env_references(episode)
        if refs:
            more = f" (and {len(refs) - 1} more)" if len(refs) > 1 else ""
            raise EngineError(f"episode {episode.id} was imported and points at {refs[0]}{more}: check it, then "
                              f"run `react-editor confirm {episode.id}` (or press Confirm in the Editor)")

    def confirm_references(self, episode_id: int, **repoint: Any) -> list[str]:
        """A person's OK for what an imported episode opens, optionally re-pointed first
        (e.g. wiki="builtin"); returns what was confirmed."""
        ep = self.store.episode(episode_id)
        confirmed = ep.env_options.get(UNCONFIRMED_ENDPOINT)
        options = {k: v for k, v in ep.env_options.items() if k not in (UNCONFIRMED_REFS, UNCONFIRMED_ENDPOINT)}
        if repoint.get("wiki") is not None and repoint.get("wiki_url") is None:
            options.pop("wiki_url", None)
        options.update({k: v for k, v in repoint.items() if v is not None})
        self.store.set_env_options(episode_id, options)
        self.forget_env(episode_id)
        fam = family(ep.task.env)
        refs = fam.references(ep.task, options) if fam.references else []
        return refs + ([f"model endpoint {public_url(confirmed)}"] if confirmed else [])

    def forget_env(self, episode_id: int) -> None:
        """Drop the live environment (next use rebuilds it, as after a restart)."""
        with self._locked(episode_id):
            with self._guard:
                live = self._live.pop(episode_id, None)
            if live:
                live.env.close()

    def _env_before(self, version_id: int, before: int | None) -> Environment:
        """The environment after the whole version, or just before its step `before`."""
        v = self.store.version(version_id)
        steps = self.steps(v)
        if before is not None:
            if not 1 <= before <= len(steps) + 1:
                raise EngineError(f"version {v.id} has no step {before}")
            steps = steps[: before - 1]
        return self._env_at(self.store.episode(v.episode_id), steps)

    def admissible_actions(self, version_id: int, *, before: int | None = None) -> list[str] | None:
        """Valid commands (ALFWorld) at the end of the version, or before step `before` -
        the suggestions for rewriting that step's action."""
        with self._locked(self.store.version(version_id).episode_id):
            return self._env_before(version_id, before).admissible_actions()

    def expert_hint(self, version_id: int, timeout_s: float = 5.0, *, before: int | None = None) -> str | None:
        """The expert's next action there, or None when it cannot answer within the time."""
        with self._locked(self.store.version(version_id).episode_id):
            hint = getattr(self._env_before(version_id, before), "expert_hint", None)
            return hint(timeout_s) if hint else None

    # ------------------------------------------------------------------ reading
    def steps(self, version: Version) -> list[Step]:
        """The version's path, cached by leaf so a long run does not re-read it each step."""
        with self._guard:
            cached = self._paths.get(version.id)
            if cached and cached[0] == version.leaf_step_id:
                self._paths.move_to_end(version.id)
                return cached[1]
        steps = self.store.path(version.leaf_step_id)
        self._remember_path(version.id, version.leaf_step_id, steps)
        return steps

    def _remember_path(self, version_id: int, leaf: int | None, steps: list[Step]) -> None:
        with self._guard:
            self._paths[version_id] = (leaf, steps)
            self._paths.move_to_end(version_id)
            while len(self._paths) > PATH_CACHE:
                self._paths.popitem(last=False)

    def prompt(self, version_id: int) -> str:
        """The exact text the next model call of this version would be sent: a pure
        function of the version's pinned config and exemplar revision, task and steps."""
        v = self.store.version(version_id)
        ep = self._episode(v)
        steps = self.steps(v)
        rev = self.store.exemplar_revision(v.id)
        i = len(steps) + 1
        qa = qa_method_of(v, steps)
        if qa is not None:  # Standard / CoT / CoT-SC: the one prompt every sample was sent
            return self._qa_prompt(ep, rev, qa)[0]
        if ep.task.env == "alfworld":
            return fmt.alfworld_prompt(self._alf_exemplars(ep, rev), ep.task.text, steps)
        prefix = self._wiki_prefix(ep, steps, rev)
        if v.draft_thought is not None:
            return prefix + fmt.wiki_action_cue(i, v.draft_thought)[0]
        return prefix + fmt.wiki_step_cue(i, ep.config.style)[0]

    def qa_prompt(self, version_id: int, method: str) -> tuple[str, list[str]]:
        """(prompt, stop) of a Standard / CoT answer of this version: its pinned config and
        exemplar revision (pinned here at first use, as a ReAct step pins them)."""
        v = self.store.version(version_id)
        ep = self._episode(v)
        return self._qa_prompt(ep, self._pin_exemplars(v, ep), method)

    def _qa_prompt(self, ep: Episode, rev: int | None, method: str) -> tuple[str, list[str]]:
        kind = "standard" if method == "standard" else "cot"
        try:
            block = ex.qa_exemplars(ex.prompt_dict(ep.task.env, ep.config.exemplar_set, self.store, rev),
                                    ep.task.env, kind)
        except (ex.ExemplarError, StoreError) as exc:
            raise EngineError(str(exc)) from None
        return qa_prompt(block, ep.task.text, kind)

    def _alf_exemplars(self, ep: Episode, rev: int | None) -> list[str]:
        try:
            prompts = ex.prompt_dict("alfworld", ep.config.exemplar_set, self.store, rev)
            return ex.alfworld_exemplars(prompts, ep.task.type, ep.config.style)
        except (ex.ExemplarError, StoreError) as exc:
            raise EngineError(str(exc)) from None

    def _wiki_prefix(self, ep: Episode, steps: list[Step], rev: int | None) -> str:
        try:
            prompts = ex.prompt_dict(ep.task.env, ep.config.exemplar_set, self.store, rev)
            instruction, block = ex.wiki_exemplars(prompts, ep.task.env, ep.config.style)
        except (ex.ExemplarError, StoreError) as exc:
            raise EngineError(str(exc)) from None
        return fmt.wiki_prompt_prefix(instruction, block, ep.task.text, steps)

    def _pin_exemplars(self, v: Version, ep: Episode) -> int | None:
        """The exemplar-set revision the version's prompts use, pinned at its first use."""
        rev = self.store.exemplar_revision(v.id)
        if rev is None and ep.config.exemplar_set not in (None, "builtin"):
            rev = self._revision_of(ep.config.exemplar_set)
            self.store.pin_exemplar_revision(v.id, rev)
        return rev

    def _revision_of(self, set_name: str | None) -> int | None:
        if set_name in (None, "builtin"):
            return None
        try:
            return sets.current_revision(self.store, set_name)
        except sets.ExemplarSetError as exc:
            raise EngineError(str(exc)) from None

    # ------------------------------------------------------------------ frozen versions
    def frozen_reason(self, version_id: int) -> str | None:
        """Why a version may no longer grow (a FROZEN key), or None: what was relied on
        (annotated, used by an exemplar set, branched from) never changes again."""
        if ann.is_annotated(self.store, version_id):
            return "annotated"
        if sets.uses_version(self.store, version_id):
            return "exemplar"
        if self.store.has_child_version(version_id):
            return "child"
        return None

    def reconfigure(self, version_id: int, changes: dict[str, Any]) -> Version:
        """New settings for the steps that follow (model, endpoint, decoding, exemplars,
        ...): a new child version at the same leaf runs with them and becomes current; the
        version keeps the config it ran with. No change: the version itself. Naming an
        exemplar set pins its current revision."""
        with self._locked(self.store.version(version_id).episode_id):
            v = self.store.version(version_id)
            old = self.store.version_config(v.id)
            data = old.model_dump()
            unknown = sorted(set(changes) - set(data))
            if unknown:
                raise EngineError(f"unknown setting{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}")
            try:
                new = AgentConfig.model_validate({**data, **changes})
            except ValidationError as exc:
                err = exc.errors()[0]
                raise EngineError(f"invalid {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
            old_rev = self.store.exemplar_revision(v.id)
            rev = old_rev
            if "exemplar_set" in changes or new.exemplar_set != old.exemplar_set:
                rev = self._revision_of(new.exemplar_set)
            if new == old and (rev == old_rev or old_rev is None):
                if rev != old_rev:
                    self.store.pin_exemplar_revision(v.id, rev)
                return self.store.version(v.id)
            steps = self.steps(v)
            status = "open" if v.status == "stopped" else v.status
            child, _ = self.store.branch(
                v, at_step=steps[-1] if steps else None, config=new, exemplar_rev=rev, edits=v.edits,
                draft_thought=v.draft_thought, draft_edit=v.draft_edit, status=status, outcome=v.outcome,
            )
            return child

    # ------------------------------------------------------------------ stepping
    def _episode_of(self, version_id: int) -> int:
        """The version's episode id (never changes: cached, so a step reads its version once)."""
        eid = self._version_episode.get(version_id)
        if eid is None:
            eid = self._version_episode[version_id] = self.store.version(version_id).episode_id
        return eid

    def _begin(self, version_id: int, episode_id: int | None = None):
        """Under the episode's lock: the version, its episode (pinned config), its steps,
        and the environment after them (a replay mismatch shows before any model call).
        None if the version is not of `episode_id` (the lock held is not its episode's)."""
        v = self.store.version(version_id)
        if episode_id is not None and v.episode_id != episode_id:
            return None
        ep = self._episode(v)
        if v.outcome.done:
            raise EngineError(f"version {v.id} is finished ({_outcome_text(v.outcome)}); edit or branch it to go on")
        steps = self.steps(v)
        if len(steps) >= self.max_steps(ep):
            raise EngineError(f"version {v.id} has reached its step limit ({self.max_steps(ep)})")
        return v, ep, steps, self._env_at(ep, steps)

    def step(self, version_id: int, *, watch: CallWatch | None = None) -> StepReport:
        """One model step (ALFWorld: one line; Wikipedia: Thought/Action/Observation).
        Prepare (locked), call the model (unlocked), execute and record (locked). `watch`
        reports retries and can cancel the step while its model call is in flight."""
        eid = self._episode_of(version_id)
        with self._locked(eid):
            self.store.record_pending_calls()  # answers an earlier blocked write kept: the cache has them
            began = self._begin(version_id, eid)
            if began is None:  # a deleted version's id reused in another episode: take its lock
                self._version_episode.pop(version_id, None)
                return self.step(version_id, watch=watch)
            v, ep, steps, _ = began
            self.model_config(ep)  # an unconfirmed imported endpoint: one line before anything
            rev = self._pin_exemplars(v, ep)
        i = len(steps) + 1
        calls: list[ModelCall] = []
        try:
            if ep.task.env == "alfworld":
                prompt = fmt.alfworld_prompt(self._alf_exemplars(ep, rev), ep.task.text, steps)
                text = self._complete(ep, prompt, ["\n"], calls, purpose="step", chat=CHAT_INSTRUCTIONS["alfworld"],
                                      watch=watch)
                thought, action = fmt.parse_alfworld_completion(text)
                source, edit = "model", None
            else:
                prefix = self._wiki_prefix(ep, steps, rev)
                source, edit = "model", None
                if v.draft_thought is not None:  # a person's thought waits for its action
                    thought, source, edit = v.draft_thought, "human", v.draft_edit
                    action = self._wiki_action(ep, prefix, i, thought, calls, watch)
                elif ep.config.style == "react":
                    cue, stop = fmt.wiki_step_cue(i, "react")
                    chat = CHAT_INSTRUCTIONS["react"].format(i=i)
                    parsed = fmt.parse_wiki_completion(
                        self._complete(ep, prefix + cue, stop, calls, purpose="step", chat=chat, watch=watch), i, "react"
                    )
                    thought, action = parsed.thought, parsed.action
                    if action is None:  # the paper's fallback: ask for the action alone
                        action = self._wiki_action(ep, prefix, i, thought or "", calls, watch)
                else:
                    cue, stop = fmt.wiki_step_cue(i, "act")
                    chat = CHAT_INSTRUCTIONS["act"].format(i=i)
                    thought = None
                    action = fmt.parse_wiki_completion(
                        self._complete(ep, prefix + cue, stop, calls, purpose="step", chat=chat, watch=watch), i, "act"
                    ).action
        except ModelCallFailed as exc:
            with self._locked(ep.id):
                if calls:
                    self.store.record_calls(ep.id, calls)
                if not isinstance(exc, StepCancelled):
                    self.store.update_version(v.id, error=str(exc))
            raise
        with self._locked(ep.id):
            if watch is not None and watch.cancel.is_set():  # Stop came while the answer was on its way
                self.store.record_calls(ep.id, calls)
                raise StepCancelled("step cancelled; the model's answer was not used", calls[-1] if calls else None)
            env = self._env_at(ep, steps)
            new = self._execute(ep, env, steps, thought, action, source=source, edit=edit,
                                call_ids=[-(n + 1) for n in range(len(calls))])
            return self._record(v, ep, steps, [new], calls, clear_draft=v.draft_thought is not None)

    def answer(
        self, version_id: int, thought: str | None, answer: str, calls: list[ModelCall], *, info: dict | None = None
    ) -> StepReport:
        """Record a Standard / CoT answer (experiments) as one model step - the thought and
        `Finish[answer]`, scored by the environment - with the calls that produced it."""
        with self._locked(self.store.version(version_id).episode_id):
            v, ep, steps, env = self._begin(version_id)
            if ep.task.env == "alfworld":
                raise EngineError("Standard and CoT answers are for HotpotQA and FEVER, not ALFWorld")
            ids = [-(n + 1) for n in range(len(calls))]
            new = self._execute(ep, env, steps, thought, f"Finish[{answer}]", source="model", call_ids=ids)
            if info:
                new = new.model_copy(update={"info": {**new.info, **info}})
            return self._record(v, ep, steps, [new], calls, clear_draft=False)

    def _wiki_action(self, ep: Episode, prefix: str, i: int, thought: str, calls: list[ModelCall],
                     watch: CallWatch | None = None) -> str:
        cue, stop = fmt.wiki_action_cue(i, thought)
        text = self._complete(
            ep, prefix + cue, stop, calls, purpose="action_fallback", chat=CHAT_INSTRUCTIONS["action"].format(i=i),
            watch=watch,
        )
        return fmt.parse_wiki_action(text)

    def human_step(self, version_id: int, *, thought: str | None = None, action: str | None = None) -> StepReport:
        """Human agent mode: a person writes the next turn (how new exemplars are authored).
        ALFWorld: a thought and/or an action (two turns when both). Wikipedia: an action,
        with an optional thought (the version's pending thought is used when none is given)."""
        thought = _clean_text(thought, "thought", allow_none=True)
        action = _clean_text(action, "action", allow_none=True)
        if thought is None and action is None:
            raise EngineError("write a thought or an action")
        with self._locked(self.store.version(version_id).episode_id):
            return self._human_step(version_id, thought, action)

    def _human_step(self, version_id: int, thought: str | None, action: str | None) -> StepReport:
        v, ep, steps, env = self._begin(version_id)
        new: list[Step] = []
        if ep.task.env == "alfworld":
            thoughts = [thought] if thought is not None else []
            if action is not None and fmt.split_think(action) is not None:  # "think: X" is a thought turn
                thoughts.append(fmt.split_think(action))
                action = None
            for t in thoughts:
                new.append(self._execute(ep, env, steps + new, t, None, source="human"))
            if action is not None:
                if len(steps) + len(new) >= self.max_steps(ep) or (new and new[-1].done):
                    raise EngineError("no room for the action: the step limit is reached")
                new.append(self._execute(ep, env, steps + new, None, action, source="human"))
        else:
            if action is None:
                raise EngineError("in the Wikipedia format a step needs an action (Search[...], Lookup[...] or Finish[...])")
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
        kind = ep.task.env
        if kind == "alfworld" and action is None:
            command = f"{fmt.THINK_PREFIX} {thought or ''}"
        else:
            command = action or ""
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
        state = self._signal_states.after(earlier, kind, ep.task.text)
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
            outcome = _outcome(last.reward, last.info, True)
            status = "done"
        elif total >= self.max_steps(ep):
            outcome, status = self._give_up(ep, live.env, last), "done"
        leaf = steps[-1] if steps else None
        try:
            with self.store.transaction():
                target, frozen = v, self.frozen_reason(v.id)
                if frozen:
                    target, _ = self.store.branch(v, at_step=leaf, edits=v.edits, draft_thought=v.draft_thought,
                                                  draft_edit=v.draft_edit)
                rows, v2 = self.store.append_steps(
                    target.id, new, calls, status=status, outcome=outcome, error=None, clear_draft=clear_draft,
                    expected_leaf=leaf.id if leaf else None,
                )
        except VersionChanged:
            if calls:  # nothing about a call is lost, even when its step is
                self.store.record_calls(ep.id, calls)
            raise
        except StoreError as exc:  # blocked (a write lock held too long, disk full): keep the paid answers
            live.at = None  # the env moved past the recorded leaf
            if not calls:
                raise
            kept = self.store.keep_pending_calls(ep.id, calls)
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
        oc = _outcome(res.reward, res.info, True)
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
        v = self.store.version(vid)
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
            if not v.outcome.done or v.id != vid:  # a finished last step's version is the row it just wrote
                v = self.store.version(vid)
            if stopped and not v.outcome.done and self.frozen_reason(vid) is None:  # frozen: never changes
                v = self.store.update_version(vid, status="stopped")
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

    # ------------------------------------------------------------------ edits
    def edit(
        self,
        version_id: int,
        k: int,
        kind: str,
        text: str | None = None,
        *,
        keep_rest: bool = False,
        config: AgentConfig | None = None,
        make_current: bool = True,
    ) -> Version:
        """Edit step k of a version: a new branch from step k-1 (the old version stays as it
        was) that becomes the episode's current version (running with `config` when given).

        kinds: rewrite_thought, delete_thought, insert_thought (a hint placed at k),
        rewrite_action (executed again by the environment). `keep_rest` carries steps
        after k over unchanged - only for thought edits, which never touch the environment.
        """
        apply = self._EDITS.get(kind)
        if apply is None:
            raise EngineError(f"unknown edit {kind!r}")
        with self._locked(self.store.version(version_id).episode_id):
            e = self._edit_context(version_id, k, kind, text, keep_rest)
            new, fields = apply(self, e)
            if config is not None:  # the branch alone runs with it; the episode's default stays
                fields.update(config=config, exemplar_rev=self.store.exemplar_revision(e.v.id), set_default=False)
            if not make_current:
                fields["make_current"] = False
            return self._commit_edit(e, new, fields)

    def _edit_context(self, version_id: int, k: int, kind: str, text: str | None, keep_rest: bool) -> _Edit:
        """The checks every edit kind shares, and what each needs to build its steps."""
        v = self.store.version(version_id)
        ep = self._episode(v)
        steps = self.steps(v)
        n = len(steps)
        if kind == "insert_thought":
            if not 1 <= k <= n + 1:
                raise EngineError(f"version {v.id} has {n} steps; a thought can be inserted at 1..{n + 1}")
            if k == n + 1 and v.outcome.done:
                raise EngineError(f"version {v.id} is finished; insert the thought before a step instead")
        elif not 1 <= k <= n:
            raise EngineError(f"version {v.id} has no step {k} (it has {n} step{'s' if n != 1 else ''})")
        if kind != "delete_thought":
            text = _clean_text(text, "action" if kind == "rewrite_action" else "thought")
        old = steps[k - 1] if k <= n else None
        info = EditInfo(kind=kind, index=k, replaced_step=old.id if old else None,
                        old_thought=old.thought if old else None, old_action=old.action if old else None)
        return _Edit(v, ep, steps, k, text, keep_rest, ep.task.env == "alfworld", old, info)

    def _edit_thought(self, e: _Edit) -> tuple[list[Step], dict[str, Any]]:
        """rewrite_thought / delete_thought: the environment is untouched."""
        verb = "rewrite" if e.info.kind == "rewrite_thought" else "delete"
        if e.old is None or e.old.thought is None:
            raise EngineError(f"step {e.k} has no thought to {verb}")
        text = e.text if verb == "rewrite" else None
        if e.alf:  # a thought is its own turn: replace it, or drop it
            new = [Step(index=e.k, thought=text, observation=fmt.THINK_OBSERVATION, source="human",
                        edit=e.info)] if text is not None else []
            return new + e.carry(e.steps[e.k:], e.k + len(new)), {}
        if text is not None and not e.keep_rest:  # the model writes the action for the new thought
            return [], {"draft_thought": text, "draft_edit": e.info}
        same = e.old.model_copy(update={"id": None, "parent_id": None, "thought": text, "source": "human",
                                        "edit": e.info, "call_ids": []})
        return [same] + e.carry(e.steps[e.k:], e.k + 1), {}

    def _edit_insert_thought(self, e: _Edit) -> tuple[list[Step], dict[str, Any]]:
        if not e.alf:
            if e.keep_rest:
                raise EngineError(
                    "in the Wikipedia format a thought belongs to a step: rewrite step K's thought, "
                    "or insert without keeping the later steps"
                )
            return [], {"draft_thought": e.text, "draft_edit": e.info}
        new = [Step(index=e.k, thought=e.text, observation=fmt.THINK_OBSERVATION, source="human", edit=e.info)]
        return new + e.carry(e.steps[e.k - 1:], e.k + 1), {}

    def _edit_action(self, e: _Edit) -> tuple[list[Step], dict[str, Any]]:
        """rewrite_action: executed again from the restored state of step k-1."""
        if e.old.action is None:
            raise EngineError(f"step {e.k} is a thought, not an action; use a thought edit")
        if e.keep_rest:
            raise EngineError("an action edit changes the environment, so the later steps cannot be kept")
        if e.alf and fmt.split_think(e.text) is not None:
            raise EngineError("that is a thought ('think: ...'); use a thought edit")
        env = self._env_at(e.ep, e.prefix)
        return [self._execute(e.ep, env, e.prefix, e.old.thought, e.text, source="human", edit=e.info)], {}

    _EDITS = {"rewrite_thought": _edit_thought, "delete_thought": _edit_thought,
              "insert_thought": _edit_insert_thought, "rewrite_action": _edit_action}

    def _commit_edit(self, e: _Edit, new: list[Step], fields: dict[str, Any]) -> Version:
        """Write the branch: earlier edits kept (renumbered when later steps moved), the
        outcome carried when the kept steps finish the episode."""
        edits = [x for x in e.v.edits if (x.index or 0) < e.k or e.keep_rest]
        if e.keep_rest and e.alf:
            shift = {"insert_thought": 1, "delete_thought": -1}.get(e.info.kind, 0)
            edits = [x if (x.index or 0) < e.k else x.model_copy(update={"index": (x.index or 0) + shift})
                     for x in edits]
        fields = {"edits": [*edits, e.info], **fields}
        if new and new[-1].done:
            fields["status"] = "done"
            fields["outcome"] = _outcome(new[-1].reward, new[-1].info, True)
        elif e.keep_rest and len(e.prefix) + len(new) >= self.max_steps(e.ep) and e.v.outcome.done:
            fields["status"], fields["outcome"] = "done", e.v.outcome
        at = e.prefix[-1] if e.prefix else None
        version, rows = self.store.branch(e.v, at_step=at, steps=new, **fields)
        if e.info.kind == "rewrite_action" and rows:
            live = self._live[e.ep.id]
            live.tokens[rows[-1].id] = live.env.state()
            live.at = rows[-1].id
        return version

    def branch(self, version_id: int, k: int, *, config: AgentConfig | None = None,
               make_current: bool = True) -> Version:
        """"Resume from here": a new version that keeps steps 1..k and goes on from there
        (with `config`: running with it; rollouts pin their sampling settings this way)."""
        v = self.store.version(version_id)
        steps = self.steps(v)
        if not 0 <= k <= len(steps):
            raise EngineError(f"version {v.id} has no step {k}")
        at = steps[k - 1] if k else None
        edits = [e for e in v.edits if (e.index or 0) <= k]
        fields: dict[str, Any] = {"edits": edits}
        if at is not None and at.done:
            fields.update(status="done", outcome=_outcome(at.reward, at.info, True))
        if config is not None:  # the branch alone runs with it; the episode's default stays
            fields.update(config=config, exemplar_rev=self.store.exemplar_revision(v.id), set_default=False)
        version, _ = self.store.branch(v, at_step=at, steps=[], make_current=make_current, **fields)
        return version

    def locked(self, episode_id: int) -> threading.RLock:
        """The episode's lock, for a caller that makes several engine calls one transaction
        (take it before `store.transaction()`, as the engine does)."""
        return self._locked(episode_id)


# ---------------------------------------------------------------------- helpers


def _outcome(reward: float, info: dict[str, Any], done: bool) -> Outcome:
    if "won" in info:
        success = bool(info["won"])
    elif "correct" in info:
        success = bool(info["correct"])
    elif "em" in info:
        success = bool(info["em"])
    else:
        success = reward > 0
    return Outcome(done=done, success=success, reward=float(reward or 0.0), metrics=dict(info))


def _outcome_text(o: Outcome) -> str:
    return "success" if o.success else "failure"


def _clean_text(text: str | None, what: str, *, allow_none: bool = False) -> str | None:
    if text is None:
        if allow_none:
            return None
        raise EngineError(f"the new {what} is missing")
    if not isinstance(text, str):
        raise EngineError(f"the {what} must be text")
    if "\n" in text.strip() or "\r" in text.strip():
        raise EngineError(f"a {what} is one line (it contains a line break)")
    if len(text) > MAX_TEXT:
        raise EngineError(f"the {what} is too long ({len(text):,} characters; the limit is {MAX_TEXT:,})")
    stripped = text.strip()
    if not stripped:
        if allow_none:
            return None
        raise EngineError(f"the new {what} is empty")
    return stripped


def _strip_echo(text: str, prompt: str) -> str:
    """Chat models often repeat the cue ('Thought 3:', '>'); drop it so parsing matches."""
    cue = prompt[prompt.rfind("\n") + 1 :].strip()
    t = text.lstrip()
    if cue and t.startswith(cue):
        t = t[len(cue) :]
        return t if t.startswith(" ") else " " + t
    if cue == ">" and t.startswith(">"):
        return t[1:]
    return text


def _same_endpoint(a: str, b: str) -> bool:
    return public_url(a).rstrip("/").lower() == public_url(b).rstrip("/").lower()
