"""Built-in ALFWorld exemplars in the ReAct prompt-file format, and the notebook's choice.

`data/exemplars.json` has keys `react_<v>_<i>` / `act_<v>_<i>` (v in put, clean, heat, cool,
examine, puttwo; i in 0, 1) like `prompts/alfworld_3prompts.json`. They are played on the
built-in exemplar games (`games/builtin/exemplars`, never the default task list): a searching policy that looks in
plausible receptacles one by one, real observations in the paper's wording, and thoughts
in the paper's style (plan, where to look, progress). `build_exemplars` regenerates them.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from envs.alfworld.text import opening_text, process_ob
from envs.alfworld.transcript import PREFIXES as TASK_TYPE_PREFIX  # the notebook's `prefixes`
from envs.base import EnvError

EXEMPLARS_FILE = Path(__file__).parent / "data" / "exemplars.json"

VARIANTS = tuple(TASK_TYPE_PREFIX.values())


def exemplar_prefix(task_type: str) -> str:
    """`put`, `clean`, ... for a task type or a task id (the notebook matches prefixes)."""
    for part in task_type.split("/"):
        for prefix, v in TASK_TYPE_PREFIX.items():
            if part.startswith(prefix):
                return v
    raise EnvError(f"unknown ALFWorld task type {task_type!r}")


def load_exemplars() -> dict[str, str]:
    return json.loads(EXEMPLARS_FILE.read_text())


# ---------------------------------------------------------------- building them


def _ranges(names: list[str]) -> str:
    """'cabinet 1', 'cabinet 2', 'countertop 1' -> 'cabinet (1-2), countertop (1)'."""
    groups: dict[str, list[int]] = {}
    for n in names:
        base, _, num = n.rpartition(" ")
        groups.setdefault(base, []).append(int(num))
    parts = []
    for base, nums in groups.items():
        nums.sort()
        parts.append(f"{base} ({nums[0]})" if len(nums) == 1 else f"{base} ({nums[0]}-{nums[-1]})")
    return ", ".join(parts[:-1]) + (", and " if len(parts) > 2 else " and " if len(parts) == 2 else "") + parts[-1]


class _Player:
    def __init__(self, game_path: Path, rng: random.Random):
        from envs.alfworld.fastgame import FastGame, load_game_data

        self.game = FastGame(load_game_data(game_path), "paper")
        self.opening = opening_text(self.game.reset())
        self.names = self.game.id_to_name()
        self.rng = rng
        self.lines: list[tuple[str, str]] = []
        self.here = None
        self.opened: set[str] = set()

    def name(self, var) -> str:
        return self.names[var.name].strip()

    def facts(self, pred: str):
        return [f for f in self.game.facts() if f.name == pred]

    def receptacles(self) -> list[str]:
        return sorted(
            {self.name(f.arguments[0]) for f in self.facts("receptacleatlocation")},
            key=lambda n: (n.rpartition(" ")[0], int(n.rpartition(" ")[2])),
        )

    def where(self, obj: str) -> str | None:
        for f in self.facts("inreceptacle"):
            if self.name(f.arguments[0]) == obj:
                return self.name(f.arguments[1])
        return None

    def objects_of(self, base: str) -> list[str]:
        return sorted(
            {
                self.name(f.arguments[0])
                for f in self.facts("inreceptacle")
                if self.name(f.arguments[0]).rpartition(" ")[0] == base
            }
        )

    def think(self, text: str):
        self.lines.append((f"think: {text}", "OK."))

    def act(self, cmd: str) -> str:

        if cmd not in self.game.admissible_commands():
            raise RuntimeError(f"exemplar command not admissible: {cmd}")
        out = self.game.step(cmd)
        ob = process_ob(out.feedback)
        self.lines.append((cmd, ob))
        return ob

    def goto(self, recep: str):
        if self.here != recep:
            self.act(f"go to {recep}")
            self.here = recep
            if (
                recep.rpartition(" ")[0] in ("cabinet", "drawer", "fridge", "microwave", "safe")
                and recep not in self.opened
            ):
                self.act(f"open {recep}")
                self.opened.add(recep)

    def search_order(self, target_recep: str, candidates: list[str]) -> list[str]:
        """Plausible receptacle types in a shuffled order with the right one early."""
        types = list(dict.fromkeys(c.rpartition(" ")[0] for c in candidates))
        self.rng.shuffle(types)
        t = target_recep.rpartition(" ")[0]
        types.remove(t)
        types.insert(min(len(types), self.rng.randint(0, 1)), t)
        return [c for ty in types for c in candidates if c.rpartition(" ")[0] == ty]

    def find(self, base: str, candidates: list[str], exclude=()) -> str:
        """Visit candidates until an object `base` is seen; returns the object's name."""
        objs = [o for o in self.objects_of(base) if o not in exclude]
        target_recep = self.where(objs[0])
        order = self.search_order(target_recep, candidates)
        self.think(
            f"First I need to find a {base}. A {base} is more likely to appear in {_ranges(order)}. "
            f"I can check one by one, starting with {order[0]}."
        )
        for recep in order:
            self.goto(recep)
            here = [o for o in objs if self.where(o) == recep]
            if here:
                return here[0]
        raise RuntimeError(f"{base} not found")

    def text(self, with_thoughts: bool) -> str:
        lines = [(a, o) for a, o in self.lines if with_thoughts or not a.startswith("think:")]
        return self.opening + "\n" + "".join(f"> {a}\n{o}\n" for a, o in lines)


