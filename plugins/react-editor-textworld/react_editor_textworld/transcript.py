"""TextWorld's transcript: the command-line layout of ALFWorld (one command per turn, thoughts
as `think: ...` answered `OK.`) with its own instruction, exemplar keys (`react_cook_0`, ...)
and signals."""

from __future__ import annotations

import re

from envs.transcript import CommandTranscript, KeyScheme
from trajectory.tools import command_tools

KIND = "textworld"
INSTRUCTION = "Interact with a text game to solve a task. Here are two examples.\n"
# what the game answers a command it cannot parse or carry out
INVALID = (
    "That's not a verb I recognise",
    "You can't see any such thing",
    "I didn't understand that sentence",
    "I only understood you as far as",
    "You can't go that way",
)


_CHANGES = re.compile(
    r"(take|put|drop|insert|open|close|unlock|lock|cook|chop|dice|slice|prepare|eat|go|"
    r"north|south|east|west)\b",
    re.I,
)


class Signals:
    def mentions(self, text: str | None) -> set[str]:
        return set()  # TextWorld objects are free text ("a yellow apple"), not "apple 1"

    def flags(self, action: str | None, observation: str) -> set[str]:
        if action is None:
            return set()
        return {"invalid_action"} if observation.startswith(INVALID) else set()

    def changes(self, action: str, observation: str) -> bool:
        """A command that moves or alters something and was not refused."""
        return bool(_CHANGES.match(action)) and not observation.startswith(INVALID)


TRANSCRIPT = CommandTranscript(
    kind=KIND,
    instruction=INSTRUCTION,
    chat_instruction="Continue the transcript above: reply with only the next command after '>' "
    "(one line: an action such as 'take milk from fridge', or 'think: ...').",
    keys=KeyScheme("TextWorld", {"": "cook"}, {"cook": "cooking"}),  # every game uses the cooking exemplars
    sft_system="Play a text game to solve a task. Reply with one command per turn: an action, "
    "or 'think: ...' to reason (answered with 'OK.').",
    signals=Signals(),
    tools=command_tools(
        "Send one command to the text game, exactly as a player types it: 'look', 'inventory', "
        "'go north/south/east/west', 'open {thing}', 'take {item}', 'take {item} from {container}', "
        "'put {item} on/in {container}', 'cook {item} with {appliance}', 'slice/dice/chop {item} with knife', "
        "'prepare meal', 'eat meal'. To reason without acting, reply with your thought and no tool call."
    ),
)
