"""HotpotQA's and FEVER's transcript: the paper's numbered layout (hotpotqa.ipynb,
FEVER.ipynb) with each notebook's instruction and exemplar blocks, and the signals of the
Wikipedia API (a search or lookup that found nothing, an action it cannot run)."""

from __future__ import annotations

from envs.transcript import NumberedTranscript
from trajectory import formats
from trajectory.tools import wikipedia_tools

# Observations for actions the environment could not parse or execute (env.py: an unknown
# action, lookup before any search, an empty search).
INVALID = ("Invalid action", "No page is open yet", "Search needs an entity")
_ACTIONS = " Use Thought, Action and Observation steps; Action is Search[entity], Lookup[keyword] or "


class Signals:
    def mentions(self, text: str | None) -> set[str]:
        return set()

    def flags(self, action: str | None, observation: str) -> set[str]:
        out = set()
        if action is not None and observation.startswith(INVALID):
            out.add("invalid_action")
        if observation.startswith("Could not find"):
            out.add("search_miss")
        if observation.startswith("No more results"):
            out.add("lookup_miss")
        return out

    def changes(self, action: str, observation: str) -> bool:
        """A search that opened a page (a lookup then reads a different passage)."""
        act = action[:1].lower() + action[1:]
        return act.startswith("search[") and not observation.startswith(("Could not find", "Invalid action"))


def _has_claim(text: str) -> bool:
    return any(line.startswith("Claim: ") for line in ("\n" + text).split("\n"))


HOTPOTQA = NumberedTranscript(
    kind="hotpotqa",
    instruction=formats.HOTPOTQA_INSTRUCTION,
    header="\n",
    trailer="",
    preferred={
        "react": ("webthink_simple6", "webthink_simple", "webthink_simple_3"),
        "act": ("webact_simple6", "webact_simple"),
    },
    owns=lambda text: not _has_claim(text),
    sft_system=formats.HOTPOTQA_INSTRUCTION.replace("Here are some examples.\n", "").strip(),
    signals=Signals(),
)
# FEVER's notebook has no separate instruction: it is the head of the prompt file's value.
FEVER = NumberedTranscript(
    kind="fever",
    instruction="",
    header=formats.FEVER_HEADER,
    trailer="\n",
    preferred={"react": ("webthink_simple3",), "act": ("webact_simple3",)},
    owns=_has_claim,
    tools=wikipedia_tools(fever=True),
    sft_system=formats.FEVER_HEADER.strip() + _ACTIONS + "Finish[SUPPORTS | REFUTES | NOT ENOUGH INFO].",
    signals=Signals(),
)
TRANSCRIPTS = {"hotpotqa": HOTPOTQA, "fever": FEVER}
