"""The numbered transcript (hotpotqa.ipynb / FEVER.ipynb): the prompt is
    INSTRUCTION + examples block + task line + "\\n" + "Thought i: ...\\nAction i: ...\\nObservation i: ...\\n" ...
cued with "Thought i:" (react) or "Action i:" (act) and stopped at "\\nObservation i:"; when a
react completion has no "\\nAction i: " the paper's fallback asks again, cued with
"Thought i: <first line>\\nAction i:". Prompt-file keys `webthink_*` / `webact_*` hold a whole
examples block (a header, then examples separated by the kind's trailer).
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
from trajectory.tools import ToolSet, wikipedia_tools

BLOCK_KEY = re.compile(r"^(webthink|webact)_")
CHAT = {
    "react": "Continue the transcript above: reply with exactly the next step, "
    "'Thought {i}: ...' then on a new line 'Action {i}: ...', and nothing else.",
    "act": "Continue the transcript above: reply with exactly the next action, 'Action {i}: ...', and nothing else.",
    "action": "Continue the transcript above: reply with only the action for step {i}, e.g. 'Search[...]'.",
}


@dataclass
class NumberedTranscript:
    kind: str
    instruction: str  # prepended to the examples block ("" when the block's header says it)
    header: str  # a new block's header
    trailer: str  # what follows each example in a block
    preferred: dict[str, tuple[str, ...]]  # style -> block keys to use first
    owns: Callable[[str], bool]  # whether a transcript's text is this kind's (e.g. has a `Claim:` line)
    sft_system: str
    signals: SignalRules = GENERIC
    critic_prompt: CriticPrompt = critic.NUMBERED  # `react-editor suggest`'s default template
    tools: ToolSet = field(default_factory=wikipedia_tools)  # the `tools` API style's
    thoughts_are_turns: bool = field(default=False, init=False)
    keyed_entries: bool = field(default=False, init=False)  # exemplars share a block entry
    thought_observation: str | None = field(default=None, init=False)

    # -------------------------------------------------------------- a turn
    def command(self, thought: str | None, action: str | None) -> str:
        return action or ""

    def split_thought(self, command: str) -> str | None:
        return None

    def step_text(self, step: Any) -> str:
        return formats.render_wiki_step(step, step.index, with_observation=False).rstrip("\n")

    def chat_turn(self, step: Any, i: int) -> tuple[str, str | None]:
        content = formats.render_wiki_step(step, i, with_observation=False).rstrip("\n")
        return content, None if step.observation is None else f"Observation {i}: {step.observation}"

    def render(self, task_text: str, steps: Sequence[Any]) -> str:
        return formats.render_wiki(task_text, steps)

    # -------------------------------------------------------------- the model
    def block(self, prompts: dict[str, str], style: str) -> str:
        """The examples block a prompt uses: the paper's own key when the set has it."""
        return prompts[self.block_key(prompts, style)]

    def block_key(self, prompts: dict[str, str], style: str) -> str:
        """The key of the examples block `block` picks."""
        head = "webthink" if style == "react" else "webact"
        preferred = [k for k in self.preferred.get(style, ()) if k in prompts]
        keys = preferred or sorted(k for k in prompts if k.startswith(head))
        if not keys:
            raise ExemplarError(f"no '{head}_*' exemplars for {self.kind} in this exemplar set")
        return keys[0]

    def exemplar_texts(self, prompts: dict[str, str], task: Task, style: str) -> list[str]:
        """The examples block a task's prompt uses (the conversation styles parse it into prior
        turns through `parse_prompt_text`)."""
        return [self.block(prompts, style)]

    def fixed_prefix(self, prompts: dict[str, str], task: Task, style: str) -> str:
        """What every request of the task starts with (instruction, examples block, task):
        the engine builds it once per episode and exemplar revision and passes it as `fixed`."""
        return formats.wiki_prompt_fixed(self.instruction, self.block(prompts, style), task.text)

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
        prefix = fixed + formats.render_wiki_steps(steps)
        i = len(steps) + 1
        if draft is not None:  # a person's thought waits for its action
            return self._action_request(prefix, i, draft)
        cue, stop = formats.wiki_step_cue(i, style)
        return ModelRequest(prefix + cue, stop, CHAT[style].format(i=i), index=i, style=style, prefix=prefix)

    def _action_request(self, prefix: str, i: int, thought: str) -> ModelRequest:
        cue, stop = formats.wiki_action_cue(i, thought)
        return ModelRequest(
            prefix + cue,
            stop,
            CHAT["action"].format(i=i),
            purpose="action_fallback",
            index=i,
            prefix=prefix,
            thought=thought,
        )

    def parse(self, request: ModelRequest, completion: str) -> Reply:
        i = request.index
        if request.purpose == "action_fallback":
            return Reply(request.thought, formats.parse_wiki_action(completion))
        if request.style == "act":  # the action alone
            return Reply(None, formats.parse_wiki_completion(completion, i, "act").action)
        parsed = formats.parse_wiki_completion(completion, i, "react")
        if parsed.action is None:  # the paper's fallback: ask for the action alone
            return Reply(parsed.thought, None, then=self._action_request(request.prefix, i, parsed.thought or ""))
        return Reply(parsed.thought, parsed.action)

    def check_exemplars(self, prompts: dict[str, str], style: str) -> None:
        self.block(prompts, style)

    # -------------------------------------------------------------- prompt files
    def exemplar_text(self, task_text: str, steps: Sequence[Step]) -> str:
        """`render_wiki` with the closing Finish step's observation dropped, as the paper's
        prompt files have it."""
        steps = list(steps)
        if steps:
            last = steps[-1]
            if last.observation is not None and (last.done or (last.action or "").lower().startswith("finish[")):
                steps[-1] = last.model_copy(update={"observation": None})
        return formats.render_wiki(task_text, steps)

    def next_key(self, exemplar: Exemplar, used: set[str]) -> str | None:
        return None

    def export_trailer(self, exemplar: Exemplar) -> str:
        return exemplar.trailer if exemplar.trailer is not None else self.trailer

    def assemble(self, items: Iterable[Exemplar | RawEntry]) -> dict[str, str]:
        """Exemplars grouped into blocks by key (automatic: `webthink_simpleN` by style),
        keys in the order items first use them. Exemplars keyed like an earlier text entry
        join that block after its text (a set built on the built-in examples, with a fix)."""
        slots: list[tuple[str, object]] = []  # ("key", (key, text)) | ("block", block id)
        blocks: dict[object, dict] = {}
        used: set[str] = set()
        for it in items:
            if isinstance(it, RawEntry):
                if it.key not in used:
                    used.add(it.key)
                    slots.append(("key", (it.key, it.text)))
                continue
            if it.env != self.kind:
                raise PromptFileError(f"an exemplar set holds one environment: {it.env} does not fit {self.kind}")
            bid: object = it.key if it.key else ("auto", it.style)
            if bid in used and bid not in blocks:  # joins the text entry of that key: its text, then the exemplars
                i = next(j for j, (kind, val) in enumerate(slots) if kind == "key" and val[0] == bid)  # type: ignore[index]
                blocks[bid] = {"header": "", "parts": [slots[i][1][1]], "style": it.style}  # type: ignore[index]
                slots[i] = ("block", bid)
            if bid not in blocks:
                blocks[bid] = {"header": it.header, "parts": [], "style": it.style}
                slots.append(("block", bid))
            b = blocks[bid]
            if b["header"] is None and it.header is not None:
                b["header"] = it.header
            b["parts"].append(it.text + self.export_trailer(it))
        used |= {b for b in blocks if isinstance(b, str)}
        out: dict[str, str] = {}
        for kind, val in slots:
            if kind == "key":
                key, text = val  # type: ignore[misc]
                out[key] = text
                continue
            out[self._block_key(val, blocks[val], used)] = self._block_text(blocks[val])
        return out

    def _block_key(self, bid: object, b: dict, used: set[str]) -> str:
        if isinstance(bid, str):
            return bid
        head = "webthink" if b["style"] == "react" else "webact"
        key = base = f"{head}_simple{len(b['parts'])}"
        j = 2
        while key in used:
            key, j = f"{base}_{j}", j + 1
        used.add(key)
        return key

    def _block_text(self, b: dict) -> str:
        return (b["header"] if b["header"] is not None else self.header) + "".join(b["parts"])

    def claims(self, data: dict[str, str] | str) -> bool:
        if isinstance(data, str):
            return not any(line.startswith("> ") for line in data.split("\n")) and self.owns(data)
        blocks = [v for k, v in data.items() if BLOCK_KEY.match(k)]
        return bool(blocks) and self.owns("\n".join(v for v in blocks if isinstance(v, str)))

    def parse_prompt_file(self, data: dict[str, str], source: str) -> list[ParsedEntry]:
        out: list[ParsedEntry] = []
        for key, value in data.items():
            parsed = None
            if BLOCK_KEY.match(key):
                try:
                    parsed = formats.parse_wiki_examples(value)
                except formats.FormatError:
                    parsed = None
            if parsed is None:
                out.append(ParsedEntry(key, [], value))
                continue
            out.append(
                ParsedEntry(
                    key,
                    [
                        ParsedTrajectory(
                            env=self.kind,
                            name=f"{key}#{n}",
                            task_id=f"{key}#{n}",
                            task_type=None,
                            task_text=ex.task_text,
                            style="react" if key.startswith("webthink") else "act",
                            steps=ex.steps,
                            data={
                                "prompt_file": source,
                                "prompt_key": key,
                                "position": n,
                                "header": parsed.header,
                                "trailer": ex.trailer,
                            },
                            gold=None,  # the model's own Finish is no gold answer; the dataset's may be (import --source)
                        )
                        for n, ex in enumerate(parsed.examples, 1)
                    ],
                )
            )
        return out

    def parse_prompt_text(self, text: str, source: str) -> list[ParsedEntry]:
        """A plain-text examples block: one episode per example."""
        try:
            parsed = formats.parse_wiki_examples(text)
        except formats.FormatError as exc:
            raise PromptFileError(f"not a Wikipedia-format transcript: {exc}") from None
        style = "react" if any(s.thought is not None for e in parsed.examples for s in e.steps) else "act"
        key = f"{'webthink' if style == 'react' else 'webact'}_simple{len(parsed.examples)}"
        return self.parse_prompt_file({key: text}, source=source)
