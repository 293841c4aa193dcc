"""ALFWorld task lists: the built-in generated games and the official download.

Both are laid out as `json_2.1.1/<split>/<task folder>/<trial>/{game.tw-pddl,traj_data.json}`.
A task's id is the ReAct notebook's name `'<task folder>/<trial>'`, prefixed by the split
for official games. Built-in games come with `index.json` (id -> type, opening text) so
listing them never loads a game; official games' opening texts are computed once and kept
in the cache directory.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from envs.alfworld.pool import acquire_game, release_game
from envs.alfworld.text import opening_text
from envs.base import EnvError, inside
from trajectory.records import Task

GAMES_DIR = Path(__file__).parent / "games"
BUILTIN_ROOT = GAMES_DIR / "json_2.1.1"
BUILTIN_SPLITS = ("valid_unseen", "train")  # eval games; exemplar games
OFFICIAL_SPLITS = ("train", "valid_seen", "valid_unseen")
SOURCES = ("builtin", "official")


def alfworld_data_dir() -> Path:
    return Path(os.path.expanduser(os.environ.get("ALFWORLD_DATA") or "~/.cache/alfworld"))


def official_root(split: str) -> Path:
    base = alfworld_data_dir() / "json_2.1.1"
    return inside(base, split, "ALFWorld split")


def _check_source(source: str) -> str:
    if source not in SOURCES:
        raise EnvError(f"unknown ALFWorld task source {source!r}; choose builtin or official")
    return source


def task_type_of(game_dir: Path) -> str | None:
    traj = game_dir / "traj_data.json"
    if traj.exists():
        try:
            return json.loads(traj.read_text())["task_type"]
        except (ValueError, KeyError, OSError):
            return None
    name = game_dir.parent.name
    return name.split("-", 1)[0] if "-" in name else None


def compute_text(game_path: str | Path) -> str:
    """The opening observation, by loading the game (paper wording; both give the same)."""
    game = acquire_game(str(game_path), "paper")
    try:
        return opening_text(game.reset())
    finally:
        release_game(game)


def _make_task(game_path: Path, task_id: str, source: str, split: str | None, text: str,
               ttype: str | None) -> Task:
    data = {"game": str(game_path)}
    if split:
        data["split"] = split
    return Task(env="alfworld", id=task_id, type=ttype, text=text, source=source, data=data)


# ---------------------------------------------------------------- built-in

def builtin_index() -> dict:
    f = GAMES_DIR / "index.json"
    if not f.exists():
        raise EnvError(f"built-in ALFWorld games are missing ({f}); run `react-editor alfworld generate --builtin`")
    return json.loads(f.read_text())


def write_builtin_index(root: Path = GAMES_DIR, progress=None) -> dict:
    """index.json for every game under root/json_2.1.1 (split -> id -> type, text)."""
    index: dict = {}
    for split_dir in sorted((root / "json_2.1.1").iterdir()):
        for game in sorted(split_dir.glob("*/trial_*/game.tw-pddl")):
            tid = f"{game.parent.parent.name}/{game.parent.name}"
            index.setdefault(split_dir.name, {})[tid] = {"type": task_type_of(game.parent),
                                                         "text": compute_text(game)}
            if progress:
                progress(f"indexed {split_dir.name}/{tid}")
    (root / "index.json").write_text(json.dumps(index, indent=1, sort_keys=True))
    return index


def _builtin_tasks(split: str) -> list[Task]:
    index = builtin_index()
    if split not in index:
        raise EnvError(f"no built-in ALFWorld split {split!r}; known: {', '.join(sorted(index))}")
    return [_make_task(BUILTIN_ROOT / split / tid / "game.tw-pddl", tid, "builtin", split, e["text"], e["type"])
            for tid, e in sorted(index[split].items())]


# ---------------------------------------------------------------- official

def _text_cache() -> Path | None:
    from envs.alfworld.fastgame import cache_dir

    d = cache_dir()
    return d.parent / "alfworld-texts.json" if d else None


def _official_text(game: Path) -> str:
    f = _text_cache()
    cache = {}
    if f is not None and f.exists():
        try:
            cache = json.loads(f.read_text())
        except ValueError:
            cache = {}
    try:
        key = hashlib.sha1(game.read_bytes()).hexdigest()
    except OSError as exc:
        raise EnvError(f"cannot read ALFWorld game file {game}: {exc.strerror}") from None
    if key not in cache:
        cache[key] = compute_text(game)
        if f is not None:
            try:
                f.parent.mkdir(parents=True, exist_ok=True)
                f.write_text(json.dumps(cache))
            except OSError:
                pass
    return cache[key]


def _official_games(split: str) -> list[Path]:
    root = official_root(split)
    if not root.is_dir():
        raise EnvError(f"official ALFWorld games not found in {root}; run `react-editor data alfworld` "
                       "(or set ALFWORLD_DATA)")
    games = []
    for game in sorted(root.glob("*/trial_*/game.tw-pddl")):
        folder = game.parent.parent.name
        if "movable" in folder or "Sliced" in folder:  # as AlfredTWEnv.collect_game_files
            continue
        try:
            solvable = json.loads(game.read_text()).get("solvable", False)
        except (ValueError, OSError):
            continue
        if solvable:
            games.append(game)
    return games


def list_tasks(source: str = "builtin", split: str | None = None, **_) -> list[Task]:
    if _check_source(source) == "builtin":
        return _builtin_tasks(split or "valid_unseen")
    split = split or "valid_unseen"
    return [_make_task(g, f"{split}/{g.parent.parent.name}/{g.parent.name}", "official", split,
                       _official_text(g), task_type_of(g.parent))
            for g in _official_games(split)]


def get_task(task_id: str, source: str = "builtin", **_) -> Task:
    if _check_source(source) == "builtin":
        index = builtin_index()
        for split in BUILTIN_SPLITS:
            e = index.get(split, {}).get(task_id)
            if e:
                return _make_task(BUILTIN_ROOT / split / task_id / "game.tw-pddl", task_id, "builtin", split,
                                  e["text"], e["type"])
        raise EnvError(f"unknown built-in ALFWorld task {task_id!r}")
    split, _, rest = task_id.partition("/")
    if split not in OFFICIAL_SPLITS or not rest:
        raise EnvError(f"unknown official ALFWorld task {task_id!r} (expected <split>/<task folder>/<trial>)")
    root = official_root(split)
    if not root.is_dir():
        raise EnvError(f"official ALFWorld games not found in {root}; run `react-editor data alfworld`")
    game = inside(root, rest, "ALFWorld task") / "game.tw-pddl"
    if not game.exists():
        raise EnvError(f"unknown official ALFWorld task {task_id!r} (no {game})")
    return _make_task(game, task_id, "official", split, _official_text(game), task_type_of(game.parent))


def custom_task(game: str | os.PathLike | None = None, **_) -> Task:
    """A task for a user's own game.tw-pddl (traj_data.json next to it gives the type)."""
    if not game:
        raise EnvError("a custom ALFWorld task needs game=PATH to a game.tw-pddl")
    path = Path(game).expanduser().resolve()
    text = compute_text(path)  # raises a clear error for missing/corrupt files
    digest = hashlib.sha1(path.read_bytes()).hexdigest()[:10]
    return _make_task(path, f"custom/{path.parent.name}-{digest}", "custom", None, text, task_type_of(path.parent))


def external_references(task: Task, options: dict | None = None) -> list[str]:
    """The game file the task would open when it lies outside the built-in games and
    ALFWORLD_DATA (an imported episode's path is opened only once confirmed)."""
    try:
        path = Path(rebuild_path(task)).resolve()
    except EnvError:  # nothing there to open
        return []
    roots = (GAMES_DIR.resolve(), alfworld_data_dir().resolve())
    return [] if any(path.is_relative_to(r) for r in roots) else [str(path)]


def rebuild_path(task: Task) -> str:
    """The game file for a task, re-resolved for built-in tasks moved with the package."""
    path = (task.data or {}).get("game")
    if path and Path(path).exists():
        return path
    if task.source == "builtin":
        return str(get_task(task.id).data["game"])
    if not path:
        raise EnvError(f"ALFWorld task {task.id!r} has no game file in its data")
    raise EnvError(f"ALFWorld game file not found: {path}")
