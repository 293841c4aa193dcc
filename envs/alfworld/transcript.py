"""ALFWorld's transcript: the paper's command-line layout (alfworld.ipynb), its six task
types and their exemplar variants (the notebook's `prefixes`), and its failure signals."""

from __future__ import annotations

import re

from envs.transcript import CommandTranscript, KeyScheme
from trajectory import formats
from trajectory.tools import command_tools

# task-type prefix -> exemplar variant (the notebook's `prefixes`)
PREFIXES = {
    "pick_and_place": "put",
    "pick_clean_then_place": "clean",
    "pick_heat_then_place": "heat",
    "pick_cool_then_place": "cool",
    "look_at_obj": "examine",
    "pick_two_obj": "puttwo",
}
# the task types, in the paper's Table 3 order, with its column names
TASK_TYPES = (
    ("pick_and_place_simple", "Pick"),
    ("pick_clean_then_place_in_recep", "Clean"),
    ("pick_heat_then_place_in_recep", "Heat"),
    ("pick_cool_then_place_in_recep", "Cool"),
    ("look_at_obj_in_light", "Look"),
    ("pick_two_obj_and_place", "Pick 2"),
)
# exemplar variant -> the task type it stands for (imported exemplars)
TYPES = dict(zip(PREFIXES.values(), (t for t, _ in TASK_TYPES)))

NOTHING_HAPPENS = "Nothing happens."
# Actions that change the world: a repeat of an earlier (action, observation) counts only
# when none of these happened in between.
_CHANGES = re.compile(r"(take|put|open|close|clean|heat|cool|use|toggle|slice|move)\b", re.I)
_OBJ = r"[a-z]+ \d+"
_OBJECT = re.compile(rf"\b({_OBJ})\b", re.I)
# The ALFWorld command grammar (both wordings); anything else cannot be parsed.
_COMMAND = re.compile(
    rf"(look|inventory|help|go to {_OBJ}|(open|close|examine|use|toggle) {_OBJ}|take {_OBJ} from {_OBJ}"
    rf"|put {_OBJ} in/on {_OBJ}|move {_OBJ} to {_OBJ}|(heat|cool|clean|slice) {_OBJ} with {_OBJ})",
    re.I,
)


def type_from_text(task_text: str) -> str:
    """The task type an ALFWorld goal sentence implies (for plain-text imports)."""
    goal = task_text.rsplit("Your task is to:", 1)[-1].lower()
    if "look at" in goal or "examine" in goal:
        return TYPES["examine"]
    if "put two" in goal or "find two" in goal:
        return TYPES["puttwo"]
    for word, v in (("clean", "clean"), ("hot", "heat"), ("heat", "heat"), ("cool", "cool")):
        if re.search(rf"\b{word}\b", goal):
            return TYPES[v]
    return TYPES["put"]


class Signals:
    """no_effect ("Nothing happens."), invalid_action (outside the command grammar),
    hallucinated_object (an object never seen nor admissible: `mentions`)."""

    def mentions(self, text: str | None) -> set[str]:
        return {m.lower() for m in _OBJECT.findall(text or "")}

    def flags(self, action: str | None, observation: str) -> set[str]:
        if action is None:
            return set()
        out = {"no_effect"} if observation == NOTHING_HAPPENS else set()
        if not _COMMAND.fullmatch(action.strip()):
            out.add("invalid_action")
        return out

    def changes(self, action: str, observation: str) -> bool:
        """An action that moves or alters an object, and did something."""
        return bool(_CHANGES.match(action)) and observation != NOTHING_HAPPENS


TRANSCRIPT = CommandTranscript(
    kind="alfworld",
    instruction=formats.ALFWORLD_INSTRUCTION,
    chat_instruction="Continue the transcript above: reply with only the next command after '>' "
    "(one line: an action such as 'go to fridge 1', or 'think: ...').",
    keys=KeyScheme("ALFWorld", PREFIXES, TYPES, type_from_text),
    sft_system="Interact with a household to solve a task. Reply with one command per turn: an action, "
    "or 'think: ...' to reason (answered with 'OK.').",
    signals=Signals(),
    tools=command_tools(
        "Send one command to the household, exactly as ALFWorld reads it. The commands: 'go to {recep}', "
        "'open {recep}', 'close {recep}', 'take {obj} from {recep}', 'put {obj} in/on {recep}', "
        "'toggle {obj_or_recep}', 'clean {obj} with {recep}', 'heat {obj} with {recep}', "
        "'cool {obj} with {recep}', 'use {lamp}', 'examine {obj_or_recep}', 'inventory', 'look'. "
        "To reason without acting, reply with your thought and no tool call."
    ),
)
