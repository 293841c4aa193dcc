"""The paper's two prompt families, as pure functions: render steps to text, parse text and
completions back to steps. Byte-for-byte what the original ReAct code sends.

ALFWorld (alfworld.ipynb): the prompt is
    INSTRUCTION + exemplar_1 + exemplar_0 + "\\nHere is the task.\\n" + ob + "\\n>" + " act\\nobs\\n>" ...
the model completes one line (stop "\\n"); a thought is the action "think: ..." answered "OK.".

Wikipedia (hotpotqa.ipynb / FEVER.ipynb): the prompt is
    INSTRUCTION + exemplars + "Question: ...\\n" + "Thought i: ...\\nAction i: ...\\nObservation i: ...\\n" ...
cued with "Thought i:" and stopped at "\\nObservation i:"; when the completion has no
"\\nAction i: " the paper's fallback asks again, cued with "Thought i: <first line>\\nAction i:".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Protocol, Sequence

from trajectory.records import Step

ALFWORLD_INSTRUCTION = "Interact with a household to solve a task. Here are two examples.\n"
ALFWORLD_TASK_CUE = "\nHere is the task.\n"
THINK_PREFIX = "think:"
THINK_OBSERVATION = "OK."

HOTPOTQA_INSTRUCTION = (
    "Solve a question answering task with interleaving Thought, Action, Observation steps. "
    "Thought can reason about the current situation, and Action can be three types: \n"
    "(1) Search[entity], which searches the exact entity on Wikipedia and returns the first "
    "paragraph if it exists. If not, it will return some similar entities to search.\n"
    "(2) Lookup[keyword], which returns the next sentence containing keyword in the current passage.\n"
    "(3) Finish[answer], which returns the answer and finishes the task.\n"
    "Here are some examples.\n"
)
# FEVER's notebook has no separate instruction: it is the head of the prompt file's value.
FEVER_HEADER = (
    "\nDetermine if there is Observation that SUPPORTS or REFUTES a Claim, or if there is NOT ENOUGH INFORMATION. \n"
)

WIKI_TASK_PREFIXES = ("Question: ", "Claim: ")


class Turn(Protocol):
    thought: str | None
    action: str | None
    observation: str | None


# --------------------------------------------------------------------------- ALFWorld


def alfworld_command(step: Turn) -> str:
    """The text after `> ` for one turn: the action, or `think: <thought>`."""
    if step.action is None:
        return f"{THINK_PREFIX} {step.thought or ''}"
    return step.action


def render_alfworld(task_text: str, steps: Iterable[Turn]) -> str:
    """A trajectory in the prompt-file layout: ob + "\\n" + "> cmd\\nobs\\n" per turn."""
    parts = [task_text, "\n"]
    for s in steps:
        parts.append(f"> {alfworld_command(s)}\n" + _obs_line(s))
    return "".join(parts)


def _obs_line(s: Turn) -> str:
    # The original exemplars sometimes omit a thought's "OK." line: None means no line.
    return "" if s.observation is None else s.observation + "\n"


def alfworld_prompt(
    exemplars: Sequence[str],
    task_text: str,
    steps: Sequence[Turn],
    *,
    instruction: str = ALFWORLD_INSTRUCTION,
    task_cue: str = ALFWORLD_TASK_CUE,
) -> str:
    """The exact text the notebook sends: `init_prompt + prompt`, ending with the cue `>`
    (another command-line game passes its own instruction and task cue)."""
    return alfworld_prompt_prefix(
        exemplars, task_text, instruction=instruction, task_cue=task_cue
    ) + alfworld_prompt_steps(steps)


def alfworld_prompt_prefix(
    exemplars: Sequence[str],
    task_text: str,
    *,
    instruction: str = ALFWORLD_INSTRUCTION,
    task_cue: str = ALFWORLD_TASK_CUE,
) -> str:
    """The part of `alfworld_prompt` no step changes (the engine builds it once per episode)."""
    return "".join([instruction, *exemplars, task_cue, task_text, "\n>"])


def alfworld_prompt_steps(steps: Sequence[Turn]) -> str:
    """The part of `alfworld_prompt` after its prefix: " cmd\nobs\n>" per turn."""
    return "".join(f" {alfworld_command(s)}\n" + _obs_line(s) + ">" for s in steps)


def split_think(command: str) -> str | None:
    """`think: X` -> `X` (one separating space removed); anything else -> None."""
    if not command.startswith(THINK_PREFIX):
        return None
    rest = command[len(THINK_PREFIX) :]
    return rest[1:] if rest.startswith(" ") else rest


def parse_alfworld_completion(completion: str) -> tuple[str | None, str | None]:
    """(thought, action) from one completed line; exactly one is set. As the notebook:
    the completion is stripped; an empty one is sent as an (invalid) empty command."""
    command = completion.strip()
    thought = split_think(command)
    if thought is not None:
        return thought, None
    return None, command


def parse_alfworld(text: str, *, index_base: int = 1) -> tuple[str, list[Step]]:
    """Inverse of `render_alfworld`: (task_text, steps). The task text is every line before
    the first `> ` line; each turn's observation runs to the next `> ` line."""
    if not text.endswith("\n"):
        raise FormatError("an ALFWorld transcript ends with a newline")
    lines = text[:-1].split("\n")
    first = next((i for i, line in enumerate(lines) if line.startswith("> ")), None)
    if first is None or first == 0:
        raise FormatError("no opening observation followed by '> ' turns")
    task_text = "\n".join(lines[:first])
    steps: list[Step] = []
    i = first
    while i < len(lines):
        command = lines[i][2:]
        j = i + 1
        while j < len(lines) and not lines[j].startswith("> "):
            j += 1
        observation = "\n".join(lines[i + 1 : j]) if j > i + 1 else None
        thought = split_think(command)
        steps.append(
            Step(
                index=len(steps) + index_base,
                thought=thought,
                action=None if thought is not None else command,
                observation=observation,
                source="imported",
            )
        )
        i = j
    return task_text, steps


