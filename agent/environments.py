"""The engine's environments: one live environment per episode (least recently used ones
closed), put in exactly the state after a version's last step - from an in-process state
token, else the step's stored snapshot, else a replay of the recorded actions with every
observation checked - and what an imported episode may open only once a person confirms."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, ContextManager

from agent.client import public_url
from agent.endpoint_keys import CONFIRMED_SETTING
from agent.engine_errors import EngineError
from agent.engine_reports import version_name
from agent.episode_locks import EpisodeLocks
from agent.version_paths import VersionPaths
from envs.base import EnvError, Environment, ReplayMismatch
from envs.registry import family
from sessions.store import Store
from trajectory.records import UNCONFIRMED_ENDPOINT, UNCONFIRMED_REFS, AgentConfig, Episode, Step, Task, env_only


@dataclass
class _Live:
    """An environment instance kept alive for one episode, with state tokens per step."""

    env: Environment
    at: int | None = None  # id of the step the env is after (0 = just reset)
    tokens: dict[int, Any] = field(default_factory=dict)


def _same_endpoint(a: str, b: str) -> bool:
    return public_url(a).rstrip("/").lower() == public_url(b).rstrip("/").lower()


class EnvironmentPool:
    """The Engine's environments (`engine.envs`): at most `max_live` live ones, each used
    under its episode's lock from `locks` (the Engine's); `paths` reads versions."""

    def __init__(self, store: Store, locks: EpisodeLocks, paths: VersionPaths, *, max_live: int = 8):
        self.store = store
        self._locks = locks
        self._paths = paths
        self._guard = threading.Lock()  # the live environments
        self._live: OrderedDict[int, _Live] = OrderedDict()  # least recently used first
        self._max_live = max_live

    def _locked(self, episode_id: int) -> ContextManager[Any]:
        return self._locks.hold(episode_id)

    def start(self, task: Task, env_options: dict) -> Environment:
        """The task's environment, reset: a game that cannot start with these options (e.g.
        a wording its grammar lacks) is one line before an episode is written.
        Raises EnvError (one line) when the task cannot start with these options."""
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
            raise EnvError(
                f"cannot start task {task.id!r} with these settings ({type(exc).__name__}: {str(exc)[:120]})"
            ) from None

    def adopt(self, episode_id: int, env: Environment) -> None:
        """A new episode's first step uses the environment `start` made for it."""
        with self._guard:
            self._live[episode_id] = _Live(env=env, at=0, tokens={0: env.state()})
            old = self._evict(keep=episode_id)
        for x in old:
            x.env.close()

    def live(self, episode_id: int) -> _Live:
        """The episode's live environment (the caller holds its lock and has restored it)."""
        return self._live[episode_id]

    def _live_env(self, episode: Episode) -> _Live:
        with self._guard:
            live = self._live.get(episode.id)
            if live is not None:
                self._live.move_to_end(episode.id)
                return live
        self._check_references(episode)
        fam = family(episode.task.env)
        env = fam.make_env(episode.task, env_only(episode.env_options), self.store.blobs)
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
            if eid == keep:
                continue
            with self._locks.try_hold(eid) as free:
                if free:
                    out.append(self._live.pop(eid))
        return out

    def env_at(self, episode: Episode, steps: list[Step]) -> Environment:
        """The episode's environment in exactly the state after `steps[-1]`."""
        with self._locked(episode.id):
            return self.restore(episode, steps)

    def restore(self, episode: Episode, steps: list[Step]) -> Environment:
        """`env_at` for a caller that holds the episode's lock.
        Raises ReplayMismatch when a replayed step observes other than what was recorded."""
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
        raise EngineError(
            f"episode {episode.id} was imported with the model endpoint {public_url(imported)}, which "
            f"gets no request until you confirm it: `react-editor confirm {episode.id}` (or Confirm in "
            "the Editor); or use your own with --base-url or OPENAI_BASE_URL"
        )

    def check_endpoint(self, version_id: int, config: AgentConfig | None = None) -> None:
        """Raise the one-line EngineError `model_config` would, before anything runs (with
        `config`: the settings a new child of the version would run with, before it is written)."""
        self.model_config(self._paths.episode(self.store.versions.get(version_id)), config)

    def _check_references(self, episode: Episode) -> None:
        refs = self._env_references(episode)
        if refs:
            more = f" (and {len(refs) - 1} more)" if len(refs) > 1 else ""
            raise EngineError(
                f"episode {episode.id} was imported and points at {refs[0]}{more}: check it, then "
                f"run `react-editor confirm {episode.id}` (or press Confirm in the Editor)"
            )

    def confirm_references(self, episode_id: int, **repoint: Any) -> list[str]:
        """A person's OK for what an imported episode opens, optionally re-pointed first
        (e.g. wiki="builtin"); returns what was confirmed."""
        ep = self.store.episodes.get(episode_id)
        confirmed = ep.env_options.get(UNCONFIRMED_ENDPOINT)
        options = {k: v for k, v in ep.env_options.items() if k not in (UNCONFIRMED_REFS, UNCONFIRMED_ENDPOINT)}
        if repoint.get("wiki") is not None and repoint.get("wiki_url") is None:
            options.pop("wiki_url", None)
        options.update({k: v for k, v in repoint.items() if v is not None})
        fam = family(ep.task.env)
        if any(v is not None for v in repoint.values()):  # refused as `run` refuses it, before it is kept
            fam.make_env(ep.task, env_only(options), self.store.blobs).close()
        self.store.episodes.set_env_options(episode_id, options)
        if confirmed:  # from now on the app's key guard (agent.endpoint_keys) lets the launch key reach it
            known = list(self.store.settings.get(CONFIRMED_SETTING, []) or [])
            if public_url(confirmed) not in known:
                self.store.settings.set(CONFIRMED_SETTING, [*known, public_url(confirmed)])
        self.forget_env(episode_id)
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
        v = self.store.versions.get(version_id)
        steps = self._paths.steps(v)
        if before is not None:
            if not 1 <= before <= len(steps) + 1:
                raise EngineError(f"version {version_name(self.store, v)} has no step {before}")
            steps = steps[: before - 1]
        return self.restore(self.store.episodes.get(v.episode_id), steps)

    def admissible_actions(self, version_id: int, *, before: int | None = None) -> list[str] | None:
        """Valid commands (ALFWorld) at the end of the version, or before step `before` -
        the suggestions for rewriting that step's action."""
        with self._locked(self.store.versions.get(version_id).episode_id):
            return self._env_before(version_id, before).admissible_actions()

    def expert_hint(self, version_id: int, timeout_s: float = 5.0, *, before: int | None = None) -> str | None:
        """The expert's next action there, or None when it cannot answer within the time."""
        with self._locked(self.store.versions.get(version_id).episode_id):
            hint = getattr(self._env_before(version_id, before), "expert_hint", None)
            return hint(timeout_s) if hint else None
