"""A labelled set for the failure signals: trajectories written after the paper's ALFWorld
and HotpotQA/FEVER transcripts (room descriptions, receptacles, Search/Lookup results),
each step labelled by hand with the signals that truly apply under the definitions of
docs/search-and-signals.md - including the tricky legitimate cases (a return to a
receptacle after taking something, a second lookup that advances, a search returned to
after reading another page, a signal on the way to a success). `evaluate()` scores the
detectors (trajectory/signals.py) against the labels: precision and recall per signal.

Each trajectory is built from a few templates over varied objects, so every signal has
at least 40 labelled steps (`step_limit` is labelled per version)."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

from trajectory.records import Outcome
from trajectory.signals import SIGNALS, PathState, ended_at_limit

ALF_SIGNALS = ("repeated_action", "no_effect", "invalid_action", "hallucinated_object")
WIKI_SIGNALS = ("repeated_action", "invalid_action", "search_miss", "lookup_miss")


@dataclass
class Labelled:
    env: str
    task_text: str
    steps: list[tuple[str | None, str, set[str], list[str] | None]]  # action, observation, truth, admissible
    outcome: Outcome = field(default_factory=Outcome)
    limit_truth: bool = False


ROOMS = [
    ("cabinet", "countertop", "desk", "drawer", "shelf", "safe", "fridge", "microwave", "sinkbasin"),
    ("bed", "dresser", "garbagecan", "armchair", "sidetable", "laundryhamper", "sofa", "coffeetable", "stoveburner"),
]
THINGS = ["cd", "mug", "pen", "book", "apple", "keychain", "pencil", "cellphone", "bowl", "tomato"]


def _room(a: str, b: str, c: str) -> str:
    return (
        f"-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly around you, "
        f"you see a {a} 1, a {a} 2, a {b} 1, and a {c} 1.\n\nYour task is to: put some thing on {c}."
    )


def _alfworld(n: int) -> list[Labelled]:
    out = []
    for k in range(n):
        a, b, c = ROOMS[k % 2][k % 3], ROOMS[k % 2][3 + k % 3], ROOMS[k % 2][6 + k % 3]
        thing, other = THINGS[k % len(THINGS)], THINGS[(k + 3) % len(THINGS)]
        see_a1 = f"On the {a} 1, you see a {other} 2."
        see_b1 = f"On the {b} 1, you see a {thing} 1, and a {other} 1."
        closed = f"The {a} 2 is closed."
        steps = [
            (f"go to {a} 1", see_a1, set(), None),
            (None, "OK.", set(), None),  # a thought
            (f"go to {a} 2", closed, set(), None),
            (f"go to {a} 1", see_a1, {"repeated_action"}, None),  # back with nothing changed: a loop
            (f"go to {b} 1", see_b1, set(), None),
            (f"take {thing} 1 from {b} 1", f"You pick up the {thing} 1 from the {b} 1.", set(), None),
            (f"go to {a} 1", see_a1, set(), None),  # tricky: the same visit, but now carrying the thing
            (f"open {a} 2", f"You open the {a} 2. The {a} 2 is open. In it, you see nothing.", set(), None),
            (f"open {a} 2", "Nothing happens.", {"no_effect"}, None),
            (f"examine {c} 1", f"On the {c} 1, you see nothing.", set(), None),
            (f"examine {c} 1", f"On the {c} 1, you see nothing.", {"repeated_action"}, None),
            (f"go to the {c}", "Nothing happens.", {"invalid_action", "no_effect"}, None),
            (f"take {thing} 7 from {c} 1", "Nothing happens.", {"no_effect", "hallucinated_object"}, None),
            (f"go to {c} 2", "Nothing happens.", {"no_effect", "hallucinated_object"}, None),
            (f"go to {c} 1", f"On the {c} 1, you see nothing.", set(), [f"go to {c} 1", f"go to {a} 1"]),
            (f"put {thing} 1 in/on {c} 1", f"You put the {thing} 1 in/on the {c} 1.", set(), None),
            (f"take {thing} 1 from {c} 1", f"You pick up the {thing} 1 from the {c} 1.", set(), None),
            (f"put {thing} 1 in/on {c} 1", f"You put the {thing} 1 in/on the {c} 1.", set(), None),  # after a take
            (f"use {a} 1", "Nothing happens.", {"no_effect"}, None),
            (f"use {a} 1", "Nothing happens.", {"no_effect", "repeated_action"}, None),  # no effect: nothing changed
            (f"go to {b} 1", f"On the {b} 1, you see a {other} 1.", set(), [f"go to {b} 1"]),
        ]
        won = k % 3 != 0
        out.append(Labelled("alfworld", _room(a, b, c), steps, Outcome(done=True, success=won, reward=float(won))))
    return out


def _wiki(n: int) -> list[Labelled]:
    out = []
    names = ["Ostwick", "Marrowgate", "Velmora", "Harrow Tunnel", "Tomas Rell", "Kestrel", "Brenn", "Selwyn Park"]
    for k in range(n):
        x, y, z = names[k % 8], names[(k + 3) % 8], names[(k + 5) % 8]
        page_x = f"{x} is a town in the north. It was founded in 1650."
        steps = [
            (f"Search[{x} town]", f"Could not find [{x} town]. Similar: ['{x}', '{x} (band)'].", {"search_miss"}, None),
            (
                f"Search[{x} town]",
                f"Could not find [{x} town]. Similar: ['{x}', '{x} (band)'].",
                {"search_miss", "repeated_action"},
                None,
            ),
            (f"Search[{x}]", page_x, set(), None),
            ("Lookup[founded]", "(Result 1 / 2) It was founded in 1650.", set(), None),
            ("Lookup[founded]", "(Result 2 / 2) The mill was founded in 1702.", set(), None),  # advances: legit
            ("Lookup[founded]", "No more results.\n", {"lookup_miss"}, None),
            ("Lookup[founded]", "No more results.\n", {"lookup_miss", "repeated_action"}, None),
            (f"Search[{y}]", f"{y} is a river.", set(), None),
            (f"Search[{x}]", page_x, set(), None),  # tricky: back to x after reading y
            ("Lookup[mayor]", "No more results.\n", {"lookup_miss"}, None),
            (f"search {z}", f"Invalid action: search {z}", {"invalid_action"}, None),
            (f"Search[{z}]", f"{z} is a folk group.", set(), None),
            ("Finish[1650]", "Episode finished, reward = 1\n", set(), None),
        ]
        env = "hotpotqa" if k % 2 else "fever"
        out.append(Labelled(env, f"Question: When was {x} founded?", steps, Outcome(done=True, success=True, reward=1)))
    return out


def _limits(n: int) -> list[Labelled]:
    """Versions labelled for `step_limit`: at the limit without an answer (yes), at the
    limit with a success (no: an answer), finished early (no), unfinished (no)."""
    kinds = [
        (Outcome(done=True, success=False, metrics={"limit": True}), True),
        (Outcome(done=True, success=True, metrics={"limit": True}), False),
        (Outcome(done=True, success=False), False),
        (Outcome(), False),
    ]
    return [
        Labelled("hotpotqa", "Question: q?", [("Search[q]", "q is a letter.", set(), None)], *kinds[k % 4])
        for k in range(n)
    ]


def labelled_set() -> list[Labelled]:
    return _alfworld(6) + _wiki(6) + _limits(44)


def evaluate(cases: list[Labelled] | None = None) -> dict[str, dict[str, float | int]]:
    """{signal: {labelled, positives, tp, fp, fn, precision, recall}} over the set."""
    cases = labelled_set() if cases is None else cases
    table = {s: {"labelled": 0, "positives": 0, "tp": 0, "fp": 0, "fn": 0} for s in SIGNALS}
    for case in cases:
        applicable = ALF_SIGNALS if case.env == "alfworld" else WIKI_SIGNALS
        state = PathState.start(case.env, case.task_text)
        for action, obs, truth, admissible in case.steps:
            step = SimpleNamespace(action=action, observation=obs)
            found = set(state.signals(step, admissible))
            state = state.then(step)
            for s in applicable:
                _count(table[s], s in truth, s in found)
        if len(case.steps) == 1:  # a step_limit case
            _count(table["step_limit"], case.limit_truth, ended_at_limit(case.outcome))
    for row in table.values():
        row["precision"] = round(row["tp"] / (row["tp"] + row["fp"]), 3) if row["tp"] + row["fp"] else 1.0
        row["recall"] = round(row["tp"] / (row["tp"] + row["fn"]), 3) if row["tp"] + row["fn"] else 1.0
    return table


def _count(row: dict, truth: bool, found: bool) -> None:
    row["labelled"] += 1
    row["positives"] += truth
    row["tp"] += truth and found
    row["fp"] += found and not truth
    row["fn"] += truth and not found


if __name__ == "__main__":
    import json

    print(json.dumps(evaluate()))
