"""Which few-shot exemplars a prompt uses, chosen as the ReAct notebooks choose them.

An exemplar source is a *prompt dict* - the layout of the original ReAct prompt files
(ALFWorld keys `react_<v>_<i>`, Wikipedia blocks `webthink_*`, ...); which entries a
prompt uses is the kind's transcript's choice (`EnvFamily.transcript.request`). Built-in
dicts ship with the families; named exemplar sets live in the project database
(`sessions.exemplar_sets`) and are read the same way.
"""

from __future__ import annotations

import hashlib
import json
import threading
import weakref
from functools import lru_cache
from typing import Any

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


_BUILTIN_REVS: "weakref.WeakKeyDictionary[Any, dict[str, tuple[dict[str, str], int]]]" = weakref.WeakKeyDictionary()
_REVS_GUARD = threading.Lock()


def builtin_revision(store, env: str) -> int | None:
    """The revision (in `store`) of `env`'s built-in exemplars as this install ships them,
    which a version on the built-in exemplars pins (`exemplar_sets.builtin_revision`: what it
    was sent never changes with the package); None for a family that ships none. Known per
    Store and loaded exemplars once committed (not inside the caller's transaction, which
    may yet be undone)."""
    prompts = builtin_prompt_dict(env)
    if not prompts:
        return None
    with _REVS_GUARD:
        known = _BUILTIN_REVS.get(store, {}).get(env)
    if known is not None and known[0] is prompts:
        return known[1]
    outside = not store.in_transaction()
    rev = exemplar_sets.builtin_revision(store, env, prompts)
    if outside:
        with _REVS_GUARD:
            _BUILTIN_REVS.setdefault(store, {})[env] = (prompts, rev)
    return rev


def at_start(store, env: str, set_name: str | None) -> int | None:
    """The exemplar revision a version made without a step is created with when nothing
    else is read for it (an experiment item's): the built-in exemplars' as this install ships
    them (known once per Store); a named set's is pinned at the first step, as for any version."""
    return builtin_revision(store, env) if set_name in (None, "builtin") else None


def prompt_dict(env: str, set_name: str | None, store=None, revision: int | None = None) -> dict[str, str]:
    """The exemplars of `set_name` - as pinned by `revision` when a version pinned one (the
    built-in exemplars too: the text that was sent, whatever the package holds now)."""
    if revision is not None and store is not None and set_name in (None, "builtin"):
        with _REVS_GUARD:
            known = _BUILTIN_REVS.get(store, {}).get(env)
        if known is not None and known[1] == revision:  # the exemplars this install ships: that revision's text
            return known[0]
        set_env, prompts = exemplar_sets.revision_prompts(store, revision)
        if set_env != env:
            raise ExemplarError(f"the built-in exemplars pinned are for {set_env}, not {env}")
        return prompts
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


BUILTIN = "builtin"


def create_set(
    store, name: str, env: str, base: str | None = None, *, description: str | None = None, by: str | None = None
) -> exemplar_sets.ExemplarSet:
    """A new exemplar set, empty or built on `base`: "builtin" (the family's built-in
    exemplars) or another set of the same environment, whose entries are copied in (the
    set and its revisions name the base and which content of it was copied)."""
    if base is None:
        return exemplar_sets.create_set(store, name, env, description=description, by=by)
    if base == BUILTIN:
        prompts = builtin_prompt_dict(env)
        if not prompts:
            raise exemplar_sets.ExemplarSetError(f"{family(env).label} has no built-in exemplars to start from")
        digest = hashlib.sha256(json.dumps(prompts, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]
        note, inherit = f"builtin sha256:{digest}", [(k, None, v) for k, v in prompts.items()]
    else:
        src = exemplar_sets.get_set(store, base)
        if src.env != env:
            raise exemplar_sets.ExemplarSetError(f"exemplar set {base!r} is for {src.env}, not {env}")
        rev = exemplar_sets.current_revision(store, base)  # the base's content as copied, kept for good
        note, inherit = (
            f"{base} r{exemplar_sets.revision_number(store, base, rev)}",
            exemplar_sets.copied_entries(store, base),
        )
    return exemplar_sets.create_set(
        store, name, env, description=description, by=by, base=base, base_note=note, inherit=inherit
    )


def with_advice(exc: Exception, env: str, set_name: str | None) -> str:
    """The error of a prompt that needs exemplars a named set lacks (`no 'react' exemplars
    of type 'clean' ...`), with what to do about it; other errors as they are."""
    msg = str(exc)
    if not set_name or set_name == BUILTIN or not msg.startswith("no '"):
        return msg
    return (
        f"{msg} ({set_name!r}): build a set on the built-in exemplars so it has every task type "
        f'(`react-editor exemplars create NAME --env {env} --from builtin`, or "Start from: built-in" '
        "when the app makes a new set), then add the fixed version to it"
    )


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
