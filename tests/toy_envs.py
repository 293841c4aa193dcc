"""Minimal environments defined inside the tests, standing in for ALFWorld and Wikipedia in
engine unit tests (the issue allows this; the CLI tests use the real environments).

`ToyRoom` speaks the ALFWorld format (no cross-process snapshot: resume must replay);
`ToyWiki` speaks the Wikipedia format (small snapshots: resume restores them).
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from envs.base import EnvError, EnvFamily, StepResult
from trajectory.records import Task

ROOM_TEXT = (
    "You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a shelf 1, "
    "and a table 1.\nYour task is to: put a mug in table."
)


class ToyRoom:
    """Take the mug from the cabinet (open it first) and put it on the table."""

    kind = "alfworld"
    default_max_steps = 50

    def __init__(self, options: dict[str, Any] | None = None):
        self.options = options or {}
        self.steps_taken = 0
        self.resets = 0

    def reset(self, task: Task) -> str:
        self.resets += 1
        self.s = {"at": None, "open": False, "holding": None, "mug": "cabinet 1", "won": False}
        return task.text

    def step(self, action: str) -> StepResult:
        self.steps_taken += 1
        s = self.s
        if action.startswith("think:"):
            return StepResult("OK.")
        if self.options.get("drift") and action == "go to cabinet 1":
            return StepResult("The cabinet 1 is painted blue now.")
        obs = "Nothing happens."
        if action.startswith("go to "):
            s["at"] = action[6:]
            if s["at"] == "cabinet 1":
                obs = "The cabinet 1 is open. In it, you see a mug 1." if s["open"] else "The cabinet 1 is closed."
            elif s["at"] == "table 1":
                obs = (
                    "On the table 1, you see a mug 1." if s["mug"] == "table 1" else "On the table 1, you see nothing."
                )
            else:
                obs = f"On the {s['at']}, you see nothing."
        elif action == "open cabinet 1" and s["at"] == "cabinet 1":
            s["open"] = True
            obs = "You open the cabinet 1. The cabinet 1 is open. In it, you see a mug 1."
        elif action == "take mug 1 from cabinet 1" and s["at"] == "cabinet 1" and s["open"] and s["mug"] == "cabinet 1":
            s["holding"], s["mug"] = "mug 1", None
            obs = "You pick up the mug 1 from the cabinet 1."
        elif action == "put mug 1 in/on table 1" and s["at"] == "table 1" and s["holding"]:
            s["holding"], s["mug"], s["won"] = None, "table 1", True
            return StepResult("You put the mug 1 in/on the table 1.", done=True, reward=1.0, info={"won": True})
        return StepResult(obs, info={"won": False})

    def state(self) -> Any:
        return copy.deepcopy(self.s)

    def set_state(self, token: Any) -> None:
        self.s = copy.deepcopy(token)

    def snapshot(self) -> dict | None:
        return None

    def restore(self, snap: dict) -> None:  # pragma: no cover - snapshot() is None
        raise EnvError("ToyRoom has no snapshots")

    def admissible_actions(self) -> list[str]:
        return [
            "go to cabinet 1",
            "go to table 1",
            "open cabinet 1",
            "take mug 1 from cabinet 1",
            "put mug 1 in/on table 1",
        ]

    def close(self) -> None:
        pass


PAGES = {
    "Velmora": "Velmora is a province. Its capital is Marrowgate. Velmora was founded in 1712.",
    "Marrowgate": "Marrowgate is a town. It lies on the river Sel. Marrowgate has 12,000 people. The town was founded in 1650.",
}


class ToyWiki:
    kind = "hotpotqa"
    default_max_steps = 7

    def __init__(self, options: dict[str, Any] | None = None):
        self.options = options or {}
        self.steps_taken = 0

    def reset(self, task: Task) -> str:
        self.task = task
        self.s = {"page": None, "kw": None, "cnt": 0, "answer": None}
        return task.text

    def _sentences(self) -> list[str]:
        page = PAGES.get(self.s["page"] or "", "")
        return [x.strip().rstrip(".") + "." for x in page.split(". ") if x.strip()]

    def step(self, action: str) -> StepResult:
        self.steps_taken += 1
        a = action.strip()
        low = a[:1].lower() + a[1:]
        if low.startswith("search[") and low.endswith("]"):
            ent = a[7:-1]
            if ent in PAGES:
                self.s.update(page=ent, kw=None, cnt=0)
                return StepResult(" ".join(x.rstrip(".") + "." for x in self._sentences()[:5]).replace("..", "."))
            return StepResult(f"Could not find {ent}. Similar: {list(PAGES)[:5]}.")
        if low.startswith("lookup[") and low.endswith("]"):
            kw = a[7:-1]
            hits = [x for x in self._sentences() if kw.lower() in x.lower()]
            if self.s["kw"] != kw:
                self.s.update(kw=kw, cnt=0)
            if self.s["cnt"] >= len(hits):
                return StepResult("No more results.\n")
            self.s["cnt"] += 1
            return StepResult(f"(Result {self.s['cnt']} / {len(hits)}) {hits[self.s['cnt'] - 1]}")
        if low.startswith("finish[") and low.endswith("]"):
            return self._finish(a[7:-1])
        return StepResult(f"Invalid action: {a}")

    def _finish(self, answer: str) -> StepResult:
        self.s["answer"] = answer
        em = float(answer.strip().lower() == (self.task.gold or "").lower())
        return StepResult(
            f"Episode finished, reward = {int(em)}\n",
            done=True,
            reward=em,
            info={"answer": answer, "gold": self.task.gold, "em": em, "f1": em},
        )

    def give_up(self) -> StepResult:
        return self._finish("")

    def state(self) -> Any:
        return dict(self.s)

    def set_state(self, token: Any) -> None:
        self.s = dict(token)

    def snapshot(self) -> dict | None:
        return dict(self.s)

    def restore(self, snap: dict) -> None:
        self.s = dict(snap)

    def admissible_actions(self) -> list[str] | None:
        return None

    def close(self) -> None:
        pass


ROOM_TASK = Task(env="alfworld", id="toy/room-1", type="pick_and_place_simple", text=ROOM_TEXT)
WIKI_TASK = Task(
    env="hotpotqa", id="toy-1", type="bridge", text="Question: When was the capital of Velmora founded?", gold="1650"
)

ROOM_EXEMPLARS = {
    "react_put_0": "You are in a room.\nYour task is to: put a cup in shelf.\n> think: I need a cup.\nOK.\n> go to shelf 1\nOn the shelf 1, you see a cup 1.\n",
    "react_put_1": "You are in a hall.\nYour task is to: put a pen in desk.\n> go to desk 1\nOn the desk 1, you see a pen 1.\n",
    "act_put_0": "You are in a room.\nYour task is to: put a cup in shelf.\n> go to shelf 1\nOn the shelf 1, you see a cup 1.\n",
    "act_put_1": "You are in a hall.\nYour task is to: put a pen in desk.\n> go to desk 1\nOn the desk 1, you see a pen 1.\n",
}
WIKI_EXEMPLARS = {
    "webthink_simple6": "\nQuestion: Where is X?\nThought 1: I need to search X.\nAction 1: Search[X]\nObservation 1: X is in Y.\nThought 2: So the answer is Y.\nAction 2: Finish[Y]\n",
    "webact_simple6": "Question: Where is X?\nAction 1: Search[X]\nObservation 1: X is in Y.\nAction 2: Finish[Y]\n",
}


def _real(kind: str) -> EnvFamily:
    """The built-in family (loaded directly: a test may have replaced the registry's)."""
    from envs.registry import _load

    return _load(kind)


def families(room_options: dict | None = None) -> dict[str, EnvFamily]:
    made: list[Any] = []

    def make_room(task, options, blobs=None):
        env = ToyRoom({**(room_options or {}), **options})
        made.append(env)
        return env

    def make_wiki(task, options, blobs=None):
        env = ToyWiki(options)
        made.append(env)
        return env

    # the toys stand in for the environments; each family keeps its transcript, scoring, ...
    fams = {
        "alfworld": replace(
            _real("alfworld"),
            list_tasks=lambda **_: [ROOM_TASK],
            get_task=lambda tid, **_: ROOM_TASK,
            make_env=make_room,
            default_max_steps=50,
            custom_task=None,
            references=None,
        ),
        "hotpotqa": replace(
            _real("hotpotqa"),
            list_tasks=lambda **_: [WIKI_TASK],
            get_task=lambda tid, **_: WIKI_TASK,
            make_env=make_wiki,
            default_max_steps=7,
            custom_task=None,
            references=None,
        ),
    }
    fams["made"] = made  # type: ignore[assignment]
    return fams
