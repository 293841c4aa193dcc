"""The original ReAct prompt-file layout, as pure functions: a version becomes an exemplar
(its trajectory in prompt-file form), exemplars become a prompt dict (ALFWorld keys
`react_<v>_<i>` / `act_<v>_<i>`, Wikipedia keys `webthink_simpleN` / `webact_simpleN`
holding the whole examples block), and a prompt file's entries become importable items.

Imported Wikipedia examples remember their block key, position, the block's header and
their trailer (in `Task.data`), so re-assembling unchanged imports gives the same bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from trajectory import formats as fmt
from trajectory.records import Episode, Step

ALFWORLD_PREFIXES = {
    "pick_and_place": "put",
    "pick_clean_then_place": "clean",
    "pick_heat_then_place": "heat",
    "pick_cool_then_place": "cool",
    "look_at_obj": "examine",
    "pick_two_obj": "puttwo",
}  # the notebook's `prefixes`: task-type prefix -> exemplar family


class ExemplarError(ValueError):
    """No usable exemplars for a task (one line)."""


def alfworld_type_key(task_type: str | None) -> str:
    """Task type or game name -> exemplar family (`put`, `clean`, ...), as the notebook."""
    for prefix, v in ALFWORLD_PREFIXES.items():
        if task_type and task_type.startswith(prefix):
            return v
    raise ExemplarError(f"unknown ALFWorld task type {task_type!r}")


# exemplar family -> the ALFWorld task type it stands for (for imported exemplars)
ALFWORLD_TYPES = {v: k for k, v in {
    "pick_and_place_simple": "put",
    "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "heat",
    "pick_cool_then_place_in_recep": "cool",
    "look_at_obj_in_light": "examine",
    "pick_two_obj_and_place": "puttwo",
}.items()}
assert set(ALFWORLD_TYPES) == set(ALFWORLD_PREFIXES.values())

ALFWORLD_KEY = re.compile(r"^(react|act)_(put|clean|heat|cool|examine|puttwo)_(\d+)$")
WIKI_KEY = re.compile(r"^(webthink|webact)_")
WIKI_DEFAULT_HEADER = {"hotpotqa": "\n", "fever": fmt.FEVER_HEADER}
WIKI_DEFAULT_TRAILER = {"hotpotqa": "", "fever": "\n"}


class PromptFileError(ValueError):
    """A prompt file or exemplar that cannot be used (one line)."""


@dataclass
class Exemplar:
    """One trajectory in prompt-file form plus what placing it in a prompt dict needs."""

    env: str
    style: str  # react | act
    text: str
    task_type: str | None = None
    key: str | None = None  # ALFWorld: the entry key; Wikipedia: the block key (None: automatic)
    header: str | None = None  # Wikipedia: the block's header (imported), else the env default
    trailer: str | None = None  # Wikipedia: what follows the example in its block


@dataclass
class RawEntry:
    """A prompt-file entry that is not a trajectory (cotqa_*, webqa_*): kept as text."""

    key: str
    text: str


def exemplar_style(episode: Episode, steps: Sequence[Step]) -> str:
    return "react" if any(s.thought is not None for s in steps) else episode.config.style


def exemplar_text(env: str, task_text: str, steps: Sequence[Step]) -> str:
    """ALFWorld: `render_alfworld`. Wikipedia: `render_wiki` with the closing Finish
    step's observation dropped, as the paper's prompt files have it."""
    if env == "alfworld":
        return fmt.render_alfworld(task_text, steps)
    steps = list(steps)
    if steps:
        last = steps[-1]
        if last.observation is not None and (last.done or (last.action or "").lower().startswith("finish[")):
            steps[-1] = last.model_copy(update={"observation": None})
    return fmt.render_wiki(task_text, steps)


def exemplar_from(episode: Episode, steps: Sequence[Step], key: str | None = None) -> Exemplar:
    task = episode.task
    data = task.data or {}
    return Exemplar(
        env=task.env,
        style=exemplar_style(episode, steps),
        text=exemplar_text(task.env, task.text, steps),
        task_type=task.type,
        key=key if key is not None else data.get("prompt_key"),
        header=data.get("header"),
        trailer=data.get("trailer"),
    )


def alfworld_prefix(style: str, task_type: str | None) -> str:
    try:
        return f"{style}_{alfworld_type_key(task_type)}_"
    except ExemplarError as exc:
        raise PromptFileError(f"{exc}; an ALFWorld exemplar needs its task type") from None


def next_alfworld_key(style: str, task_type: str | None, used: Iterable[str]) -> str:
    pre = alfworld_prefix(style, task_type)
    taken = {k for k in used if k.startswith(pre)}
    i = 0
    while f"{pre}{i}" in taken:
        i += 1
    return f"{pre}{i}"


def assemble(env: str, items: Iterable[Exemplar | RawEntry]) -> dict[str, str]:
    """A prompt dict in the original layout, keys in the order items first use them.
    ALFWorld exemplars without a (free) key get the next `<style>_<v>_<i>`; Wikipedia
    exemplars are grouped into blocks by key (automatic: `webthink_simpleN` by style)."""
    slots: list[tuple[str, object]] = []  # ("key", text) | ("block", block id)
    blocks: dict[object, dict] = {}
    used: set[str] = set()
    for it in items:
        if isinstance(it, RawEntry):
            if it.key not in used:
                used.add(it.key)
                slots.append(("key", (it.key, it.text)))
            continue
        if it.env != env:
            raise PromptFileError(f"an exemplar set holds one environment: {it.env} does not fit {env}")
        if env == "alfworld":
            key = it.key if it.key and it.key not in used else next_alfworld_key(it.style, it.task_type, used)
            used.add(key)
            slots.append(("key", (key, it.text)))
        else:
            bid: object = it.key if it.key else ("auto", it.style)
            if bid not in blocks:
                blocks[bid] = {"header": it.header, "parts": [], "style": it.style}
                slots.append(("block", bid))
            b = blocks[bid]
            if b["header"] is None and it.header is not None:
                b["header"] = it.header
            trailer = it.trailer if it.trailer is not None else WIKI_DEFAULT_TRAILER.get(env, "")
            b["parts"].append(it.text + trailer)
    used |= {b for b in blocks if isinstance(b, str)}
    out: dict[str, str] = {}
    for kind, val in slots:
        if kind == "key":
            key, text = val  # type: ignore[misc]
            out[key] = text
            continue
        b = blocks[val]
        if isinstance(val, str):
            key = val
        else:
            head = "webthink" if b["style"] == "react" else "webact"
            key = base = f"{head}_simple{len(b['parts'])}"
            j = 2
            while key in used:
                key, j = f"{base}_{j}", j + 1
            used.add(key)
        header = b["header"] if b["header"] is not None else WIKI_DEFAULT_HEADER.get(env, "\n")
        out[key] = header + "".join(b["parts"])
    return out


# ---------------------------------------------------------------------- parsing prompt files


@dataclass
class ParsedTrajectory:
    """One trajectory read from a prompt file: the episode it becomes."""

    env: str
    name: str  # the JSON key (ALFWorld) or key#position (Wikipedia)
    task_id: str
    task_type: str | None
    task_text: str
    style: str
    steps: list[Step]
    data: dict = field(default_factory=dict)
    gold: str | None = None


@dataclass
class ParsedEntry:
    key: str
    trajectories: list[ParsedTrajectory]  # empty: a raw entry
    raw: str | None = None


def wiki_env_of(values: Iterable[str]) -> str:
    for v in values:
        for line in v.split("\n"):
            if line.startswith("Claim: "):
                return "fever"
    return "hotpotqa"


def file_env(d: dict[str, str]) -> str:
    alf = any(ALFWORLD_KEY.match(k) for k in d)
    wiki = [v for k, v in d.items() if WIKI_KEY.match(k)]
    if alf and wiki:
        raise PromptFileError("the file mixes ALFWorld and Wikipedia entries; import them separately")
    if alf:
        return "alfworld"
    if wiki:
        return wiki_env_of(wiki)
    raise PromptFileError("no ReAct trajectory entries (react_*/act_* or webthink_*/webact_*) in this file")


def parse_prompt_file(d: dict, *, source: str, env: str | None = None) -> tuple[str, list[ParsedEntry]]:
    """Every entry of a prompt-file dict, in order: trajectories or raw text."""
    for k, v in d.items():
        if not isinstance(v, str):
            raise PromptFileError(f"entry {k!r} is not a string")
    env = env or file_env(d)
    out: list[ParsedEntry] = []
    for key, value in d.items():
        m = ALFWORLD_KEY.match(key)
        if env == "alfworld" and m:
            try:
                task_text, steps = fmt.parse_alfworld(value)
            except fmt.FormatError:
                out.append(ParsedEntry(key, [], value))
                continue
            out.append(ParsedEntry(key, [ParsedTrajectory(
                env="alfworld", name=key, task_id=key, task_type=ALFWORLD_TYPES[m.group(2)], task_text=task_text,
                style=m.group(1), steps=steps, data={"prompt_file": source, "prompt_key": key},
            )]))
        elif env != "alfworld" and WIKI_KEY.match(key):
            try:
                parsed = fmt.parse_wiki_examples(value)
            except fmt.FormatError:
                out.append(ParsedEntry(key, [], value))
                continue
            trajs = []
            for n, ex in enumerate(parsed.examples, 1):
                trajs.append(ParsedTrajectory(
                    env=env, name=f"{key}#{n}", task_id=f"{key}#{n}", task_type=None, task_text=ex.task_text,
                    style="react" if key.startswith("webthink") else "act", steps=ex.steps,
                    data={"prompt_file": source, "prompt_key": key, "position": n, "header": parsed.header,
                          "trailer": ex.trailer},
                    gold=None,  # the model's own Finish is no gold answer; the dataset's may be (import --source)
                ))
            out.append(ParsedEntry(key, trajs))
        else:
            out.append(ParsedEntry(key, [], value))
    return env, out


def alfworld_type_from_text(task_text: str) -> str:
    """The task type an ALFWorld goal sentence implies (for plain-text imports)."""
    goal = task_text.rsplit("Your task is to:", 1)[-1].lower()
    if "look at" in goal or "examine" in goal:
        return ALFWORLD_TYPES["examine"]
    if "put two" in goal or "find two" in goal:
        return ALFWORLD_TYPES["puttwo"]
    for word, v in (("clean", "clean"), ("hot", "heat"), ("heat", "heat"), ("cool", "cool")):
        if re.search(rf"\b{word}\b", goal):
            return ALFWORLD_TYPES[v]
    return ALFWORLD_TYPES["put"]


def parse_prompt_text(text: str, *, env: str, source: str) -> tuple[str, list[ParsedEntry]]:
    """A plain-text transcript (`prompt` format): one ALFWorld trajectory, or a Wikipedia
    examples block (one episode per example)."""
    if env == "alfworld":
        try:
            task_text, steps = fmt.parse_alfworld(text)
        except fmt.FormatError as exc:
            raise PromptFileError(f"not an ALFWorld transcript: {exc}") from None
        style = "react" if any(s.thought is not None for s in steps) else "act"
        ttype = alfworld_type_from_text(task_text)
        key = f"{style}_{alfworld_type_key(ttype)}_0"
        return env, [ParsedEntry(key, [ParsedTrajectory(
            env=env, name=key, task_id=f"{source}:{key}", task_type=ttype, task_text=task_text, style=style,
            steps=steps, data={"prompt_file": source, "prompt_key": key},
        )])]
    try:
        parsed = fmt.parse_wiki_examples(text)
    except fmt.FormatError as exc:
        raise PromptFileError(f"not a Wikipedia-format transcript: {exc}") from None
    style = "react" if any(s.thought is not None for e in parsed.examples for s in e.steps) else "act"
    key = f"{'webthink' if style == 'react' else 'webact'}_simple{len(parsed.examples)}"
    return parse_prompt_file({key: text}, source=source, env=env)
