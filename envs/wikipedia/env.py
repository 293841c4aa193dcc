"""The paper's Wikipedia API as an `Environment`: search[entity], lookup[keyword],
finish[answer], with the original ReAct observation strings (see text.py) over any
backend. Pages an episode reads go to the blob store; the state is (page blob key,
lookup keyword, cursor, answer), so restore never refetches."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from envs.base import BlobStore, EnvError, StepResult
from envs.wikipedia import text
from envs.wikipedia.backend import Backend
from envs.wikipedia.scoring import exact_match, f1, fever_correct
from trajectory.records import Task

NO_PAGE = "No page is open yet: use search[entity] first, then lookup[keyword]."
EMPTY_ENTITY = "Search needs an entity, e.g. search[Colorado orogeny]."
SNAPSHOT_MAX = 150
_SNAP_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode  # (json.dumps builds one per call)


class _MemoryBlobs:
    def __init__(self):
        self.data: dict[str, bytes] = {}

    def put_blob(self, data: bytes) -> str:
        key = hashlib.sha256(data).hexdigest()
        self.data[key] = data
        return key

    def get_blob(self, key: str) -> bytes | None:
        return self.data.get(key)


def _action_arg(action: str, verb: str) -> str | None:
    """`verb[...]` -> its argument (brackets inside are kept), else None."""
    if action.startswith(verb + "[") and action.endswith("]"):
        return action[len(verb) + 1 : -1]
    return None


class WikiEnv:
    def __init__(
        self,
        kind: str,
        backend: Backend,
        blobs: BlobStore | None = None,
        default_max_steps: int | None = None,
        friendly_lookup: bool = False,
    ):
        if kind not in ("hotpotqa", "fever"):
            raise EnvError(f"WikiEnv is for hotpotqa or fever, not {kind!r}")
        self.kind = kind
        self.default_max_steps = default_max_steps or 7  # the notebooks' `for i in range(1, 8)`
        # lookup before any search: the original answers "No more results."; an explanation
        # is an option (off by default, since a model reads whatever the environment says)
        self.friendly_lookup = friendly_lookup
        self.backend = backend
        self.blobs: BlobStore = blobs if blobs is not None else _MemoryBlobs()
        self._pages: dict[str, tuple[str, list[str], list[str]]] = {}  # key -> (text, sents, lowered)
        self.task: Task | None = None
        self._clear()

    def _clear(self) -> None:
        self.page_key: str | None = None
        self.keyword: str | None = None
        self.cursor = 0
        self.answer: str | None = None
        self.obs = ""
        self._matches: list[str] | None = None

    # -- Environment protocol --------------------------------------------------------------
    def reset(self, task: Task) -> str:
        if task.env != self.kind:
            raise EnvError(f"task {task.key} is a {task.env} task, this environment is {self.kind}")
        self.task = task
        self._clear()
        self.obs = task.text
        return task.text

    def step(self, action: str) -> StepResult:
        if self.task is None:
            raise EnvError("reset the environment with a task before stepping")
        # As the notebooks: `env.step(action[0].lower() + action[1:])`, and the env strips.
        # The order matters: "\n\nFinish[x]" lower-cases the newline and stays "Finish[x]",
        # an invalid action, exactly as in the original.
        act = (action[:1].lower() + action[1:]).strip()
        if self.answer is not None:  # finished: the original repeats its last observation
            return StepResult(self.obs, done=True, reward=0.0)
        info: dict[str, Any] = {}
        if (entity := _action_arg(act, "search")) is not None:
            obs, info = self._search(entity)
        elif (keyword := _action_arg(act, "lookup")) is not None:
            obs = self._lookup(keyword)
        elif (answer := _action_arg(act, "finish")) is not None:
            return self._finish(answer)
        elif _action_arg(act, "think") is not None:
            obs = "Nice thought."
        else:
            obs = f"Invalid action: {act}"
        self.obs = text.clean_observation(obs)
        return StepResult(self.obs, done=False, reward=0.0, info=info)

    def give_up(self) -> StepResult:
        """What the notebooks do when the step limit is reached: `finish[]`."""
        if self.answer is not None:
            return StepResult(self.obs, done=True, reward=0.0)
        return self._finish("")

    def state(self) -> Any:
        return (self.page_key, self.keyword, self.cursor, self.answer, self.obs)

    def set_state(self, token: Any) -> None:
        page_key, keyword, cursor, answer, obs = token
        self._load(page_key)
        self.page_key, self.keyword, self.cursor, self.answer, self.obs = page_key, keyword, cursor, answer, obs
        self._matches = None

    def snapshot(self) -> dict[str, Any] | None:
        snap = {"p": self.page_key, "k": self.keyword, "c": self.cursor, "a": self.answer}
        if len(_SNAP_JSON(snap).encode()) <= SNAPSHOT_MAX:
            return snap
        # a long keyword or answer goes to the blob store, the snapshot keeps its key
        extra = json.dumps({"k": self.keyword, "a": self.answer}, ensure_ascii=False).encode()
        return {"p": self.page_key, "c": self.cursor, "x": self.blobs.put_blob(extra)}

    def restore(self, snap: dict[str, Any]) -> None:
        if self.task is None:
            raise EnvError("reset the environment with the episode's task before restoring")
        if "x" in snap:
            raw = self.blobs.get_blob(snap["x"])
            if raw is None:
                raise EnvError(f"snapshot data {snap['x']} is missing from the blob store")
            extra = json.loads(raw)
            keyword, answer = extra.get("k"), extra.get("a")
        else:
            keyword, answer = snap.get("k"), snap.get("a")
        page_key = snap.get("p")
        self._load(page_key)
        self.page_key, self.keyword, self.cursor, self.answer = page_key, keyword, int(snap.get("c") or 0), answer
        self._matches = None
        self.obs = self._finished_obs(answer) if answer is not None else ""

    def admissible_actions(self) -> list[str] | None:
        return None

    def close(self) -> None:
        self.backend.close()

    # -- actions -------------------------------------------------------------------------
    def _search(self, entity: str) -> tuple[str, dict]:
        if not entity.strip():
            return EMPTY_ENTITY, {}
        out = self.backend.search(entity)
        if out.kind == "error":
            return f"Search failed: {out.error}. Try again.", {"error": out.error}
        if out.kind == "miss":
            return text.miss_observation(entity, out.similar), {}
        if out.kind == "disambiguation":
            return text.miss_observation(entity, out.similar, disambiguation=True), {"title": out.title}
        key = self._store(out.page or "")
        self.page_key, self.keyword, self.cursor, self._matches = key, None, 0, None
        return text.page_observation(out.page or ""), {"title": out.title}

    def _lookup(self, keyword: str) -> str:
        if self.page_key is None:
            return NO_PAGE if self.friendly_lookup else "No more results.\n"
        if self.keyword != keyword or self._matches is None:
            if self.keyword != keyword:
                self.cursor = 0
            self.keyword = keyword
            _, sents, lowered = self._pages[self.page_key]
            k = keyword.lower()
            self._matches = [s for s, low in zip(sents, lowered) if k in low]
        n = len(self._matches)
        if self.cursor >= n:
            return "No more results.\n"
        self.cursor += 1
        return f"(Result {self.cursor} / {n}) " + self._matches[self.cursor - 1]

    def _score(self, answer: str) -> tuple[int, dict]:
        gold = self.task.gold if self.task else None
        if self.kind == "fever":
            correct = gold is not None and fever_correct(answer, gold)
            return int(correct), {"answer": answer, "gold": gold, "correct": correct if gold is not None else None}
        if gold is None:
            return 0, {"answer": answer, "gold": None, "em": None, "f1": None}
        em = int(exact_match(answer, gold))
        return em, {"answer": answer, "gold": gold, "em": em, "f1": f1(answer, gold)}

    def _finished_obs(self, answer: str) -> str:
        return f"Episode finished, reward = {self._score(answer)[0]}\n"

    def _finish(self, answer: str) -> StepResult:
        reward, info = self._score(answer)
        self.answer = answer
        self.obs = f"Episode finished, reward = {reward}\n"
        return StepResult(self.obs, done=True, reward=float(reward), info=info)

    # -- pages ---------------------------------------------------------------------------
    def _store(self, page: str) -> str:
        key = self.blobs.put_blob(page.encode("utf-8"))
        if key not in self._pages:
            sents = text.sentences(page)
            self._pages[key] = (page, sents, [s.lower() for s in sents])
        return key

    def _load(self, key: str | None) -> None:
        if key is None or key in self._pages:
            return
        raw = self.blobs.get_blob(key)
        if raw is None:
            raise EnvError(f"page {key} is missing from the blob store; cannot restore")
        page = raw.decode("utf-8")
        sents = text.sentences(page)
        self._pages[key] = (page, sents, [s.lower() for s in sents])
