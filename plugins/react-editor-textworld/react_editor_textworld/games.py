"""The plugin's tasks: built-in tw-cooking games made with `tw-make` at first use and cached
(never downloaded), or any .z8/.ulx game file a person points at.

Cache: $REACT_EDITOR_TEXTWORLD_GAMES, else ~/.cache/react-editor-textworld/games. A game's
task text is its opening room description and objective, read once from the game itself.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from envs.base import EnvError
from trajectory.records import Task

KIND = "textworld"
# id -> tw-make tw-cooking flags: a few recipes and difficulties
BUILTIN = {
    "cooking-1": ["--recipe", "1", "--take", "1", "--go", "1", "--seed", "11"],
    "cooking-open": ["--recipe", "1", "--take", "1", "--go", "1", "--open", "--seed", "12"],
    "cooking-cut": ["--recipe", "2", "--take", "1", "--go", "1", "--cut", "--seed", "13"],
    "cooking-rooms": ["--recipe", "1", "--take", "1", "--go", "6", "--open", "--seed", "14"],
}
_LOCK = threading.Lock()


def cache_dir() -> Path:
    root = os.environ.get("REACT_EDITOR_TEXTWORLD_GAMES")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "react-editor-textworld" / "games"


def _tw_make() -> str:
    beside = Path(sys.executable).parent / "tw-make"
    found = str(beside) if beside.exists() else shutil.which("tw-make")
    if not found:
        raise EnvError("tw-make (from the textworld package) is not installed")
    return found


def make_game(flags: list[str], out: Path) -> Path:
    """`tw-make tw-cooking FLAGS --output OUT` (OUT.z8 and the OUT.json TextWorld tracks it with)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.stem + f".part{os.getpid()}.z8")
    cmd = [_tw_make(), "tw-cooking", *flags, "--output", str(tmp), "--silent", "-f"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if done.returncode != 0 or not tmp.exists():
        raise EnvError(f"tw-make failed: {(done.stderr or done.stdout).strip().splitlines()[-1:] or done.returncode}")
    for ext in (".json", ".ni"):  # the game's metadata first, the game last: a reader sees a whole game
        part = tmp.with_suffix(ext)
        if part.exists():
            part.replace(out.with_suffix(ext))
    tmp.replace(out)
    return out


def builtin_game(task_id: str) -> Path:
    """The built-in game `task_id`, made on first use."""
    if task_id not in BUILTIN:
        raise EnvError(f"no textworld task {task_id!r} in the builtin set; known: {', '.join(BUILTIN)}")
    path = cache_dir() / f"{task_id}.z8"
    with _LOCK:
        if not path.exists():
            make_game(BUILTIN[task_id], path)
    return path


def _task(task_id: str, game: Path, source: str, task_type: str) -> Task:
    from react_editor_textworld.env import opening

    meta = cache_dir() / "tasks" / f"{task_id}.json"  # never beside a person's own game file
    if meta.exists() and meta.stat().st_mtime >= game.stat().st_mtime:
        text = json.loads(meta.read_text(encoding="utf-8"))["text"]
    else:
        text = opening(game)
        meta.parent.mkdir(parents=True, exist_ok=True)
        meta.write_text(json.dumps({"text": text}), encoding="utf-8")
    return Task(env=KIND, id=task_id, type=task_type, text=text, source=source, data={"game": str(game)})


def list_tasks(source: str = "builtin", **_) -> list[Task]:
    if source != "builtin":
        raise EnvError(f"unknown textworld task source {source!r}; use builtin, or --game FILE")
    return [_task(tid, builtin_game(tid), "builtin", "cooking") for tid in BUILTIN]


def get_task(task_id: str, source: str = "builtin", **_) -> Task:
    if source != "builtin":
        raise EnvError(f"unknown textworld task source {source!r}; use builtin, or --game FILE")
    return _task(task_id, builtin_game(task_id), "builtin", "cooking")


def custom_task(game: str | os.PathLike | None = None, **_) -> Task:
    """Any TextWorld-playable game file (.z8 from tw-make, .ulx, Z-machine .z1-.z8)."""
    if not game:
        raise EnvError("a custom textworld task needs --game FILE (.z8 or .ulx)")
    path = Path(game).expanduser().resolve()
    if not path.is_file():
        raise EnvError(f"no game file at {path}")
    if path.suffix.lower() not in (".ulx", ".z8", ".z5", ".z3", ".z6", ".z7"):
        raise EnvError(f"{path.name} is not a .z8/.ulx game")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    return _task(f"{path.stem}-{digest}", path, "file", "game")


def game_path(task: Task) -> Path:
    """The game file a task plays: the built-in one (re-made if the cache was cleared)."""
    if task.source == "builtin":
        return builtin_game(task.id)
    path = Path(task.data.get("game") or "")
    if not path.is_file():
        raise EnvError(f"the game file of task {task.id} is missing ({path})")
    return path


def references(task: Task | None = None, options: dict | None = None) -> list[str]:
    """A game file outside the plugin's cache: an imported episode opens it only once confirmed."""
    if task is None or task.source == "builtin":
        return []
    path = Path(task.data.get("game") or "").expanduser().resolve()
    return [] if path.is_relative_to(cache_dir().resolve()) else [str(path)]
