"""The ALFWorld `Environment`: one game per episode, played as the ReAct notebook plays it.

- the opening observation is `'\\n'.join(ob.split('\\n\\n')[1:])` of the game's intro;
- `think: ...` never reaches the game and is answered `OK.`;
- "You arrive at loc N. " is stripped (the notebook's `process_ob`);
- an episode is done when it is won (the engine enforces the limit of 49 model calls,
  `default_max_steps`).

Games are kept in a small per-process pool, so a second episode on the same game only
resets it. `state()`/`set_state()` restore in-process by reference (fast-downward's state id);
`snapshot()` is None: across processes the engine replays recorded actions.
"""

from __future__ import annotations

import multiprocessing
import sys
import threading
import types
from contextlib import contextmanager
from typing import Any, Iterator

from envs.alfworld.fastgame import FastGame, load_game_data
from envs.alfworld.pool import GAME_LOCK, acquire_game, release_game
from envs.alfworld.tasks import rebuild_path
from envs.alfworld.text import opening_text, process_ob
from envs.alfworld.wording import check_wording
from envs.base import EnvError, StepResult
from trajectory.records import Task


def _planner_context():
    """Workers forked from a single-threaded server that has the game engine loaded."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["envs.alfworld.fastgame"])
    return ctx


_MAIN_LOCK = threading.Lock()


@contextmanager
def _no_main_script() -> Iterator[None]:
    """While a worker starts, `__main__` names no script: multiprocessing re-imports the
    parent's main script in every worker, and under Streamlit that is the page being run
    (it swaps its own module in as `__main__`): the worker ran the page (a "missing
    ScriptRunContext" warning per widget) and died before it could plan."""
    bare = types.ModuleType("__main__")
    bare.__spec__ = types.SimpleNamespace(name="__main__")  # type: ignore[assignment]  (a worker skips it)
    with _MAIN_LOCK:
        main = sys.modules.get("__main__")
        sys.modules["__main__"] = bare
        try:
            yield
        finally:
            if sys.modules.get("__main__") is bare:  # (unless a script run swapped in its own meanwhile)
                sys.modules["__main__"] = main  # type: ignore[assignment]


def _plan_first_action(path: str, wording: str, ops: list, conn) -> None:
    """In the worker: the game at the recorded operators, and the planner's first action."""
    game = FastGame(load_game_data(path), wording)
    game.reset()
    game.replay(ops, len(ops))
    conn.send(game.plan()[:1])


class AlfworldEnv:
    kind = "alfworld"
    default_max_steps = 49  # the notebook: `for i in range(1, 50)`, 49 model calls

    def __init__(self, wording: str = "paper"):
        self.wording = check_wording(wording)
        self.game: FastGame | None = None
        self.task: Task | None = None
        self.done = False
        self.won = False
        self.steps = 0

    # -- episode

    def reset(self, task: Task) -> str:
        path = rebuild_path(task)
        if self.game is not None and self.game.data.path == path and self.game.wording == self.wording:
            game = self.game
        else:
            self._release()
            game = acquire_game(path, self.wording)
        self.game = game
        with GAME_LOCK:
            text = opening_text(game.reset())
        if task.text and text != task.text:
            raise EnvError(f"ALFWorld game {path} no longer matches task {task.id!r} (opening text differs)")
        self.task, self.done, self.won, self.steps = task, False, False, 0
        return text

    def _need_game(self) -> FastGame:
        if self.game is None:
            raise EnvError("ALFWorld environment used before reset()")
        return self.game

    def step(self, action: str) -> StepResult:
        game = self._need_game()
        self.steps += 1
        if action.strip().startswith("think:"):
            return StepResult("OK.", self.done, 1.0 if self.won else 0.0, {"won": self.won, "think": True})
        with GAME_LOCK:
            out = game.step(action)
        self.won = self.won or out.won
        self.done = self.won
        return StepResult(
            process_ob(out.feedback), self.done, 1.0 if out.won else 0.0, {"won": out.won, "valid": out.valid}
        )

    # -- state

    def state(self) -> Any:
        game = self._need_game()
        return (game.snapshot(), self.done, self.won, self.steps)

    def set_state(self, token: Any) -> None:
        snap, done, won, steps = token
        if snap.game is not self.game:
            raise EnvError("this state belongs to another ALFWorld game; reset to the task first")
        if tuple(self.game.ops) != snap.ops:  # the operators applied fully determine the state
            with GAME_LOCK:
                self.game.restore(snap)
        self.done, self.won, self.steps = done, won, steps

    def snapshot(self) -> dict[str, Any] | None:
        return None

    def restore(self, snap: dict[str, Any]) -> None:
        raise EnvError("ALFWorld states are restored by replaying the recorded actions")

    def admissible_actions(self) -> list[str] | None:
        game = self._need_game()
        with GAME_LOCK:
            return game.admissible_commands()

    # -- expert

    def expert_hint(self, timeout_s: float = 5.0) -> str | None:
        """The next action of fast-downward's planner from the current state, or None when
        it has no answer within `timeout_s`. The planner runs in a worker process (it can
        take minutes on pick-two games and cannot be interrupted), killed on timeout. The
        worker comes from a forkserver, never from forking this (multi-threaded) process."""
        game = self._need_game()
        if self.won or not game.data.path:
            return None
        ctx = _planner_context()
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(
            target=_plan_first_action, args=(game.data.path, game.wording, list(game.ops), send), daemon=True
        )
        with _no_main_script():
            proc.start()
        send.close()
        try:
            if not recv.poll(max(0.0, timeout_s)):
                return None
            try:
                plan = recv.recv()
            except (EOFError, OSError):  # the planner died without an answer
                return None
            return plan[0] if plan else None
        finally:
            recv.close()
            if proc.is_alive():
                proc.kill()
            proc.join()

    # -- lifetime

    def _release(self) -> None:
        if self.game is not None:
            release_game(self.game)
            self.game = None

    def close(self) -> None:
        self._release()
