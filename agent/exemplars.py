"""Which few-shot exemplars a prompt uses, chosen as the ReAct notebooks choose them.

An exemplar source is a *prompt dict* - the layout of the original ReAct prompt files:
ALFWorld keys `react_<v>_<i>` / `act_<v>_<i>` (v = put, clean, heat, cool, examine,
puttwo), Wikipedia keys `webthink_*` (react) / `webact_*` (act) whose value is the whole
examples block. Built-in dicts ship with the environments; named exemplar sets live in
the project database (`sessions.exemplar_sets`) and are read the same way.
"""

from __future__ import annotations

import json
from functools import lru_cache

from envs.registry import family
from sessions import exemplar_sets
from trajectory.answer_formats import QA_KEY_HEADS
from trajectory.formats import HOTPOTQA_INSTRUCTION
from trajectory.prompt_files import ExemplarError, alfworld_type_key

@lru_cache(maxsize=None)
def builtin_prompt_dict(env: str) -> dict[str, str]:
    path = family(env).exemplars_file
    if path is None:
        raise ExemplarError(f"{env} has no built-in exemplars: name an exemplar set")
    if not path.exists():
        raise ExemplarError(f"built-in exemplars for {env} are missing ({path})")
    return json.loads(path.read_text(encoding="utf-8"))


def prompt_dict(env: str, set_name: str | None, store=None, revision: int | None = None) -> dict[str, str]:
    """The exemplars of `set_name` - as pinned by `revision` when a version pinned one."""
    if set_name is None or set_name == "builtin":
        return builtin_prompt_dict(env)
    if store is None:
        raise ExemplarError(f"exemplar set {set_name!r} needs the project database")
    if revision is not None:
        set_env, prompts = exemplar_sets.revision_prompts(store, revision)
    else:
        set_env, prompts = exemplar_sets.prompt_dict(store, set_name)
    if set_env != env:
        raise ExemplarError(f"exemplar set {set_name!r} is for {set_env}, not {env}")
    return prompts


def alfworld_exemplars(prompts: dict[str, str], task_type: str | None, style: str) -> list[str]:
    """The notebook's choice: `d[f'{style}_{v}_1'] + d[f'{style}_{v}_0']`; sets with other
    numbering use their entries of that type, highest number first."""
    v = alfworld_type_key(task_type)
    pre = f"{style}_{v}_"
    if pre + "1" in prompts and pre + "0" in prompts:
        return [prompts[pre + "1"], prompts[pre + "0"]]
    keys = sorted((k for k in prompts if k.startswith(pre)), key=_num, reverse=True)
    if not keys:
        raise ExemplarError(f"no '{style}' exemplars of type '{v}' in this exemplar set")
    return [prompts[k] for k in keys[:2]]


def _num(key: str) -> int:
    tail = key.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else -1


_WIKI_PREFERRED = {
    ("hotpotqa", "react"): ("webthink_simple6", "webthink_simple", "webthink_simple_3"),
    ("hotpotqa", "act"): ("webact_simple6", "webact_simple"),
    ("fever", "react"): ("webthink_simple3",),
    ("fever", "act"): ("webact_simple3",),
}


def wiki_exemplars(prompts: dict[str, str], env: str, style: str) -> tuple[str, str]:
    """(instruction, examples block). HotpotQA's notebook prepends its instruction; FEVER's
    instruction is the head of the prompt file's value."""
    head = "webthink" if style == "react" else "webact"
    preferred = [k for k in _WIKI_PREFERRED.get((env, style), ()) if k in prompts]
    keys = preferred or sorted(k for k in prompts if k.startswith(head))
    if not keys:
        raise ExemplarError(f"no '{head}_*' exemplars for {env} in this exemplar set")
    instruction = HOTPOTQA_INSTRUCTION if env == "hotpotqa" else ""
    return instruction, prompts[keys[0]]


def qa_exemplars(prompts: dict[str, str], env: str, method: str) -> str:
    """The Standard (`webqa_*`) or CoT (`cotqa_*`) examples block: the paper's 6 for
    HotpotQA and 3 for FEVER when the set has them, else the first such key."""
    head = QA_KEY_HEADS[method]
    want = f"{head}_simple{6 if env == 'hotpotqa' else 3}"
    keys = [want] if want in prompts else sorted(k for k in prompts if k.startswith(head + "_"))
    if not keys:
        raise ExemplarError(f"no '{head}_*' exemplars for {env} in this exemplar set (needed by the {method} method)")
    return prompts[keys[0]]
