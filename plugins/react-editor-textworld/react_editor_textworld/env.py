"""A TextWorld game on the real textworld engine, stepped one text command at a time.

Observations are the game's feedback without the prompt and status line, one line each (the
command-line transcript of ALFWorld). `think: ...` is answered `OK.` by the environment
itself, as in the ReAct notebook. State: the commands taken so far; `set_state` replays them
on a fresh reset and checks every observation (`ReplayMismatch`), and `snapshot` is None,
so the engine restores a stored step by the same verified replay.
"""

from __future__ import annotations

import re
import threading
import warnings
from pathlib import Path
from typing import Any

from envs.base import EnvError, ReplayMismatch, StepResult
from trajectory.records import Task

THINK = "think:"
_PARAGRAPHS = re.compile(r"\n\s*\n")
_ENDING = re.compile(r"\*\*\*\s*[A-Za-z][^*]*\*\*\*")  # "*** You lost! ***", "*** The End ***"
_START = threading.Lock()  # loading a game is not thread-safe in textworld (rollouts run in threads)


def _wordy(paragraph: str) -> bool:
    """Prose or the game's ending line, not the ASCII-art banner of a TextWorld game."""
    if _ENDING.fullmatch(paragraph):
        return True  # a losing or winning step must read as one
    chars = [c for c in paragraph if not c.isspace()]
    return bool(chars) and sum(c.isalpha() for c in chars) / len(chars) > 0.6


def clean(feedback: str) -> str:
    """The game's answer as one line: no prompt, status line, banner or restart question;
    the ending line ("*** You lost! ***") is kept."""
    text = feedback
    for end in ("Would you like to RESTART", "\n>"):
        at = text.rfind(end)
        if at >= 0:
            text = text[:at]
    paragraphs = [" ".join(p.split()) for p in _PARAGRAPHS.split(text)]
    return " ".join(p for p in paragraphs if _wordy(p))


def _opening_text(feedback: str, objective: str | None) -> str:
    paragraphs = [" ".join(p.split()) for p in _PARAGRAPHS.split(feedback.split("\n>")[0])]
    goal = " ".join((objective or "").split())
    room = " ".join(p for p in paragraphs if _wordy(p) and p != goal)
    return f"{room}\nYour task is to: {goal}" if goal else room


def _start(game: Path):
    import textworld

    infos = textworld.EnvInfos(
        admissible_commands=True, objective=True, won=True, lost=True, score=True, max_score=True
    )
    try:
        with _START, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # jericho: "not fully supported" (textworld tracks the score itself)
            return textworld.start(str(game), request_infos=infos)
    except Exception as exc:  # textworld raises many kinds for a file it cannot play
        raise EnvError(f"textworld cannot play {game.name}: {exc}") from None


def opening(game: Path) -> str:
    """A game's opening observation (its task text)."""
    env = _start(game)
    try:
        gs = env.reset()
        return _opening_text(gs.feedback, gs.objective)
    finally:
        env.close()


class TextWorldEnv:
    default_max_steps = 30

    def __init__(self, kind: str, game: Path):
        self.kind = kind
        self.game = game
        self._env = None
        self._gs = None
        self._task: Task | None = None
        self._history: tuple[tuple[str, str], ...] = ()

    def reset(self, task: Task) -> str:
        if self._env is None:
            self._env = _start(self.game)
        self._task = task
        with _START:  # a reset reloads the story file
            self._gs = self._env.reset()
        self._history = ()
        return _opening_text(self._gs.feedback, self._gs.objective)

    def step(self, action: str) -> StepResult:
        if action.startswith(THINK):
            return StepResult("OK.", bool(self._gs and self._gs.done), 0.0, {**self._info(), "think": True})
        if self._gs is not None and self._gs.done:
            return StepResult("The game is over.", True, 0.0, self._info())
        self._gs, _, _ = self._env.step(action)
        obs = clean(self._gs.feedback)
        self._history += ((action, obs),)
        return StepResult(obs, bool(self._gs.done), 1.0 if self._gs.won else 0.0, self._info())

    def _info(self) -> dict[str, Any]:
        gs = self._gs
        if gs is None:
            return {"won": False}
        score, top = int(gs.score or 0), int(gs.max_score or 0)
        return {
            "won": bool(gs.won),
            "lost": bool(gs.lost),
            "score": score,
            "max_score": top,
            "score_rate": round(score / top, 4) if top else 0.0,
        }

    def admissible_actions(self) -> list[str] | None:
        return list(self._gs.admissible_commands or []) if self._gs is not None else None

    def state(self) -> Any:
        return self._history

    def set_state(self, token: Any) -> None:
        """Replay the commands of `token` from the start, checking each observation."""
        if token == self._history:
            return
        self.reset(self._task)
        for i, (action, expected) in enumerate(token, 1):
            got = self.step(action).observation
            if got != expected:
                raise ReplayMismatch(i, action, expected, got)

    def snapshot(self) -> dict | None:
        return None  # the engine replays the recorded actions and checks every observation

    def restore(self, snap: dict) -> None:  # pragma: no cover - snapshot() is None
        raise EnvError("textworld episodes are restored by verified replay")

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None