# --------------------------------------------------------------------------- Wikipedia


def render_wiki_step(step: Turn, i: int, *, with_observation: bool = True) -> str:
    out = ""
    if step.thought is not None:
        out += f"Thought {i}: {step.thought}\n"
    out += f"Action {i}: {step.action or ''}\n"
    if with_observation and step.observation is not None:
        out += f"Observation {i}: {step.observation}\n"
    return out


def render_wiki(task_text: str, steps: Sequence[Turn]) -> str:
    """One trajectory as in the prompt files: `Question: ...\\n` then numbered turns. A
    step without an observation (the exemplars' closing Finish) has no Observation line."""
    return task_text + "\n" + render_wiki_steps(steps)


def render_wiki_steps(steps: Sequence[Turn]) -> str:
    """The numbered turns of `render_wiki`, after its task line."""
    return "".join(render_wiki_step(s, n) for n, s in enumerate(steps, 1))


def wiki_prompt_prefix(instruction: str, exemplars: str, task_text: str, steps: Sequence[Turn]) -> str:
    """Everything before the cue of the next step."""
    return wiki_prompt_fixed(instruction, exemplars, task_text) + render_wiki_steps(steps)


def wiki_prompt_fixed(instruction: str, exemplars: str, task_text: str) -> str:
    """The part of `wiki_prompt_prefix` no step changes (the engine builds it once per episode)."""
    return instruction + exemplars + task_text + "\n"


def wiki_step_cue(i: int, style: str) -> tuple[str, list[str]]:
    """(cue, stop) for step i: react cues `Thought i:`, act cues `Action i:`."""
    cue = f"Thought {i}:" if style == "react" else f"Action {i}:"
    return cue, [f"\nObservation {i}:"]


def wiki_action_cue(i: int, thought: str) -> tuple[str, list[str]]:
    """The paper's fallback (and the cue after a person's thought): ask for the action only."""
    return f"Thought {i}: {thought}\nAction {i}:", ["\n"]


@dataclass
class WikiParse:
    thought: str | None
    action: str | None  # None: the fallback call must supply it


def parse_wiki_completion(completion: str, i: int, style: str) -> WikiParse:
    """As the notebook: `thought, action = text.strip().split("\\nAction i: ")`; when that
    does not give exactly two parts, keep the first line as the thought and ask again."""
    text = completion.strip()
    if style == "act":
        return WikiParse(None, text.split("\n")[0].strip())
    parts = text.split(f"\nAction {i}: ")
    if len(parts) == 2:
        return WikiParse(parts[0], parts[1])
    return WikiParse(text.split("\n")[0], None)


def parse_wiki_action(completion: str) -> str:
    return completion.strip()


# --------------------------------------------------------------------------- prompt files


class FormatError(ValueError):
    """Text that is not in the expected transcript format (with the reason)."""


