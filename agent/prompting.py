"""The engine's model side: one client per config, a call with its record (cancellable,
chat echoes stripped), and the exact prompt of a version's next call - the kind's transcript
over the exemplars the version pinned."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any, Callable

from agent import conversing, exemplars
from agent.client import CallWatch, ModelClient, ModelError
from agent.conversing import strip_echo
from agent.engine_errors import EngineError, ModelCallFailed, StepCancelled
from agent.engine_reports import qa_method_of
from agent.version_paths import PATH_CACHE, VersionPaths
from envs.registry import family
from sessions import exemplar_sets
from sessions.connection import Fence
from sessions.store import Store, StoreError, VersionFrozen
from trajectory.answer_formats import qa_prompt
from trajectory.conversation import CHAT_STYLES
from trajectory.kinds import ModelRequest
from trajectory.records import AgentConfig, Episode, ModelCall, Step, Version


class PromptBuilder:
    """The Engine's model side (`engine.prompts`): the prompt of a version's next call, the
    call itself, and the exemplar revision a version pins. `model_config` is the config a
    call of an episode runs with (the environment pool's endpoint check); `paths` reads
    versions; `client_factory` (tests, benchmarks) replaces the ModelClient per config."""

    def __init__(
        self,
        store: Store,
        paths: VersionPaths,
        model_config: Callable[[Episode], AgentConfig],
        *,
        api_key: str | None = None,
        client_factory: Callable[[AgentConfig], Any] | None = None,
        on_retry: Callable[[int, str], None] | None = None,
    ):
        self.store = store
        self.paths = paths
        self.model_config = model_config
        self.api_key = api_key
        self.on_retry = on_retry  # (attempt, reason) before each retry of a model call
        self._client_factory = client_factory
        self._clients: dict[Any, Any] = {}
        self._guard = threading.Lock()  # the kept answers and the fixed prompt parts
        self._kept: dict[int, list[ModelCall]] = {}  # episode -> paid answers a blocked write kept, not used yet
        self._prefixes: OrderedDict[tuple, tuple[dict[str, str], Any]] = OrderedDict()  # `_fixed`'s, bounded
        self._last: tuple[AgentConfig, Any] | None = None  # (the config asked last, its client)

    def client(self, config: AgentConfig):
        """The client of a config's values (one per distinct config); a run asks with the same
        config object at every call, so that one is known without reading its values (it is
        held here: its id is not reused meanwhile; a config is never changed in place)."""
        last = self._last
        if last is not None and last[0] is config:
            return last[1]
        key = _values_key(config)
        if key not in self._clients:
            if self._client_factory:
                self._clients[key] = self._client_factory(config)
            else:
                cache = self.store.calls if config.cache else None
                self._clients[key] = ModelClient(
                    config,
                    api_key=self.api_key,
                    cache=cache,
                    on_retry=lambda n, why: self.on_retry and self.on_retry(n, why),
                )
        self._last = (config, self._clients[key])
        return self._clients[key]

    def take_kept_calls(self) -> None:
        """Record the answers a blocked write kept (the pending file) and hold them for their
        episode: the next attempt of the same request uses one, whatever the cache setting
        (it was paid for; `--no-cache` means "do not answer from earlier requests")."""
        taken: list[tuple[int, ModelCall]] = []
        self.store.calls.record_pending(into=taken)
        if not taken:  # (every step asks; nearly always there is nothing)
            return
        with self._guard:
            for episode_id, call in taken:
                if call.error is None and call.completion is not None:
                    self._kept.setdefault(episode_id, []).append(call)

    def _complete(
        self,
        episode: Episode,
        prompt: str,
        stop: list[str],
        calls: list[ModelCall],
        *,
        purpose: str,
        chat: str,
        watch: CallWatch | None = None,
        fixed: str | None = None,
    ):
        extra: dict[str, Any] = {"watch": watch} if watch is not None else {}
        client = self.client(self.model_config(episode))
        if fixed and isinstance(client, ModelClient):  # (the part every call of the task starts with)
            extra["fixed"] = fixed
        got = None
        if self._kept:  # (nearly always empty: no lock then)
            with self._guard:  # (rollouts of one episode ask at once)
                kept = self._kept.get(episode.id)
                if kept and hasattr(client, "kept_answer"):
                    got = client.kept_answer(kept, prompt, stop, purpose=purpose, chat_instruction=chat)
                    if not kept:
                        del self._kept[episode.id]
        try:
            text, call = got or client.complete(prompt, stop, purpose=purpose, chat_instruction=chat, **extra)
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
            text = strip_echo(text, prompt)
        return text

    def ask(
        self,
        ep: Episode,
        steps: list[Step],
        rev: int | None,
        draft: str | None,
        calls: list[ModelCall],
        watch: CallWatch | None,
    ) -> tuple[str | None, str | None, dict[str, Any]]:
        """(thought, action, the step's other fields) from the model: the transcript's request,
        and any follow-up it asks for (the paper's action-only fallback). The conversation
        styles give the step's reasoning, tool call, raw message and parse error too."""
        transcript = family(ep.task.env).transcript
        if ep.config.api_style in CHAT_STYLES:
            return self._converse(ep, steps, rev, draft, calls, watch)
        req, fixed = self._request_fixed(ep, steps, rev, draft)
        while req is not None:
            text = self._complete(
                ep, req.prompt, req.stop, calls, purpose=req.purpose, chat=req.chat, watch=watch, fixed=fixed
            )
            reply = transcript.parse(req, text)
            req = reply.then
        return reply.thought, reply.action, {}

    def _converse(
        self,
        ep: Episode,
        steps: list[Step],
        rev: int | None,
        draft: str | None,
        calls: list[ModelCall],
        watch: CallWatch | None,
    ) -> tuple[str | None, str | None, dict[str, Any]]:
        """A step of the messages / tools style: the request, its answer's parse, and the
        fallback's when the answer asks for one (its raw message kept as the first's `fallback`)."""
        transcript = family(ep.task.env).transcript
        conv, fixed = self._conversation(ep, steps, rev, draft)
        extra: dict[str, Any] = {}
        thought = action = None
        while conv is not None:
            text = self._complete(
                ep, conv.model.prompt, conv.model.stop, calls, purpose=conv.model.purpose, chat="", watch=watch
            )
            turn = conversing.parse(transcript, conv, text, fixed, ep.task, steps)
            if extra:  # the fallback's answer: the first message keeps it; the reasonings are joined
                reasoning = "\n\n".join(r for r in (extra.get("reasoning"), turn.extra.get("reasoning")) if r)
                extra = {**turn.extra, "message": {**extra["message"], "fallback": turn.extra["message"]}}
                if reasoning:
                    extra["reasoning"] = reasoning
            else:
                extra = dict(turn.extra)
            thought, action, conv = turn.thought, turn.action, turn.then
        return thought, action, extra

    def _conversation(
        self, ep: Episode, steps: list[Step], rev: int | None, draft: str | None
    ) -> tuple[conversing.ConvRequest, conversing.Fixed]:
        """The conversation-style request of a version's next call (with its text-style twin,
        whose cue, stop and fallback it shares) and the part no step changes."""
        text, _ = self._request_fixed(ep, steps, rev, draft)
        tr = family(ep.task.env).transcript
        style, api = ep.config.style, ep.config.api_style
        try:
            _, fixed = self._fixed(
                ep,
                rev,
                ("conversation", style, api),
                lambda prompts: conversing.fixed_messages(tr, prompts, ep.task, style, api),
            )
        except exemplars.ExemplarError as exc:
            raise EngineError(exemplars.with_advice(exc, ep.task.env, ep.config.exemplar_set)) from None
        except StoreError as exc:
            raise EngineError(str(exc)) from None
        return conversing.request(tr, fixed, ep.task, steps, api, text), fixed

    def prompt(self, version_id: int) -> str:
        """The exact text the next model call of this version would be sent: a pure
        function of the version's pinned config and exemplar revision, task and steps."""
        v = self.store.versions.get(version_id)
        ep = self.paths.episode(v)
        steps = self.paths.steps(v)
        rev = self.store.versions.exemplar_revision(v.id)
        qa = qa_method_of(v, steps)
        if qa is not None:  # Standard / CoT / CoT-SC: the one prompt every sample was sent
            return self._qa_prompt(ep, rev, qa)[0]
        return self._request(ep, steps, rev, v.draft_thought).prompt

    def request_body(self, version_id: int) -> dict[str, Any] | None:
        """The body the next call of a conversation-style version sends (model, sampling fields,
        and the pinned messages and tools); None for the text styles."""
        v = self.store.versions.get(version_id)
        ep = self.paths.episode(v)
        steps = self.paths.steps(v)
        if ep.config.api_style not in CHAT_STYLES or qa_method_of(v, steps) is not None:
            return None
        cfg = ep.config
        req = self._request(ep, steps, self.store.versions.exemplar_revision(v.id), v.draft_thought)
        body = {"model": cfg.model, "temperature": cfg.temperature, "top_p": cfg.top_p, "max_tokens": cfg.max_tokens}
        if req.stop:
            body["stop"] = req.stop
        return {**body, **json.loads(req.prompt)}

    def qa_prompt(self, version_id: int, method: str) -> tuple[str, list[str]]:
        """(prompt, stop) of a Standard / CoT answer of this version: its pinned config and
        exemplar revision (pinned here at first use, as a ReAct step pins them)."""
        v = self.store.versions.get(version_id)
        ep = self.paths.episode(v)
        return self._qa_prompt(ep, self.pin_exemplars(v, ep), method)

    def _qa_prompt(self, ep: Episode, rev: int | None, method: str) -> tuple[str, list[str]]:
        kind = "standard" if method == "standard" else "cot"
        try:
            prompt, stop = self._fixed(
                ep,
                rev,
                ("qa", kind),
                lambda prompts: qa_prompt(exemplars.qa_exemplars(prompts, ep.task.env, kind), ep.task.text, kind),
            )[1]
        except (exemplars.ExemplarError, StoreError) as exc:
            raise EngineError(str(exc)) from None
        return prompt, list(stop)

    def _request(self, ep: Episode, steps: list[Step], rev: int | None, draft: str | None) -> ModelRequest:
        """The next model call, as the kind's transcript words it from the exemplars (the
        part no step changes built once: `_fixed`); in the conversation styles, its prompt
        is the request's JSON (messages, and tools)."""
        if ep.config.api_style in CHAT_STYLES:
            return self._conversation(ep, steps, rev, draft)[0].model
        return self._request_fixed(ep, steps, rev, draft)[0]

    def _request_fixed(
        self, ep: Episode, steps: list[Step], rev: int | None, draft: str | None
    ) -> tuple[ModelRequest, str | None]:
        """(`_request`, the fixed part its prompt starts with when the transcript builds one)."""
        tr = family(ep.task.env).transcript
        build = getattr(tr, "fixed_prefix", None)  # (a plugin's own transcript may not offer it)
        try:
            if build is None:
                prompts = exemplars.prompt_dict(ep.task.env, ep.config.exemplar_set, self.store, rev)
                return tr.request(prompts, ep.task, steps, ep.config.style, draft), None
            prompts, fixed = self._fixed(
                ep, rev, ("request", ep.config.style), lambda prompts: build(prompts, ep.task, ep.config.style)
            )
            return tr.request(prompts, ep.task, steps, ep.config.style, draft, fixed=fixed), fixed
        except exemplars.ExemplarError as exc:
            raise EngineError(exemplars.with_advice(exc, ep.task.env, ep.config.exemplar_set)) from None
        except StoreError as exc:
            raise EngineError(str(exc)) from None

    def _fixed(
        self, ep: Episode, rev: int | None, what: tuple, build: Callable[[dict[str, str]], Any]
    ) -> tuple[dict[str, str], Any]:
        """(exemplars, `build(exemplars)`) for the part of an episode's prompts that no step
        changes, made once per task, `what` and exemplar revision (a revision never changes;
        so the exemplars are neither re-read nor re-encoded on every call). A named set not
        pinned yet (a version's prompt before its first step) is read as it is now, every time."""
        key = (ep.task.env, ep.task.type, ep.task.text, ep.config.exemplar_set or "builtin", rev, *what)
        keep = rev is not None or ep.config.exemplar_set in (None, "builtin")
        with self._guard:
            made = self._prefixes.get(key) if keep else None
            if made is not None:
                self._prefixes.move_to_end(key)
                return made
        prompts = exemplars.prompt_dict(ep.task.env, ep.config.exemplar_set, self.store, rev)
        made = (prompts, build(prompts))
        if keep:
            with self._guard:
                self._prefixes[key] = made
                while len(self._prefixes) > PATH_CACHE:
                    self._prefixes.popitem(last=False)
        return made

    def pin_exemplars(self, v: Version, ep: Episode, fence: Fence | None = None) -> int | None:
        """The exemplar-set revision the version's prompts use, pinned at its first use
        (`fence`: an experiment item's claim, checked as it is pinned)."""
        known, rev = self.paths.revision(v)
        if known:  # pinned once: it never changes
            return rev
        rev = self.store.versions.exemplar_revision(v.id)
        if rev is None:  # (a version made before built-in exemplars were pinned too: pinned now)
            rev = self.revision_of(ep.config.exemplar_set, ep.task.env)
            if rev is None:  # a family with no built-in exemplars: nothing to pin
                self.paths.remember_revision(v, None)
                return None
            try:  # (remembered once read back: another process may have pinned it first)
                self.store.versions.pin_exemplar_revision(v.id, rev, fence=fence)
            except VersionFrozen:  # frozen unpinned: never pinned now; its step goes on in a child version
                pass
            return rev
        self.paths.remember_revision(v, rev)
        return rev

    def revision_of(self, set_name: str | None, env: str | None = None) -> int | None:
        """The current revision of an exemplar set, or of `env`'s built-in exemplars as this
        install ships them (None without `env`, or when the family ships none).
        Raises EngineError for an unknown exemplar set."""
        if set_name in (None, "builtin"):
            return exemplars.builtin_revision(self.store, env) if env is not None else None
        try:
            return exemplar_sets.current_revision(self.store, set_name)
        except exemplar_sets.ExemplarSetError as exc:
            raise EngineError(str(exc)) from None


def _values_key(config: AgentConfig) -> Any:
    """The config's identity by content: its field values (scalars all, which say what its
    JSON would, without dumping it at every call); its JSON if a value cannot be hashed."""
    key = (type(config), tuple((k, type(v), v) for k, v in config.__dict__.items()))
    try:
        hash(key)
    except TypeError:
        return config.model_dump_json()
    return key
