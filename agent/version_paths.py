"""What the engine reads of a version, cached: its episode with the config it pinned, and
its path of steps (a long run does not re-read them every step). Shared by the Engine and
its parts (`agent.prompting`, `agent.environments`, `agent.editing`)."""

from __future__ import annotations

import threading
from collections import OrderedDict

from sessions.store import Store
from trajectory.records import Episode, Step, Version

VERSION_EPISODE_CACHE = 65_536  # version ids whose episode the engine remembers
PATH_CACHE = 256  # versions whose paths the engine keeps in memory


class VersionPaths:
    """A version's episode (`episode`), its steps (`steps`) and its episode id
    (`episode_id`), read from `store` once and kept (bounded)."""

    def __init__(self, store: Store):
        self.store = store
        self._guard = threading.Lock()  # the caches
        self._paths: OrderedDict[int, tuple[int | None, list[Step]]] = OrderedDict()
        self._version_episode: dict[int, int] = {}  # version id -> episode id (fixed at creation; bounded)
        self._pinned: OrderedDict[tuple[int, str], Episode] = OrderedDict()  # (version, created_at) -> its episode
        self._revs: OrderedDict[tuple[int, str], int | None] = OrderedDict()  # (version, created_at) -> exemplar rev
        self._fresh: tuple[int, str] | None = None  # the version `know_new` just learnt

    def episode(self, v: Version, env_options: dict | None = None) -> Episode:
        """The version's episode, with the config the version pinned. The task and a
        version's pinned config never change: they are read and validated once per version
        (keyed with its creation time, as a deleted version's id may be reused), with the
        version's exemplar revision (`revision`) when it is pinned; the environment options,
        which a confirm or re-point changes, are read every time (`env_options`: the caller
        read them with the version, `store.versions.with_env_options`). The Episode returned
        is the one kept (read-only to its callers: no copy per step)."""
        key = (v.id, v.created_at)
        with self._guard:
            ep = self._pinned.get(key)
            if ep is not None:
                self._pinned.move_to_end(key)
            fresh, self._fresh = self._fresh == key, None if self._fresh == key else self._fresh
        if ep is not None and fresh:
            return ep
        if ep is None:
            ep, rev = self.store.episodes.pinned(v.episode_id, v.id)
            with self._guard:
                self._pinned[key] = ep
                while len(self._pinned) > PATH_CACHE:
                    self._pinned.popitem(last=False)
            if rev is not None or ep.config.exemplar_set in (None, "builtin"):  # (else pinned at its first use)
                self.remember_revision(v, rev)
            return ep
        if env_options is None:
            env_options = self.store.episodes.env_options(v.episode_id)
        if env_options == ep.env_options:  # as kept: no copy (the engine's parts never change an Episode)
            return ep
        ep = ep.model_copy(update={"env_options": env_options})
        with self._guard:  # the options as they are now (a confirm changed them): the next step's
            if key in self._pinned:
                self._pinned[key] = ep
        return ep

    def know_new(self, ep: Episode, v: Version, exemplar_rev: int | None = None) -> None:
        """A version just created with its episode (`store.episodes.create`): its pinned
        config is the episode's, so its first step reads neither; `exemplar_rev`, the
        exemplar revision it was created with (the built-in exemplars' included)."""
        with self._guard:
            self._pinned[(v.id, v.created_at)] = ep
            while len(self._pinned) > PATH_CACHE:
                self._pinned.popitem(last=False)
            self._fresh = (v.id, v.created_at)  # its next use takes the options as written
        self._version_episode.setdefault(v.id, ep.id)
        if exemplar_rev is not None or ep.config.exemplar_set in (None, "builtin"):  # (else pinned at the first step)
            self.remember_revision(v, exemplar_rev)

    def revision(self, v: Version) -> tuple[bool, int | None]:
        """(known, the version's pinned exemplar revision) as remembered: once pinned it
        never changes (keyed with the creation time, as `episode`)."""
        with self._guard:
            key = (v.id, v.created_at)
            return key in self._revs, self._revs.get(key)

    def remember_revision(self, v: Version, rev: int | None) -> None:
        with self._guard:
            self._revs[(v.id, v.created_at)] = rev
            while len(self._revs) > PATH_CACHE:
                self._revs.popitem(last=False)

    def steps(self, version: Version) -> list[Step]:
        """The version's path, cached by leaf so a long run does not re-read it each step."""
        with self._guard:
            cached = self._paths.get(version.id)
            if cached and cached[0] == version.leaf_step_id:
                self._paths.move_to_end(version.id)
                return cached[1]
        steps = self.store.versions.path(version.leaf_step_id)
        self.remember(version.id, version.leaf_step_id, steps)
        return steps

    def remember(self, version_id: int, leaf: int | None, steps: list[Step]) -> None:
        with self._guard:
            self._paths[version_id] = (leaf, steps)
            self._paths.move_to_end(version_id)
            while len(self._paths) > PATH_CACHE:
                self._paths.popitem(last=False)

    def episode_id(self, version_id: int) -> int:
        """The version's episode id (never changes: cached, so a step reads its version once)."""
        eid = self._version_episode.get(version_id)
        if eid is None:
            if len(self._version_episode) >= VERSION_EPISODE_CACHE:  # a long-lived app: bounded, refilled on use
                self._version_episode.clear()
            eid = self._version_episode[version_id] = self.store.versions.get(version_id).episode_id
        return eid

    def know_episode(self, version_id: int, episode_id: int) -> None:
        """Remember a version's episode read elsewhere (a run's first step need not read it)."""
        self._version_episode.setdefault(version_id, episode_id)

    def forget_episode(self, version_id: int) -> None:
        """A deleted version's id reused in another episode: read it again."""
        self._version_episode.pop(version_id, None)
