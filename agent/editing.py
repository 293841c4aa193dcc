"""The engine's edits: a person's change to step K of a version becomes a new branch (the
old version stays as it was) - thought rewrites, deletions and hints never touch the
environment; an action rewrite runs again from the restored state. Also "resume from here",
new settings for the steps that follow, and why a version may no longer grow."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ContextManager

from pydantic import ValidationError

from agent.engine_errors import EngineError
from agent.engine_reports import _clean_text, _outcome, version_name
from agent.environments import EnvironmentPool
from agent.episode_locks import EpisodeLocks
from agent.version_paths import VersionPaths
from envs.registry import family
from sessions import annotations, exemplar_sets, rollouts
from sessions.store import Store
from trajectory.records import MAX_TEXT, AgentConfig, EditInfo, Episode, Step, ToolCall, Version
from trajectory.tools import ToolCallError


@dataclass
class _Edit:
    """One edit being applied: the version, its steps, the step k it targets, and the record."""

    v: Version
    ep: Episode
    steps: list[Step]
    k: int
    text: str | None
    keep_rest: bool
    old: Step | None
    info: EditInfo
    tr: Any  # the kind's transcript
    api_style: str = "completions"  # the style the edited branch runs with

    @property
    def alf(self) -> bool:
        """Thoughts are turns of their own (the command-line transcript)."""
        return self.tr.thoughts_are_turns

    @property
    def prefix(self) -> list[Step]:
        return self.steps[: self.k - 1]

    def carry(self, rest: list[Step], start: int) -> list[Step]:
        """Later steps carried over unchanged (thought edits with keep_rest), renumbered."""
        if not self.keep_rest:
            return []
        return [
            s.model_copy(
                update={"id": None, "parent_id": None, "index": start + j, "info": {**s.info, "carried_from": s.id}}
            )
            for j, s in enumerate(rest)
        ]


def _clean_reasoning(text: str | None) -> str:
    if not isinstance(text, str) or not text.strip():
        raise EngineError("the new reasoning is empty")
    if len(text) > MAX_TEXT:
        raise EngineError(f"the reasoning is too long ({len(text):,} characters; the limit is {MAX_TEXT:,})")
    return text.strip()


class Editor:
    """The Engine's edits (`engine.editor`). Works under the episode locks of `locks` (the
    Engine's); `paths` reads versions, `envs` restores an environment for an action edit,
    `execute` runs one turn in it and `max_steps` is an episode's step limit (both the
    Engine's); `revision_of` names an exemplar set's current revision (the prompt builder's)."""

    def __init__(
        self,
        store: Store,
        locks: EpisodeLocks,
        paths: VersionPaths,
        envs: EnvironmentPool,
        *,
        execute: Callable[..., Step],
        max_steps: Callable[[Episode], int],
        revision_of: Callable[[str | None, str | None], int | None],
    ):
        self.store = store
        self._locks = locks
        self._paths = paths
        self.envs = envs
        self._execute = execute
        self.max_steps = max_steps
        self._revision_of = revision_of

    def _locked(self, episode_id: int) -> ContextManager[Any]:
        return self._locks.hold(episode_id)

    def frozen_reason(self, version_id: int) -> str | None:
        """Why a version may no longer grow (a FROZEN key), or None: what was relied on
        (annotated, used by an exemplar set, branched from, judged against another) never changes again."""
        if annotations.is_annotated(self.store, version_id):
            return "annotated"
        if exemplar_sets.uses_version(self.store, version_id):
            return "exemplar"
        if self.store.versions.has_child(version_id):
            return "child"
        if self.store.judgments.judged(version_id):
            return "judged"
        return None

    def continuation(self, v: Version, leaf: Step | None) -> Version:
        """The child a frozen version goes on in (inside the caller's transaction). It
        becomes the episode's current version, unless the frozen one was a rollout: then it
        takes the rollout's place in its group and the current version stays as it is."""
        target, _ = self.store.versions.branch(
            v, at_step=leaf, edits=v.edits, draft_thought=v.draft_thought, draft_edit=v.draft_edit, make_current=False
        )
        if not rollouts.follow_member(self.store, v.id, target.id):
            self.store.versions.set_current(v.episode_id, target.id)
        return target

    def reconfigure(self, version_id: int, changes: dict[str, Any]) -> Version:
        """New settings for the steps that follow (model, endpoint, decoding, exemplars,
        ...): a new child version at the same leaf runs with them and becomes current; the
        version keeps the config it ran with. No change: the version itself. Naming an
        exemplar set pins its current revision.
        Raises EngineError for an unknown setting or an invalid value."""
        with self._locked(self.store.versions.get(version_id).episode_id):
            v = self.store.versions.get(version_id)
            old = self.store.versions.config(v.id)
            data = old.model_dump()
            unknown = sorted(set(changes) - set(data))
            if unknown:
                raise EngineError(f"unknown setting{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}")
            try:
                new = AgentConfig.model_validate({**data, **changes})
            except ValidationError as exc:
                err = exc.errors()[0]
                raise EngineError(f"invalid {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
            old_rev = self.store.versions.exemplar_revision(v.id)
            rev = old_rev
            if "exemplar_set" in changes or new.exemplar_set != old.exemplar_set:
                rev = self._revision_of(new.exemplar_set, self._paths.episode(v).task.env)
            if new == old and (rev == old_rev or old_rev is None):
                if rev != old_rev:
                    self.store.versions.pin_exemplar_revision(v.id, rev)
                return self.store.versions.get(v.id)
            steps = self._paths.steps(v)
            status = "open" if v.status == "stopped" else v.status
            child, _ = self.store.versions.branch(
                v,
                at_step=steps[-1] if steps else None,
                config=new,
                exemplar_rev=rev,
                edits=v.edits,
                draft_thought=v.draft_thought,
                draft_edit=v.draft_edit,
                status=status,
                outcome=v.outcome,
            )
            return child

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
        origin: dict[str, Any] | None = None,
    ) -> Version:
        """Edit step k of a version: a new branch from step k-1 (the old version stays as it
        was) that becomes the episode's current version (running with `config` when given).

        kinds: rewrite_thought, delete_thought, insert_thought (a hint placed at k),
        rewrite_action (executed again by the environment). `keep_rest` carries steps
        after k over unchanged - only for thought edits, which never touch the environment.
        `origin`: where a suggested edit came from (critic, prompt hash, what-if groups).
        Raises EngineError for an edit kind unknown or not of this environment's steps.
        """
        apply = self._EDITS.get(kind)
        if apply is None:
            raise EngineError(f"unknown edit {kind!r}")
        with self._locked(self.store.versions.get(version_id).episode_id):
            e = self._edit_context(version_id, k, kind, text, keep_rest)
            e.info.origin = origin
            e.api_style = (config or e.ep.config).api_style
            fam = family(e.ep.task.env)
            if kind not in fam.edit_kinds and kind != "rewrite_reasoning":  # (reasoning: any family's step)
                raise EngineError(f"edit {kind!r} does not apply to {fam.label} steps")
            new, fields = apply(self, e)
            if config is not None:  # the branch alone runs with it; the episode's default stays
                fields.update(
                    config=config, exemplar_rev=self.store.versions.exemplar_revision(e.v.id), set_default=False
                )
            if not make_current:
                fields["make_current"] = False
            return self._commit_edit(e, new, fields)

    def _edit_context(self, version_id: int, k: int, kind: str, text: str | None, keep_rest: bool) -> _Edit:
        """The checks every edit kind shares, and what each needs to build its steps."""
        v = self.store.versions.get(version_id)
        ep = self._paths.episode(v)
        steps = self._paths.steps(v)
        n = len(steps)
        if kind == "insert_thought":
            if not 1 <= k <= n + 1:
                raise EngineError(
                    f"version {version_name(self.store, v)} has {n} steps; a thought can be inserted at 1..{n + 1}"
                )
            if k == n + 1 and v.outcome.done:
                raise EngineError(
                    f"version {version_name(self.store, v)} is finished; insert the thought before a step instead"
                )
        elif not 1 <= k <= n:
            raise EngineError(
                f"version {version_name(self.store, v)} has no step {k} (it has {n} step{'s' if n != 1 else ''})"
            )
        if kind == "rewrite_reasoning":  # (reasoning runs over lines: only its size and emptiness are checked)
            text = _clean_reasoning(text)
        elif kind != "delete_thought":
            text = _clean_text(text, "action" if kind == "rewrite_action" else "thought")
        old = steps[k - 1] if k <= n else None
        info = EditInfo(
            kind=kind,
            index=k,
            replaced_step=old.id if old else None,
            old_thought=old.thought if old else None,
            old_action=old.action if old else None,
            old_reasoning=old.reasoning if old is not None and kind == "rewrite_reasoning" else None,
        )
        tr = family(ep.task.env).transcript
        return _Edit(v, ep, steps, k, text, keep_rest, old, info, tr)

    def _edit_thought(self, e: _Edit) -> tuple[list[Step], dict[str, Any]]:
        """rewrite_thought / delete_thought: the environment is untouched."""
        verb = "rewrite" if e.info.kind == "rewrite_thought" else "delete"
        if e.old is None or e.old.thought is None:
            raise EngineError(f"step {e.k} has no thought to {verb}")
        text = e.text if verb == "rewrite" else None
        if e.alf:  # a thought is its own turn: replace it, or drop it
            new = (
                [Step(index=e.k, thought=text, observation=e.tr.thought_observation, source="human", edit=e.info)]
                if text is not None
                else []
            )
            return new + e.carry(e.steps[e.k :], e.k + len(new)), {}
        if text is not None and not e.keep_rest:  # the model writes the action for the new thought
            return [], {"draft_thought": text, "draft_edit": e.info}
        same = e.old.model_copy(
            update={
                "id": None,
                "parent_id": None,
                "thought": text,
                "source": "human",
                "edit": e.info,
                "call_ids": [],
                "message": None,
            }
        )
        return [same] + e.carry(e.steps[e.k :], e.k + 1), {}

    def _edit_reasoning(self, e: _Edit) -> tuple[list[Step], dict[str, Any]]:
        """rewrite_reasoning: the step's reasoning channel replaced (its thought, action and
        observation kept; the environment untouched); the later steps follow as thought
        edits do (dropped, or carried with keep_rest)."""
        if e.old is None or e.old.reasoning is None:
            raise EngineError(f"step {e.k} has no reasoning to rewrite")
        same = e.old.model_copy(
            update={
                "id": None,
                "parent_id": None,
                "reasoning": e.text,
                "source": "human",
                "edit": e.info,
                "call_ids": [],
                "message": None,
            }
        )
        return [same] + e.carry(e.steps[e.k :], e.k + 1), {}

    def _edit_insert_thought(self, e: _Edit) -> tuple[list[Step], dict[str, Any]]:
        if not e.alf:
            if e.keep_rest:
                raise EngineError(
                    f"in the {family(e.ep.task.env).label} format a thought belongs to a step: rewrite step K's "
                    "thought, or insert without keeping the later steps"
                )
            return [], {"draft_thought": e.text, "draft_edit": e.info}
        new = [Step(index=e.k, thought=e.text, observation=e.tr.thought_observation, source="human", edit=e.info)]
        return new + e.carry(e.steps[e.k - 1 :], e.k + 1), {}

    def _edit_action(self, e: _Edit) -> tuple[list[Step], dict[str, Any]]:
        """rewrite_action: executed again from the restored state of step k-1."""
        if e.old.action is None:
            raise EngineError(f"step {e.k} is a thought, not an action; use a thought edit")
        if e.keep_rest:
            raise EngineError("an action edit changes the environment, so the later steps cannot be kept")
        if e.alf and e.tr.split_thought(e.text) is not None:
            raise EngineError("that is a thought ('think: ...'); use a thought edit")
        action, call = self._action_call(e)  # checked before anything is written
        env = self.envs.restore(e.ep, e.prefix)
        new = self._execute(e.ep, env, e.prefix, e.old.thought, action, source="human", edit=e.info)
        if call is not None or e.old.reasoning is not None:
            new = new.model_copy(update={"tool_call": call, "reasoning": e.old.reasoning})
        return [new], {}

    def _action_call(self, e: _Edit) -> tuple[str, ToolCall | None]:
        """The rewritten action's text form and, in the `tools` style, its tool call: the text
        may be the family's text form (`Search[Rell]`, `go to desk 1`) or the call as JSON
        `{"name": ..., "arguments": {...}}`, validated against the tool's schema. In the
        other styles a text action stays as written (the environment judges it, as in the
        paper's format); a JSON call is turned into its text form."""
        tools = e.tr.tools
        text = e.text or ""
        tools_style = e.api_style == "tools"
        try:
            if text.lstrip().startswith("{"):
                name, args = tools.parse_call_text(text)
            elif tools_style:
                name, args = tools.to_call(text)
            else:
                return text, None
            action = tools.to_action(name, args)
        except ToolCallError as exc:
            raise EngineError(f"not an action of this environment's tools: {exc}") from None
        if not tools_style:
            return action, None
        old = e.old.tool_call if e.old is not None else None
        return action, ToolCall(id=old.id if old is not None else f"call_{e.k}", name=name, arguments=args)

    def _commit_edit(self, e: _Edit, new: list[Step], fields: dict[str, Any]) -> Version:
        """Write the branch: earlier edits kept (renumbered when later steps moved), the
        outcome carried when the kept steps finish the episode."""
        edits = [x for x in e.v.edits if (x.index or 0) < e.k or e.keep_rest]
        if e.keep_rest and e.alf:
            shift = {"insert_thought": 1, "delete_thought": -1}.get(e.info.kind, 0)
            edits = [
                x if (x.index or 0) < e.k else x.model_copy(update={"index": (x.index or 0) + shift}) for x in edits
            ]
        fields = {"edits": [*edits, e.info], **fields}
        if new and new[-1].done:
            fields["status"] = "done"
            fields["outcome"] = _outcome(e.ep.task.env, new[-1].reward, new[-1].info, True)
        elif e.keep_rest and len(e.prefix) + len(new) >= self.max_steps(e.ep) and e.v.outcome.done:
            fields["status"], fields["outcome"] = "done", e.v.outcome
        at = e.prefix[-1] if e.prefix else None
        version, rows = self.store.versions.branch(e.v, at_step=at, steps=new, **fields)
        if e.info.kind == "rewrite_action" and rows:
            live = self.envs.live(e.ep.id)
            live.tokens[rows[-1].id] = live.env.state()
            live.at = rows[-1].id
        return version

    def branch(
        self, version_id: int, k: int, *, config: AgentConfig | None = None, make_current: bool = True
    ) -> Version:
        """ "Resume from here": a new version that keeps steps 1..k and goes on from there
        (with `config`: running with it; rollouts pin their sampling settings this way).
        Raises EngineError when the version has no step k."""
        v = self.store.versions.get(version_id)
        steps = self._paths.steps(v)
        if not 0 <= k <= len(steps):
            raise EngineError(f"version {version_name(self.store, v)} has no step {k}")
        at = steps[k - 1] if k else None
        edits = [e for e in v.edits if (e.index or 0) <= k]
        fields: dict[str, Any] = {"edits": edits}
        if at is not None and at.done:
            kind = self.store.episodes.get(v.episode_id).task.env
            fields.update(status="done", outcome=_outcome(kind, at.reward, at.info, True))
        if config is not None:  # the branch alone runs with it; the episode's default stays
            fields.update(config=config, exemplar_rev=self.store.versions.exemplar_revision(v.id), set_default=False)
        version, _ = self.store.versions.branch(v, at_step=at, steps=[], make_current=make_current, **fields)
        return version

    _EDITS = {
        "rewrite_thought": _edit_thought,
        "delete_thought": _edit_thought,
        "insert_thought": _edit_insert_thought,
        "rewrite_action": _edit_action,
        "rewrite_reasoning": _edit_reasoning,
    }
