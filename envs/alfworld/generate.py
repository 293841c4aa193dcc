"""Built-in ALFWorld games, generated offline from what the `alfworld` package ships.

The official games cannot be downloaded here, so we build our own in the same format:
receptacles and their positions from `gen/layouts/FloorPlan*-openable.json`, object types
from `-objects.json`, what fits where from `gen/constants.py`, goals and task templates from
`gen/goal_library.py`, the domain `alfred.pddl` and grammar `alfred.twl2`. Each game is
written in the official folder layout (`<split>/<task folder>/<trial>/game.tw-pddl` +
`traj_data.json`) and proven solvable by replaying its walkthrough to `won`.
Generation is a pure function of the seed (no global `random`, see `seeded_task_grammar`).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)

KITCHENS = tuple(range(1, 31))
BEDROOMS = tuple(range(301, 331))
# Appliances the layouts do not list as receptacle instances, added with made-up positions.
EXTRA_KITCHEN_RECEPTACLES = {"StoveBurner": (2, 4), "Toaster": (1, 1), "CoffeeMachine": (1, 1), "GarbageCan": (1, 1)}
EXTRA_ROOM_RECEPTACLES = {"GarbageCan": (1, 1)}
APPLIANCE = {
    "pick_clean_then_place_in_recep": ("SinkBasin", "clean", "Cleanable"),
    "pick_heat_then_place_in_recep": ("Microwave", "heat", "Heatable"),
    "pick_cool_then_place_in_recep": ("Fridge", "cool", "Coolable"),
}
LAMP_HOLDERS = ("Desk", "SideTable", "Dresser")


def _constants():
    import alfworld.gen.constants as constants

    return constants


def _layout_dir() -> Path:
    import alfworld.gen

    return Path(alfworld.gen.__file__).parent / "layouts"


def mangle(name: str) -> str:
    """ALFRED object ids as PDDL names (PlannedGameState.fix_pddl_str_chars)."""
    out = []
    for ch in name:
        out.append({"-": "_minus_", "|": "_bar_", "+": "_plus_", ".": "_dot_", ",": "_comma_"}.get(ch, ch))
    return "".join(out)


def seeded_task_grammar(grammar: str, traj_data: dict, rng: random.Random) -> str:
    """`add_task_to_grammar` with a reproducible template choice.

    Trap: alfworld's `get_templated_task_desc` draws from the *global* `random`, so the task
    text of a generated game depends on whatever ran before. We run it on a global state
    seeded from `rng` and put the caller's global state back afterwards."""
    from alfworld.agents.utils.misc import add_task_to_grammar

    saved = random.getstate()
    try:
        random.seed(rng.randrange(2**32))
        return add_task_to_grammar(grammar, traj_data, goal_desc_human_anns_prob=0.0, rng=random.Random(0))
    finally:
        random.setstate(saved)


def _fmt_coord(v: float) -> str:
    return f"{'+' if v >= 0 else '-'}{abs(v):05.2f}"


@dataclass
class Scene:
    floor_plan: int
    receptacles: dict[str, str] = field(default_factory=dict)  # id -> type
    rec_loc: dict[str, str] = field(default_factory=dict)  # id -> location id
    objects: dict[str, str] = field(default_factory=dict)  # id -> type
    obj_in: dict[str, str] = field(default_factory=dict)  # object id -> receptacle id
    start: str = ""


def _pickupable_types() -> set[str]:
    c = _constants()
    out: set[str] = set()
    for objs in c.VAL_RECEPTACLE_OBJECTS.values():
        out |= {o for o in objs if not o.endswith("Sliced")}
    return out - {"Box"}


