"""A small pool of loaded games, so a new episode or a resume skips the load (~1 s)."""

from __future__ import annotations

import threading
from collections import OrderedDict

from envs.alfworld.fastgame import FastGame, load_game_data

POOL_SIZE = 8
_POOL: "OrderedDict[tuple[str, str], list[FastGame]]" = OrderedDict()
_POOL_LOCK = threading.Lock()
# textworld's grammar parsing / derivation and pddl2sas are not thread-safe: games are loaded
# and stepped under this lock (threads share the CPU anyway; experiments use processes)
GAME_LOCK = threading.RLock()


def acquire_game(path: str, wording: str) -> FastGame:
    """A loaded game from the pool, or a new one."""
    data = load_game_data(path)
    key = (data.key, wording)
    with _POOL_LOCK:
        games = _POOL.get(key)
        if games:
            _POOL.move_to_end(key)
            return games.pop()
    with GAME_LOCK:
        return FastGame(data, wording)


def release_game(game: FastGame) -> None:
    key = (game.data.key, game.wording)
    with _POOL_LOCK:
        _POOL.setdefault(key, []).append(game)
        _POOL.move_to_end(key)
        while sum(len(v) for v in _POOL.values()) > POOL_SIZE:
            _, old = _POOL.popitem(last=False)
            for g in old:
                g.close()
