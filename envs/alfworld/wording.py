"""The two wordings a game can be loaded with.

alfworld 0.4.x games (json_2.1.2, and the package's `alfred.twl2`) say "move X to Y" /
"You move the X to the Y." / "You arrive at <receptacle>." and have a `help` action; the
games the ReAct paper played (json_2.1.1) said "put X in/on Y" / "You put the X in/on the
Y." / "You arrive at loc N." and had no `help`. We choose the wording by rewriting the
game's grammar (and domain) text before loading, in both directions - the inverse of
alfworld's own 2.1.1 -> 2.1.2 patch script.
"""

from __future__ import annotations

import re

WORDINGS = ("paper", "alfworld-0.4")

_PAIRS = (  # (paper text, alfworld-0.4 text) in the grammar
    ("You arrive at {lend.name}.", "You arrive at {r.name}."),
    ('"put {o} in/on {r}"', '"move {o} to {r}"'),
    ("You put the {o.name} in/on the {r.name}.", "You move the {o.name} to the {r.name}."),
)

HELP_ACTION_PDDL = """\
(:action help
    :parameters (?a - agent)
    :precondition
        ()
    :effect
        (and
            (checked ?a)
        )
)
"""

_HELP_PDDL_RE = re.compile(r"\(:action help\s.*?\n\)\n?", re.S)


def check_wording(wording: str) -> str:
    if wording not in WORDINGS:
        from envs.base import EnvError

        raise EnvError(f"unknown ALFWorld wording {wording!r}; choose one of {', '.join(WORDINGS)}")
    return wording


def apply_wording(domain: str, grammar: str, wording: str) -> tuple[str, str]:
    """(domain, grammar) rewritten to `wording`. Idempotent; a no-op on text already in it."""
    check_wording(wording)
    if wording == "paper":
        for paper, new in _PAIRS:
            grammar = grammar.replace(new, paper)
        # The PutObject template only (PutEmptyReceptacleObjectinReceptacle is not in the domain).
        domain = _HELP_PDDL_RE.sub("", domain)
    else:
        for paper, new in _PAIRS:
            grammar = grammar.replace(paper, new)
        if not _HELP_PDDL_RE.search(domain):
            before, after = domain.rsplit(")", 1)
            domain = f"{before}{HELP_ACTION_PDDL}){after}"
    return domain, grammar


def put_command(obj: str, recep: str, wording: str) -> str:
    return f"put {obj} in/on {recep}" if wording == "paper" else f"move {obj} to {recep}"


def to_wording(command: str, wording: str) -> str:
    """Translate one put/move command between wordings (other commands are unchanged)."""
    if wording == "paper":
        m = re.fullmatch(r"move (.+?) to (.+)", command)
        return put_command(m.group(1), m.group(2), wording) if m else command
    m = re.fullmatch(r"put (.+?) in/on (.+)", command)
    return put_command(m.group(1), m.group(2), wording) if m else command