def build_scene(floor_plan: int, rng: random.Random) -> Scene:
    """Receptacles from the layout (plus made-up appliances), 1-3 instances of each
    pickupable object type placed in random compatible receptacles."""
    c = _constants()
    lay = _layout_dir()
    kinds = json.loads((lay / f"FloorPlan{floor_plan}-objects.json").read_text())
    points = json.loads((lay / f"FloorPlan{floor_plan}-openable.json").read_text())
    scene = Scene(floor_plan)
    used_locs: set[str] = set()

    def add_loc(point) -> str:
        x, z, rot, hor = int(round(point[0] / 0.25)), int(round(point[1] / 0.25)), int(point[2]) // 90, int(point[3])
        while True:
            loc = f"loc|{x}|{z}|{rot}|{hor}"
            if loc not in used_locs:
                used_locs.add(loc)
                return loc
            x += 1

    for rid in sorted(points):
        rtype = rid.split("|")[0]
        if rid.endswith("|SinkBasin"):
            rtype = "SinkBasin"
        elif rid.endswith("|BathtubBasin"):
            rtype = "BathtubBasin"
        if rtype not in c.RECEPTACLES or rtype in c.MOVABLE_RECEPTACLES_SET:
            continue
        scene.receptacles[rid] = rtype
        scene.rec_loc[rid] = add_loc(points[rid])
    extra = EXTRA_KITCHEN_RECEPTACLES if floor_plan in KITCHENS else EXTRA_ROOM_RECEPTACLES
    for rtype, (lo, hi) in sorted(extra.items()):
        if rtype not in kinds or any(t == rtype for t in scene.receptacles.values()):
            continue
        for _ in range(rng.randint(lo, hi)):
            pos = [rng.uniform(-2.5, 2.5), rng.uniform(0.0, 1.5), rng.uniform(-2.5, 2.5)]
            rid = f"{rtype}|" + "|".join(_fmt_coord(v) for v in pos)
            scene.receptacles[rid] = rtype
            scene.rec_loc[rid] = add_loc([pos[0], pos[2], rng.choice([0, 90, 180, 270]), 30])
    scene.start = add_loc([rng.uniform(-1.0, 1.0), rng.uniform(-1.0, 1.0), rng.choice([0, 90, 180, 270]), 30])

    pick = _pickupable_types()
    for otype in sorted(kinds):
        if otype not in pick and otype not in ("DeskLamp",):
            continue
        if otype == "DeskLamp":
            holders = [r for r, t in scene.receptacles.items() if t in LAMP_HOLDERS]
            n = 1
        else:
            holders = [r for r, t in scene.receptacles.items() if otype in c.VAL_RECEPTACLE_OBJECTS.get(t, ())]
            n = rng.randint(1, 3)
        if not holders:
            continue
        for _ in range(n):
            pos = [rng.uniform(-2.5, 2.5), rng.uniform(0.0, 1.5), rng.uniform(-2.5, 2.5)]
            oid = f"{otype}|" + "|".join(_fmt_coord(v) for v in pos)
            scene.objects[oid] = otype
            scene.obj_in[oid] = rng.choice(sorted(holders))
    return scene


def _problem(scene: Scene, goal: str, name: str) -> str:
    c = _constants()
    m = mangle
    rtypes = sorted(set(scene.receptacles.values()))
    otypes = sorted(set(scene.objects.values()))
    lines = ["(define (problem plan_%s)" % name, "(:domain alfred)", "(:objects", "agent1 - agent"]
    lines += [f"{m(o)} - object" for o in sorted(scene.objects)]
    lines += [f"{t}Type - otype" for t in otypes]
    lines += [f"{m(r)} - receptacle" for r in sorted(scene.receptacles)]
    lines += [f"{t}Type - rtype" for t in rtypes]
    lines += [f"{m(loc)} - location" for loc in sorted(set(scene.rec_loc.values()) | {scene.start})]
    lines += [")", "(:init", "(= (total-cost) 0)", f"(atLocation agent1 {m(scene.start)})"]
    for r in sorted(scene.receptacles):
        t = scene.receptacles[r]
        lines.append(f"(receptacleType {m(r)} {t}Type)")
        lines.append(f"(receptacleAtLocation {m(r)} {m(scene.rec_loc[r])})")
        if t in c.OPENABLE_CLASS_SET:
            lines.append(f"(openable {m(r)})")
    for rt in rtypes:
        for ot in otypes:
            if ot in c.VAL_RECEPTACLE_OBJECTS.get(rt, ()):
                lines.append(f"(canContain {rt}Type {ot}Type)")
    for o in sorted(scene.objects):
        t = scene.objects[o]
        r = scene.obj_in[o]
        lines.append(f"(objectType {m(o)} {t}Type)")
        lines.append(f"(inReceptacle {m(o)} {m(r)})")
        lines.append(f"(objectAtLocation {m(o)} {m(scene.rec_loc[r])})")
        if t == "DeskLamp":
            lines.append(f"(toggleable {m(o)})")
            continue
        lines.append(f"(pickupable {m(o)})")
        if t in c.MOVABLE_RECEPTACLES_SET:
            lines.append(f"(isReceptacleObject {m(o)})")
        for pred, key in (
            ("cleanable", "Cleanable"),
            ("heatable", "Heatable"),
            ("coolable", "Coolable"),
            ("sliceable", "Sliceable"),
        ):
            if t in c.VAL_ACTION_OBJECTS[key]:
                lines.append(f"({pred} {m(o)})")
    lines.append(")")
    return "\n".join(lines) + "\n" + goal


