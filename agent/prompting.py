"""The engine's model side: one client per config, a call with its record (cancellable,
chat echoes stripped), and the exact prompt of a version's next call - the kind's transcript
over the exemplars the version pinned."""

from __future__ import annotations

from agent import exemplars
from agent.client import CallWatch, ModelClient, ModelError
from agent.engine_records import EngineError, ModelCallFailed, StepCancelled, _strip_echo, qa_method_of
from envs.registry import family
from sessions import exemplar_sets
from sessions.store import StoreError
from trajectory.answer_formats import qa_prompt
from trajectory.kinds import ModelRequest
from trajectory.records import AgentConfig, Episode, ModelCall, Step, Version


class PromptingMixin:
    """Part of `agent.engine.Engine` (uses its store and client cache)."""

    def client(self, config: AgentConfig):
        key = config.model_dump_json()
        if key not in self._clients:
            if self._client_factory:
                self._clients[key] = self._client_factory(config)
            else:
                cache = self.store.calls if config.cache else None
                self._clients[key] = ModelClient(config, api_key=self.api_key, cache=cache,
                                                 on_retry=lambda n, why: self.on_retry and self.on_retry(n, why))
        return self._clients[key]

    def _take_kept_calls(self) -> None:
        """Record the answers a blocked write kept (the pending file) and hold them for their
        episode: the next attempt of the same request uses one, whatever the cache setting
        (it was paid for; `--no-cache` means "do not answer from earlier requests")."""
        taken: list[tuple[int, ModelCall]] = []
        self.store.calls.record_pending(into=taken)
        with self._guard:
            for episode_id, call in taken:
                if call.error is None and call.completion is not None:
                    self._kept.setdefault(episode_id, []).append(call)

    def _complete(self, episode: Episode, prompt: str, stop: list[str], calls: list[ModelCall], *, purpose: str,
                  chat: str, watch: CallWatch | None = None):
        extra = {"watch": watch} if watch is not None else {}
        client = self.client(self.model_config(episode))
        got = None
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
            text = _strip_echo(text, prompt)
        return text

    def prompt(self, version_id: int) -> str:
        """The exact text the next model call of this version would be sent: a pure
        function of the version's pinned config and exemplar revision, task and steps."""
        v = self.store.versions.get(version_id)
        ep = self._episode(v)
        steps = self.steps(v)
        rev = self.store.versions.exemplar_revision(v.id)
        qa = qa_method_of(v, steps)
        if qa is not None:  # Standard / CoT / CoT-SC: the one prompt every sample was sent
            return self._qa_prompt(ep, rev, qa)[0]
        return self._request(ep, steps, rev, v.draft_thought).prompt

    def qa_prompt(self, version_id: int, method: str) -> tuple[str, list[str]]:
        """(prompt, stop) of a Standard / CoT answer of this version: its pinned config and
        exemplar revision (pinned here at first use, as a ReAct step pins them)."""
        v = self.store.versions.get(version_id)
        ep = self._episode(v)
        return self._qa_prompt(ep, self._pin_exemplars(v, ep), method)

    def _qa_prompt(self, ep: Episode, rev: int | None, method: str) -> tuple[str, list[str]]:
        kind = "standard" if method == "standard" else "cot"
        try:
            block = exemplars.qa_exemplars(exemplars.prompt_dict(ep.task.env, ep.config.exemplar_set, self.store, rev),
                                           ep.task.env, kind)
        except (exemplars.ExemplarError, StoreError) as exc:
            raise EngineError(str(exc)) from None
        return qa_prompt(block, ep.task.text, kind)

    def _request(self, ep: Episode, steps: list[Step], rev: int | None, draft: str | None) -> ModelRequest:
        """The next model call, as the kind's transcript words it from the exemplars."""
        try:
            prompts = exemplars.prompt_dict(ep.task.env, ep.config.exemplar_set, self.store, rev)
            return family(ep.task.env).transcript.request(prompts, ep.task, steps, ep.config.style, draft)
        except (exemplars.ExemplarError, StoreError) as exc:
            raise EngineError(str(exc)) from None

    def _pin_exemplars(self, v: Version, ep: Episode) -> int | None:
        """The exemplar-set revision the version's prompts use, pinned at its first use."""
        rev = self.store.versions.exemplar_revision(v.id)
        if rev is None and ep.config.exemplar_set not in (None, "builtin"):
            rev = self._revision_of(ep.config.exemplar_set)
            self.store.versions.pin_exemplar_revision(v.id, rev)
        return rev

    def _revision_of(self, set_name: str | None) -> int | None:
        if set_name in (None, "builtin"):
            return None
        try:
            return exemplar_sets.current_revision(self.store, set_name)
        except exemplar_sets.ExemplarSetError as exc:
            raise EngineError(str(exc)) from None
