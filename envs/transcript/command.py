"""The command-line transcript (alfworld.ipynb's layout): the prompt is
    INSTRUCTION + exemplar_1 + exemplar_0 + TASK_CUE + ob + "\\n>" + " cmd\\nobs\\n>" ...
the model completes one line (stop "\\n"); a thought is the command `think: ...`, answered
`OK.`. Prompt-file keys are `<style>_<variant>_<i>` (react_put_0, act_clean_1, ...), and a
task's exemplars are the two of its variant. Any family whose environment takes one text
command per turn can use it with its own instruction, variants and signal rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from envs.transcript import critic
from envs.transcript.critic import CriticPrompt
from trajectory import formats
from trajectory.kinds import ModelRequest, Reply, SignalRules
from trajectory.prompt_files import Exemplar, ExemplarError, ParsedEntry, ParsedTrajectory, PromptFileError, RawEntry
from trajectory.records import Step, Task
from trajectory.signals import GENERIC
from trajectory.tools import ToolSet, command_tools

GENERIC_ACT = (
    "Send one command to the game, exactly as a player types it (e.g. 'look', 'inventory', "
    "'go to ...', 'take ... from ...'); the game answers with what happens."
)


@dataclass(frozen=True)
class KeyScheme:
    """Task types and the prompt-file variants their exemplars are filed under."""

    title: str  # the environment's name in messages
    prefixes: dict[str, str]  # task-type prefix -> variant (the notebook's `prefixes`)
    types: dict[str, str]  # variant -> the task type an imported exemplar of it stands for
    type_from_text: Callable[[str], str] | None = None  # a plain transcript's task type

    def variant(self, task_type: str | None) -> str:
        """Task type or game name -> variant (`put`, `clean`, ...), as the notebook."""
        for prefix, v in self.prefixes.items():
            if (task_type and task_type.startswith(prefix)) or prefix == "":
                return v
        raise ExemplarError(f"unknown {self.title} task type {task_type!r}")

    @property
    def key(self) -> re.Pattern:
        return re.compile(rf"^(react|act)_({'|'.join(map(re.escape, self.types))})_(\d+)$")


def _num(key: str) -> int:
    tail = key.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else -1


@dataclass
class CommandTranscript:
    kind: str
    instruction: str
    chat_instruction: str
    keys: KeyScheme
    sft_system: str
    signals: SignalRules = GENERIC
    task_cue: str = formats.ALFWORLD_TASK_CUE
    critic_prompt: CriticPrompt = critic.COMMAND  # `react-editor suggest`'s default template
    zero_shot_instruction: str | None = None  # the instruction when there are no exemplars
    tools: ToolSet = field(default_factory=lambda: command_tools(GENERIC_ACT))  # the `tools` API style's
    thoughts_are_turns: bool = field(default=True, init=False)
    keyed_entries: bool = field(default=True, init=False)  # each exemplar is its own prompt-file entry
    thought_observation: str | None = field(default=formats.THINK_OBSERVATION, init=False)

    # -------------------------------------------------------------- a turn
    def command(self, thought: str | None, action: str | None) -> str:
        return f"{formats.THINK_PREFIX} {thought or ''}" if action is None else action

    def split_thought(self, command: str) -> str | None:
        return formats.split_think(command)

    def step_text(self, step: Any) -> str:
        return formats.alfworld_command(step)

    def chat_turn(self, step: Any, i: int) -> tuple[str, str | None]:
        obs = (
            step.observation
            if step.observation is not None
            else (formats.THINK_OBSERVATION if step.action is None else None)
        )
        return formats.alfworld_command(step), obs

    def render(self, task_text: str, steps: Sequence[Any]) -> str:
        return formats.render_alfworld(task_text, steps)

    # -------------------------------------------------------------- the model
    def exemplars(self, prompts: dict[str, str], task_type: str | None, style: str) -> list[str]:
        """The notebook's choice: `d[f'{style}_{v}_1'] + d[f'{style}_{v}_0']`; sets with other
        numbering use their entries of that variant, highest number first. No exemplars at all
        (a family that ships none, no set named): none, a zero-shot prompt."""
        if not prompts:
            return []
        pre = f"{style}_{self.keys.variant(task_type)}_"
        if pre + "1" in prompts and pre + "0" in prompts:
            return [prompts[pre + "1"], prompts[pre + "0"]]
        keys = sorted((k for k in prompts if k.startswith(pre)), key=_num, reverse=True)
        if not keys:
            raise ExemplarError(f"no '{style}' exemplars of type '{pre.split('_')[1]}' in this exemplar set")
        return [prompts[k] for k in keys[:2]]

    def exemplar_texts(self, prompts: dict[str, str], task: Task, style: str) -> list[str]:
        """The exemplar transcripts a task's prompt uses (the conversation styles parse them
        into prior turns through `parse_prompt_text`)."""
        return self.exemplars(prompts, task.type, style)

    def prompt(self, exemplars: Sequence[str], task_text: str, steps: Sequence[Any]) -> str:
        """The exact text the notebook sends: `init_prompt + prompt`, ending with the cue `>`."""
        return self._prefix(exemplars, task_text) + formats.alfworld_prompt_steps(steps)

    def _prefix(self, exemplars: Sequence[str], task_text: str) -> str:
        instruction = self.instruction
        if not exemplars and self.zero_shot_instruction is not None:
            instruction = self.zero_shot_instruction
        return formats.alfworld_prompt_prefix(exemplars, task_text, instruction=instruction, task_cue=self.task_cue)

    def fixed_prefix(self, prompts: dict[str, str], task: Task, style: str) -> str:
        """What every request of the task starts with (instruction, exemplars, task): the
        engine builds it once per episode and exemplar revision and passes it as `fixed`."""
        return self._prefix(self.exemplars(prompts, task.type, style), task.text)

    def request(
        self,
        prompts: dict[str, str],
        task: Task,
        steps: Sequence[Any],
        style: str,
        draft: str | None,
        fixed: str | None = None,
    ) -> ModelRequest:
        if fixed is None:
            fixed = self.fixed_prefix(prompts, task, style)
        text = fixed + formats.alfworld_prompt_steps(steps)
        return ModelRequest(text, ["\n"], self.chat_instruction, index=len(steps) + 1)

    def parse(self, request: ModelRequest, completion: str) -> Reply:
        thought, action = formats.parse_alfworld_completion(completion)
        return Reply(thought, action)

    def check_exemplars(self, prompts: dict[str, str], style: str) -> None:
        for prefix in self.keys.prefixes:
            self.exemplars(prompts, prefix, style)

    # -------------------------------------------------------------- prompt files
    def exemplar_text(self, task_text: str, steps: Sequence[Step]) -> str:
        return formats.render_alfworld(task_text, steps)

    def next_key(self, exemplar: Exemplar, used: set[str]) -> str:
        try:
            pre = f"{exemplar.style}_{self.keys.variant(exemplar.task_type)}_"
        except ExemplarError as exc:
            raise PromptFileError(f"{exc}; an {self.keys.title} exemplar needs its task type") from None
        taken = {k for k in used if k.startswith(pre)}
        i = 0
        while f"{pre}{i}" in taken:
            i += 1
        return f"{pre}{i}"

    def assemble(self, items: Iterable[Exemplar | RawEntry]) -> dict[str, str]:
        """A prompt dict in the original layout, keys in the order items first use them;
        exemplars without a (free) key get the next `<style>_<v>_<i>`."""
        out: dict[str, str] = {}
        for it in items:
            if isinstance(it, RawEntry):
                out.setdefault(it.key, it.text)
                continue
            if it.env != self.kind:
                raise PromptFileError(f"an exemplar set holds one environment: {it.env} does not fit {self.kind}")
            key = it.key if it.key and it.key not in out else self.next_key(it, set(out))
            out[key] = it.text
        return out

    def export_trailer(self, exemplar: Exemplar) -> str:
        return ""

    def claims(self, data: dict[str, str] | str) -> bool:
        if isinstance(data, str):
            return any(line.startswith("> ") for line in data.split("\n"))
        return any(self.keys.key.match(k) for k in data)

    def parse_prompt_file(self, data: dict[str, str], source: str) -> list[ParsedEntry]:
        out: list[ParsedEntry] = []
        for key, value in data.items():
            m = self.keys.key.match(key)
            try:
                task_text, steps = formats.parse_alfworld(value) if m else (None, None)
            except formats.FormatError:
                m = None
            if not m:
                out.append(ParsedEntry(key, [], value))
                continue
            out.append(
                ParsedEntry(
                    key,
                    [
                        ParsedTrajectory(
                            env=self.kind,
                            name=key,
                            task_id=key,
                            task_type=self.keys.types[m.group(2)],
                            task_text=task_text,
                            style=m.group(1),
                            steps=steps,
                            data={"prompt_file": source, "prompt_key": key},
                        )
                    ],
                )
            )
        return out

    def parse_prompt_text(self, text: str, source: str) -> list[ParsedEntry]:
        try:
            task_text, steps = formats.parse_alfworld(text)
        except formats.FormatError as exc:
            raise PromptFileError(f"not an {self.keys.title} transcript: {exc}") from None
        style = "react" if any(s.thought is not None for s in steps) else "act"
        guess = self.keys.type_from_text or (lambda _t: next(iter(self.keys.types.values())))
        ttype = guess(task_text)
        key = f"{style}_{self.keys.variant(ttype)}_0"
        return [
            ParsedEntry(
                key,
                [
                    ParsedTrajectory(
                        env=self.kind,
                        name=key,
                        task_id=f"{source}:{key}",
                        task_type=ttype,
                        task_text=task_text,
                        style=style,
                        steps=steps,
                        data={"prompt_file": source, "prompt_key": key},
                    )
                ],
            )
        ]


def admissible_warning(action: str, admissible, consequence: str = "") -> str | None:
    """A command not among the admissible ones (None: blank, a thought, no list, or admissible);
    `consequence` is appended to the message."""
    a = action.strip()
    if not a or a.startswith(formats.THINK_PREFIX) or not admissible or a in admissible:
        return None
    return f"'{a}' is not among the {len(admissible)} admissible commands here{consequence}"


def generic_transcript(kind: str, instruction: str | None = None) -> CommandTranscript:
    """The command-line layout for a family that names no transcript: one variant (`task`),
    prompt-file keys `react_task_<i>` / `act_task_<i>`."""
    return CommandTranscript(
        kind=kind,
        instruction=instruction or "Interact with the environment to solve a task. Here are two examples.\n",
        zero_shot_instruction=None if instruction else "Interact with the environment to solve a task.\n",
        chat_instruction="Continue the transcript above: reply with only the next command after '>' "
        "(one line: an action, or 'think: ...').",
        keys=KeyScheme(kind, {"": "task"}, {"task": ""}),
        sft_system="Solve the task. Reply with one command per turn: an action, or 'think: ...' to reason.",
    )