def _goal(task_type: str, params: dict) -> str:
    import alfworld.gen.goal_library as glib

    text = glib.gdict[task_type]["pddl"].format(
        obj=params["object_target"],
        recep=params["parent_target"],
        toggle=params["toggle_target"],
        mrecep=params["mrecep_target"],
    )
    return text.replace("#", "-")


def _choose_task(task_type: str, scene: Scene, rng: random.Random):
    """(params, plan) or None when this scene cannot host the task type. The plan is a
    list of semantic steps (verb, object id, receptacle id) for the walkthrough."""
    c = _constants()
    rtypes = set(scene.receptacles.values())
    by_type: dict[str, list[str]] = {}
    for o, t in scene.objects.items():
        by_type.setdefault(t, []).append(o)
    params = {
        "object_target": "",
        "parent_target": "",
        "toggle_target": "",
        "mrecep_target": "",
        "object_sliced": False,
    }
    if task_type == "look_at_obj_in_light":
        lamps = sorted(by_type.get("DeskLamp", []))
        if not lamps:
            return None
        lamp = lamps[0]
        cands = sorted(
            t for t in by_type if t != "DeskLamp" and t in _pickupable_types() and t not in c.MOVABLE_RECEPTACLES_SET
        )
        if not cands:
            return None
        otype = rng.choice(cands)
        obj = rng.choice(sorted(by_type[otype]))
        params.update(object_target=otype, toggle_target="DeskLamp")
        plan = [("take", obj, scene.obj_in[obj]), ("goto", None, scene.obj_in[lamp]), ("use", lamp, None)]
        return params, plan
    appliance = APPLIANCE.get(task_type)
    if appliance and appliance[0] not in rtypes:
        return None
    pairs = _placements(task_type, scene, by_type, appliance)
    if not pairs:
        return None
    otype, rtype = rng.choice(pairs)
    params.update(object_target=otype, parent_target=rtype)
    dest = rng.choice(sorted(r for r, t in scene.receptacles.items() if t == rtype))
    objs = rng.sample(sorted(by_type[otype]), 2 if task_type == "pick_two_obj_and_place" else 1)
    plan = []
    for obj in objs:
        plan.append(("take", obj, scene.obj_in[obj]))
        if appliance:
            app = sorted(r for r, t in scene.receptacles.items() if t == appliance[0])[0]
            plan.append((appliance[1], obj, app))
        plan.append(("put", obj, dest))
    return params, plan


def _placements(task_type: str, scene: Scene, by_type: dict[str, list[str]], appliance: tuple | None) -> list:
    """The (object type, receptacle type) pairs a placing task can ask for in this scene: valid
    for the task's appliance, not solved at the start."""
    c = _constants()
    rtypes = set(scene.receptacles.values())
    pairs = []
    for otype in sorted(by_type):
        if otype == "DeskLamp":
            continue
        if appliance and otype not in c.VAL_ACTION_OBJECTS[appliance[2]]:
            continue
        need = 2 if task_type == "pick_two_obj_and_place" else 1
        if len(by_type[otype]) < need:
            continue
        for rt in sorted(rtypes):
            if appliance and rt in (appliance[0], "SinkBasin", "BathtubBasin", "GarbageCan"):
                continue
            if rt in ("StoveBurner", "Toaster", "CoffeeMachine") and task_type != "pick_and_place_simple":
                continue
            if otype not in c.VAL_RECEPTACLE_OBJECTS.get(rt, ()):
                continue
            if any(scene.receptacles[scene.obj_in[o]] == rt for o in by_type[otype]):
                continue  # already solved (partly) at the start
            pairs.append((otype, rt))
    return pairs


def _folder_name(task_type: str, params: dict, floor_plan: int) -> str:
    if task_type == "look_at_obj_in_light":
        parts = [params["object_target"], "None", params["toggle_target"]]
    else:
        parts = [params["object_target"], params["mrecep_target"] or "None", params["parent_target"]]
    return "-".join([task_type, *parts, str(floor_plan)])


