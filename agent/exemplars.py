"""Which few-shot exemplars a prompt uses, chosen as the ReAct notebooks choose them.

An exemplar source is a *prompt dict* - the layout of the original ReAct prompt files
(ALFWorld keys `react_<v>_<i>`, Wikipedia blocks `webthink_*`, ...); which entries a
prompt uses is the kind's transcript's choice (`EnvFamily.transcript.request`). Built-in
dicts ship with the families; named exemplar sets live in the project database
(`sessions.exemplar_sets`) and are read the same way.
"""

from __future__ import annotations

import json
from functools import lru_cache

from envs.registry import family
from sessions import exemplar_sets
from trajectory.answer_formats import QA_KEY_HEADS
from trajectory.prompt_files import ExemplarError

@lru_cache(maxsize=None)
def builtin_prompt_dict(env: str) -> dict[str, str]:
    """The family's built-in exemplars; empty for a family that ships none (its prompts are
    then zero-shot until a person names an exemplar set)."""
    path = family(env).exemplars_file
    if path is None:
        return {}
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


def qa_exemplars(prompts: dict[str, str], env: str, method: str) -> str:
    """The Standard (`webqa_*`) or CoT (`cotqa_*`) examples block: the paper's own (6 for
    HotpotQA, 3 for FEVER: the family's `qa.examples`) when the set has it, else the first."""
    qa = family(env).qa
    if qa is None:
        raise ExemplarError(f"{family(env).label} has no Standard or CoT prompts")
    head = QA_KEY_HEADS[method]
    want = f"{head}_simple{qa.examples}"
    keys = [want] if want in prompts else sorted(k for k in prompts if k.startswith(head + "_"))
    if not keys:
        raise ExemplarError(f"no '{head}_*' exemplars for {env} in this exemplar set (needed by the {method} method)")
    return prompts[keys[0]]