@dataclass
class WikiExample:
    task_text: str
    steps: list[Step]
    trailer: str = ""  # blank lines after the example (FEVER separates examples by one)


@dataclass
class WikiPromptFile:
    """A parsed prompt-file value: header (e.g. FEVER's instruction) + examples."""

    header: str
    examples: list[WikiExample]

    def render(self) -> str:
        return self.header + "".join(render_wiki(e.task_text, e.steps) + e.trailer for e in self.examples)


_WIKI_LINE_KINDS = ("Thought", "Action", "Observation")


def _wiki_line(line: str) -> tuple[str, int, str] | None:
    """('Thought'|'Action'|'Observation', i, text) for a numbered line, else None."""
    for kind in _WIKI_LINE_KINDS:
        if line.startswith(kind + " "):
            head, sep, rest = line.partition(": ")
            num = head[len(kind) + 1 :]
            if sep and num.isdigit():
                return kind, int(num), rest
    return None


def parse_wiki_examples(text: str) -> WikiPromptFile:
    """Parse a Wikipedia-format prompt-file value; `render()` gives the same bytes back."""
    lines = text.split("\n")
    starts = [n for n, line in enumerate(lines) if line.startswith(WIKI_TASK_PREFIXES)]
    if not starts:
        raise FormatError("no 'Question:' or 'Claim:' line found")
    header = "\n".join(lines[: starts[0]]) + ("\n" if starts[0] else "")
    examples: list[WikiExample] = []
    bounds = starts + [len(lines)]
    for a, b in zip(bounds, bounds[1:]):
        block = lines[a:b]
        trailer_n = 0
        while block and block[-1] == "" and len(block) > 1:
            block.pop()
            trailer_n += 1
        steps: list[Step] = []
        cur: dict[str, Any] | None = None
        last_kind = ""
        for line in block[1:]:
            parsed = _wiki_line(line)
            if parsed is None:
                if cur is None:  # a multi-line question/claim is not a trajectory
                    raise FormatError(f"unexpected line in example {len(examples) + 1}: {line[:60]!r}")
                cur[last_kind] += "\n" + line  # observations may span lines
                continue
            kind, i, rest = parsed
            last_kind = kind
            if cur is None or cur["i"] != i or kind in cur:
                if cur is not None:
                    steps.append(_wiki_step(cur))
                cur = {"i": i}
            cur[kind] = rest
        if cur is not None:
            steps.append(_wiki_step(cur))
        for n, s in enumerate(steps, 1):
            if s.index != n:
                raise FormatError(f"example {len(examples) + 1}: step {s.index} out of order")
        is_last = b == len(lines)
        if steps and trailer_n >= (2 if is_last else 1) and FINISHED_OBS.fullmatch(steps[-1].observation or ""):
            # the environment's "Episode finished, reward = N\n" keeps its newline (a resume
            # replays it and compares): the first blank line after it is the observation's
            steps[-1] = steps[-1].model_copy(update={"observation": (steps[-1].observation or "") + "\n"})
            trailer_n -= 1
        if steps:
            steps[-1] = finished_step(steps[-1])
        # lines after the block were joined by "\n"; the last block ends at end of text
        trailer = "\n" * (trailer_n - 1) if is_last else "\n" * trailer_n
        if is_last and trailer_n == 0:
            raise FormatError("a prompt file value ends with a newline")
        examples.append(WikiExample(block[0], steps, trailer))
    out = WikiPromptFile(header, examples)
    if out.render() != text:
        raise FormatError("the text does not round-trip through the Wikipedia format")
    return out


FINISHED_OBS = re.compile(r"Episode finished, reward = (-?\d+(?:\.\d+)?)")


def finished_step(step: Step) -> Step:
    """A transcript's last step marked done when its action is a Finish the original
    environment accepts (`action[0].lower() + action[1:]`, then stripped: `finish[...]`),
    with the reward its observation reports."""
    action = step.action or ""
    act = (action[:1].lower() + action[1:]).strip()
    if not (act.startswith("finish[") and act.endswith("]")):
        return step
    m = FINISHED_OBS.fullmatch((step.observation or "").rstrip("\n"))
    return step.model_copy(update={"done": True, "reward": float(m.group(1)) if m else 0.0})


def _wiki_step(cur: dict[str, Any]) -> Step:
    return Step(
        index=cur["i"],
        thought=cur.get("Thought"),
        action=cur.get("Action"),
        observation=cur.get("Observation"),
        source="imported",
    )