def _candidates(p: _Player, base: str) -> list[str]:
    """Receptacles whose type can hold `base` (the game's canContain facts)."""
    rtypes = {
        f.arguments[0].name.lower().replace("type", "")
        for f in p.facts("cancontain")
        if f.arguments[1].name.lower() == f"{base}type"
    }
    return [r for r in p.receptacles() if r.rpartition(" ")[0] in rtypes]


def _play_examine(p: _Player, obj: str, lamp: str) -> _Player:
    """look_at_obj_in_light: take the object, then find the lamp and use it."""
    p.think(f"To solve the task, I need to find and take a {obj}, then find and use a {lamp}.")
    found = p.find(obj, _candidates(p, obj))
    p.think(f"Now I find a {obj} ({found.split()[-1]}). Next, I need to take it.")
    p.act(f"take {found} from {p.here}")
    lamps = [r for r in p.receptacles() if r.rpartition(" ")[0] in ("desk", "sidetable", "dresser")]
    lamp_at = p.where(p.objects_of(lamp)[0])
    order = p.search_order(lamp_at, lamps)
    p.think(
        f"Now I take a {obj} ({found.split()[-1]}). Next, I need to find a {lamp}. A {lamp} is more "
        f"likely to appear in {_ranges(order)}. I can check one by one, starting with {order[0]}."
    )
    for r in order:
        p.goto(r)
        if r == lamp_at:
            break
    the_lamp = p.objects_of(lamp)[0]
    p.think(f"Now I find a {lamp} ({the_lamp.split()[-1]}). Next, I need to use it.")
    p.act(f"use {the_lamp}")
    return p


def play_exemplar(game_path: Path, seed: int = 0) -> _Player:
    traj = json.loads((game_path.parent / "traj_data.json").read_text())
    ttype = traj["task_type"]
    params = traj["pddl_params"]
    obj = params["object_target"].lower()
    p = _Player(game_path, random.Random(seed))
    v = exemplar_prefix(ttype)
    if v == "examine":
        return _play_examine(p, obj, params["toggle_target"].lower())
    dest_type = params["parent_target"].lower()
    dest = [r for r in p.receptacles() if r.rpartition(" ")[0] == dest_type][0]
    appliance = {"clean": ("sinkbasin", "clean"), "heat": ("microwave", "heat"), "cool": ("fridge", "cool")}.get(v)
    if v == "puttwo":
        p.think(
            f"To solve the task, I need to find and take the first {obj}, then put it in/on {dest_type}, "
            f"then find and take the second {obj}, then put it in/on {dest_type}."
        )
    elif appliance:
        p.think(
            f"To solve the task, I need to find and take a {obj}, then {appliance[1]} it with "
            f"{appliance[0]}, then put it in/on {dest_type}."
        )
    else:
        p.think(f"To solve the task, I need to find and take a {obj}, then put it in/on {dest_type}.")
    done: list[str] = []
    for round_ in range(2 if v == "puttwo" else 1):
        cands = [c for c in _candidates(p, obj) if c != dest]
        found = p.find(obj, cands, exclude=done)
        num = found.split()[-1]
        p.think(
            f"Now I find {'the second ' if round_ else ''}{'a ' if not round_ else ''}{obj} ({num}). Next, I need to take it.".replace(
                "the second a ", "the second "
            )
        )
        p.act(f"take {found} from {p.here}")
        if appliance:
            app = [r for r in p.receptacles() if r.rpartition(" ")[0] == appliance[0]][0]
            p.think(
                f"Now I take a {obj} ({num}). Next, I need to go to {appliance[0]} ({app.split()[-1]}) "
                f"and {appliance[1]} it."
            )
            p.here = None if p.here != app else p.here
            p.act(f"go to {app}") if p.here != app else None
            p.here = app
            p.act(f"{appliance[1]} {found} with {app}")
            p.think(f"Now I {appliance[1]} a {obj} ({num}). Next, I need to put it in/on {dest}.")
        else:
            p.think(f"Now I take {'the second' if round_ else 'a'} {obj} ({num}). Next, I need to put it in/on {dest}.")
        p.goto(dest)
        p.act(f"put {found} in/on {dest}")
        done.append(found)
        if v == "puttwo" and not round_:
            p.think(
                f"Now I put the first {obj} in {dest}. Next, I need to find the second {obj}. "
                f"I should look where I have not found one yet."
            )
    return p


def build_exemplars(games_root: Path, out: Path = EXEMPLARS_FILE, seed: int = 0) -> dict[str, str]:
    """Two exemplars per type from the built-in `train` games; both prompt styles."""
    result: dict[str, str] = {}
    games = sorted(games_root.glob("*/trial_*/game.tw-pddl"))
    for v in VARIANTS:
        mine = [g for g in games if exemplar_prefix(g.parent.parent.name) == v]
        if len(mine) < 2:
            raise RuntimeError(f"need two train games of type {v}, found {len(mine)}")
        played = []  # the shortest play of each game over a few search orders (short prompts)
        for g in mine:
            best = None
            for s in range(seed, seed + 4):
                p = play_exemplar(g, s)
                if not p.game.won:
                    raise RuntimeError(f"exemplar on {g} did not win")
                if best is None or len(p.lines) < len(best.lines):
                    best = p
                p.game.close()
            played.append(best)
        played.sort(key=lambda p: len(p.lines))
        for i, p in enumerate(played[:2]):
            result[f"react_{v}_{i}"] = p.text(True)
            result[f"act_{v}_{i}"] = p.text(False)
    ordered = {
        k: result[k] for style in ("react", "act") for v in VARIANTS for k in (f"{style}_{v}_0", f"{style}_{v}_1")
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(ordered, indent=4))
    return ordered
