"""The critic prompt a transcript layout provides (issue 29): a pinned, versioned template
that `react-editor suggest` fills with the transcript the agent saw, its outcome and its
failure signals - never the gold answer, the scorer or the environment's hidden state.

Placeholders are `{task}`, `{transcript}`, `{outcome}`, `{signals}`, `{first_failure}`,
`{k}` and `{kinds}`; they are replaced once, so text inside a transcript is never
re-read as a placeholder. A family may give its own (`EnvFamily.critic_prompt`)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

FIELDS = ("task", "transcript", "outcome", "signals", "first_failure", "k", "kinds")
_FIELD = re.compile(r"\{(" + "|".join(FIELDS) + r")\}")


@dataclass(frozen=True)
class CriticPrompt:
    """A named, versioned template; its hash names the exact template bytes."""

    name: str
    version: int
    text: str

    @property
    def hash(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def label(self) -> str:
        return f"{self.name}-v{self.version}"

    def fill(self, values: dict[str, str]) -> str:
        """The template with each placeholder replaced once (values are not re-scanned)."""
        return _FIELD.sub(lambda m: values.get(m.group(1), ""), self.text)


_COMMON_TAIL = """
Outcome: {outcome}
Failure signals: {signals}
Hint: the first step that raised a failure signal is {first_failure}.

Propose up to {k} edits, each a single change at one step, that would most likely have led the
agent to succeed. Allowed kinds: {kinds}.
- rewrite_thought: replace the thought of that step with "text".
- insert_thought_before / insert_thought_after: add a thought "text" before / after that step.
- rewrite_action: replace the action of that step with "text" (the environment runs it).
Do not state a final answer you do not know from the transcript; give reasoning the agent could
have had at that point.

Answer with one JSON object and nothing else:
{"candidates": [{"step": <step number>, "kind": "<kind>", "text": "<the new text>", "rationale": "<why>"}]}
"""

COMMAND = CriticPrompt(
    "command",
    1,
    """You review the trajectory of an agent that acts in a text environment one command per
turn. A turn "think: ..." is a thought (the environment answers "OK."); other turns are actions
followed by the environment's observation. The steps are numbered.

Task:
{task}

Trajectory:
{transcript}
"""
    + _COMMON_TAIL,
)

NUMBERED = CriticPrompt(
    "numbered",
    1,
    """You review the trajectory of an agent that answers a question or checks a claim with
tools. Each step has a thought, an action and the observation the action returned. The steps
are numbered.

Task:
{task}

Trajectory:
{transcript}
"""
    + _COMMON_TAIL,
)
