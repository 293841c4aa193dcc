"""The paper's Standard and CoT prompts for HotpotQA / FEVER (pure).

The ReAct release's prompt files carry them: `webqa_*` (Question/Claim, then `Answer: X`)
and `cotqa_*` (a `Thought: ...` line before the answer). A prompt is the examples block,
the task's opening line, and the cue (`Answer:` or `Thought:`). FEVER's blocks separate
examples by a blank line, so its task is too. A CoT completion is the thought, then
`Answer: X`; the answer is what the `Finish[X]` of the stored episode says.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Sequence

QA_METHODS = ("standard", "cot")
QA_KEY_HEADS = {"standard": "webqa", "cot": "cotqa"}
CUES = {"standard": "\nAnswer:", "cot": "\nThought:"}
STOPS = {"standard": ["\n"], "cot": ["\nQuestion:", "\nClaim:", "\n\n"]}
_ANSWER_IS = re.compile(r"answer is[:\s]+(.+?)\.?\s*$", re.IGNORECASE)


def qa_prompt(block: str, task_text: str, method: str) -> tuple[str, list[str]]:
    """(prompt, stop) for one Standard or CoT answer."""
    if method not in QA_METHODS:
        raise ValueError(f"not a question-answering prompt method: {method!r}")
    sep = "\n" if "\n\n" in block.rstrip("\n") and not block.endswith("\n\n") else ""
    return block + sep + task_text + CUES[method], list(STOPS[method])


@dataclass
class QAParse:
    thought: str | None
    answer: str  # "" when the completion gave none


def parse_qa(completion: str, method: str) -> QAParse:
    """Standard: the first line is the answer. CoT: `thought\\nAnswer: X`; without an
    Answer line, "... the answer is X." is taken, else no answer."""
    text = completion.strip()
    if method == "standard":
        return QAParse(None, text.split("\n")[0].strip())
    head, sep, tail = text.partition("\nAnswer:")
    thought = " ".join(head.split())
    if sep:
        return QAParse(thought or None, tail.strip().split("\n")[0].strip())
    m = _ANSWER_IS.search(thought)
    return QAParse(thought or None, m.group(1).strip() if m else "")


def majority(answers: Sequence[str], normalize: Callable[[str], str]) -> tuple[str, int]:
    """(the most common answer, how many samples gave it), comparing normalized answers;
    ties go to the answer seen first; empty answers never win while others exist."""
    given = [a for a in answers if normalize(a)]
    if not given:
        return "", 0
    counts = Counter(normalize(a) for a in given)
    best, n = counts.most_common(1)[0]
    first = next(a for a in given if normalize(a) == best)
    return first, n