def _render_walkthrough(plan, names: dict[str, str], rec_openable, wording: str) -> list[str]:
    """Semantic steps -> commands, opening closed receptacles on the way."""
    from envs.alfworld.wording import put_command

    cmds: list[str] = []
    here = None
    opened: set[str] = set()

    def goto(r):
        nonlocal here
        if here != r:
            cmds.append(f"go to {names[r]}")
            here = r

    def ensure_open(r):
        if rec_openable(r) and r not in opened:
            cmds.append(f"open {names[r]}")
            opened.add(r)

    for verb, obj, rec in plan:
        if verb == "take":
            goto(rec)
            ensure_open(rec)
            cmds.append(f"take {names[obj]} from {names[rec]}")
        elif verb in ("clean", "heat", "cool"):
            goto(rec)
            cmds.append(f"{verb} {names[obj]} with {names[rec]}")
        elif verb == "put":
            goto(rec)
            ensure_open(rec)
            cmds.append(put_command(names[obj], names[rec], wording))
        elif verb == "goto":
            goto(rec)
        elif verb == "use":
            cmds.append(f"use {names[obj]}")
    return cmds


def _winning_walkthrough(data: dict, scene, plan, c) -> list[str] | None:
    """The plan's commands when playing them on the real engine wins the game, else None."""
    from envs.alfworld.fastgame import FastGame, load_game_data

    game = FastGame(load_game_data(data), wording="alfworld-0.4")
    game.reset()
    names = game.id_to_name()
    rnames = {i: names[mangle(i).lower()] for i in (*scene.receptacles, *scene.objects)}
    openable = lambda r: scene.receptacles[r] in c.OPENABLE_CLASS_SET  # noqa: E731
    walk = _render_walkthrough(plan, rnames, openable, "alfworld-0.4")
    won = False
    for cmd in walk:
        if cmd not in game.admissible_commands():
            break
        won = game.step(cmd).won
    return walk if won else None


def _traj_data(task_type: str, params: dict, trial: str, floor_plan: int, seed: int) -> dict:
    """A game's traj_data.json, as ALFWorld's own games have it (no annotations)."""
    return {
        "task_type": task_type,
        "pddl_params": params,
        "task_id": trial,
        "scene": {"floor_plan": f"FloorPlan{floor_plan}", "scene_num": floor_plan, "random_seed": seed},
        "turk_annotations": {"anns": []},
        "generator": "react-editor builtin (alfworld layouts + goal_library)",
    }


def generate_games(
    out: Path,
    seed: int,
    per_type: int = 4,
    split: str = "valid_unseen",
    task_types=TASK_TYPES,
    progress=None,
    layout: str = "json_2.1.1",
) -> list[Path]:
    """Write `per_type` solvable games of each task type under `out/<layout>/<split>/`
    (the built-in set: layout "builtin", split "sample" or "exemplars").
    Deterministic in `seed`. Returns the game.tw-pddl paths."""
    from alfworld.info import ALFRED_PDDL_PATH, ALFRED_TWL2_PATH

    domain = Path(ALFRED_PDDL_PATH).read_text()
    grammar = Path(ALFRED_TWL2_PATH).read_text()
    c = _constants()
    written: list[Path] = []
    for t_index, task_type in enumerate(task_types):
        made = 0
        attempt = 0
        while made < per_type:
            attempt += 1
            if attempt > 200:
                raise RuntimeError(f"could not generate {task_type} games from seed {seed}")
            rng = random.Random(f"{seed}/{task_type}/{attempt}")
            pool = BEDROOMS if task_type == "look_at_obj_in_light" else KITCHENS
            if task_type in ("pick_and_place_simple", "pick_two_obj_and_place") and rng.random() < 0.3:
                pool = BEDROOMS
            floor_plan = rng.choice(pool)
            scene = build_scene(floor_plan, rng)
            chosen = _choose_task(task_type, scene, rng)
            if chosen is None:
                continue
            params, plan = chosen
            trial = f"trial_G{seed}_{t_index}{attempt:03d}"
            traj = _traj_data(task_type, params, trial, floor_plan, seed)
            game_dir = out / layout / split / _folder_name(task_type, params, floor_plan) / trial
            data = {
                "pddl_domain": domain,
                "grammar": seeded_task_grammar(grammar, traj, rng),
                "pddl_problem": _problem(scene, _goal(task_type, params), trial),
                "solvable": None,
                "walkthrough": None,
            }
            walk = _winning_walkthrough(data, scene, plan, c)
            if walk is None:
                continue
            data["solvable"] = True
            data["walkthrough"] = walk
            game_dir.mkdir(parents=True, exist_ok=True)
            (game_dir / "game.tw-pddl").write_text(json.dumps(data))
            (game_dir / "traj_data.json").write_text(json.dumps(traj, indent=1))
            written.append(game_dir / "game.tw-pddl")
            made += 1
            if progress:
                progress(f"{game_dir.relative_to(out)}: {len(walk)} steps")
    return written
