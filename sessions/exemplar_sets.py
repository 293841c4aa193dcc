"""Named exemplar sets: ordered lists of versions (and raw prompt-file entries) that an
agent config can use in place of the built-in exemplars (`AgentConfig.exemplar_set`).

A set holds one environment. Its prompt dict (`prompt_dict`) has the original prompt-file
layout, so `agent.exemplars` picks exemplars from it exactly as from the paper's files. A set
holds at most one version per episode: adding a newer version of an episode that is already
in the set replaces it in place (same key and position) - fix an imported exemplar, add
the fixed version, and the set uses it. Removal is recorded, never deleted.

A set can build on a base (`create_set(..., base=..., inherit=...)`; `agent.exemplars.create_set`
reads the built-in exemplars or another set): the base's entries are copied in when the set
is made (marked `inherited`; later changes of the base do not flow in), the set names its base
(`base`, `base_note`: which content it was, e.g. `builtin sha256:...` or `fixes r3`), and every
revision records that note. A version added to such a set takes the place of the inherited
entry it stands for (`base_slot`): on a keyed layout (one entry per exemplar, two per task
type) the inherited exemplar of its type nearest the task (`_0`, then `_1`) is replaced; on a
block layout (one examples block per style) it joins the inherited block of its style, after
the base's examples. With no inherited entry left for it, it is a further entry as before.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, cast

from sessions import annotations as notes  # (not `annotations`: the __future__ import has that name)
from sessions.store import Store, StoreError
from trajectory import kinds
from trajectory.prompt_files import Exemplar, ExemplarError, PromptFileError, RawEntry, exemplar_from
from trajectory.records import now

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}$")
RESERVED = {"builtin"}
# The set row that holds an environment's built-in exemplars' revisions (`builtin_revision`):
# a name no person's set can have (NAME_RE refuses ':'); never listed, never looked up by name.
BUILTIN_HOLDER = "builtin:{env}"


class ExemplarSetError(StoreError, ValueError):
    """A user-facing problem with an exemplar set (one line)."""


@dataclass
class ExemplarSet:
    id: int
    name: str
    env: str
    description: str | None
    source: str | None
    created_by: str | None
    created_at: str
    entries: int
    base: str | None = None  # "builtin", another set's name, or None (made empty)
    base_note: str | None = None  # which content of the base was copied (builtin sha256:..., NAME rN)


@dataclass
class SetEntry:
    id: int
    pos: int
    key: str | None
    version_id: int | None
    text: str | None
    added_by: str | None
    added_at: str
    inherited: int = 0  # copied from the set's base when the set was made

    @property
    def kind(self) -> str:
        return "version" if self.version_id is not None else "raw"


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_RE.match(name) or name in RESERVED:
        raise ExemplarSetError(
            f"invalid exemplar set name {name!r} (letters, digits, _ . -; up to 100 characters; not 'builtin')"
        )
    return name


def create_set(
    store: Store,
    name: str,
    env: str,
    *,
    description: str | None = None,
    source: str | None = None,
    by: str | None = None,
    base: str | None = None,
    base_note: str | None = None,
    inherit: Iterable[tuple[str | None, int | None, str | None]] = (),
) -> ExemplarSet:
    """A new set; with `base`, its entries start as `inherit` - (key, version id, text) of
    the base's entries, in order - copied in the same transaction.
    Raises ExemplarSetError for an unknown environment or a name already taken."""
    _check_name(name)
    if env not in kinds.known():
        raise ExemplarSetError(f"unknown environment {env!r} (one of: {', '.join(kinds.known())})")
    by = notes.current_user(by)
    with store.transaction():
        if exists(store, name):
            raise ExemplarSetError(f"an exemplar set named {name!r} exists already")
        sid = store.db.execute(
            "insert into exemplar_sets (name, env, description, source, created_by, created_at, base, base_note) "
            "values (?,?,?,?,?,?,?,?)",
            [name, env, description, source, by, now(), base, base_note],
        ).lastrowid
        for pos, (key, version_id, text) in enumerate(inherit):
            store.db.execute(
                "insert into exemplar_set_entries (set_id, pos, key, version_id, text, added_by, added_at, inherited) "
                "values (?,?,?,?,?,?,?,1)",
                [sid, pos, key, version_id, text, by, now()],
            )
    return get_set(store, name)


def copied_entries(store: Store, name: str) -> list[tuple[str | None, int | None, str | None]]:
    """(key, version id, text) of a set's entries, in order: what a set based on it inherits."""
    return [(e.key, e.version_id, e.text) for e in entries(store, name)]


def exists(store: Store, name: str) -> bool:
    """Is there a set of that name (the built-in revisions' holders count)?"""
    return store.db.execute("select 1 from exemplar_sets where name = ?", [name]).fetchone() is not None


def free_name(store: Store, base: str) -> str:
    """`base`, or `base-2`, `base-3`, ... whichever is not taken."""
    base = re.sub(r"[^A-Za-z0-9_.\-]", "_", base)[:90] or "imported"
    if not base[0].isalnum():
        base = "set" + base
    name, n = base, 2
    while exists(store, name) or name in RESERVED:
        name, n = f"{base}-{n}", n + 1
    return name


_SET_COLS = (
    "s.id, s.name, s.env, s.description, s.source, s.created_by, s.created_at, "
    "(select count(*) from exemplar_set_entries e where e.set_id = s.id and e.removed_at is null), "
    "s.base, s.base_note"
)
_ENTRY_COLS = "id, pos, key, version_id, text, added_by, added_at, inherited"


def get_set(store: Store, name: str) -> ExemplarSet:
    """The set named `name`. Raises ExemplarSetError for an unknown name (or a built-in holder's)."""
    if name.startswith("builtin:"):  # (a holder of built-in revisions is not a set a person names)
        raise ExemplarSetError(f"unknown exemplar set {name!r}")
    r = store.db.execute(f"select {_SET_COLS} from exemplar_sets s where s.name = ?", [name]).fetchone()
    if r is None:
        raise ExemplarSetError(f"unknown exemplar set {name!r}")
    return ExemplarSet(*r)


def list_sets(store: Store, env: str | None = None) -> list[ExemplarSet]:
    """The sets a person made (all, or of `env`), by name; the built-in holders are left out."""
    sql = f"select {_SET_COLS} from exemplar_sets s where s.name not like 'builtin:%'"
    params: list[Any] = []
    if env:
        sql += " and s.env = ?"
        params.append(env)
    return [ExemplarSet(*r) for r in store.db.execute(sql + " order by s.name", params)]


def entries(store: Store, name: str) -> list[SetEntry]:
    """The set's current entries (removed ones left out), in their order. Raises ExemplarSetError
    for an unknown set."""
    s = get_set(store, name)
    rows = store.db.execute(
        f"select {_ENTRY_COLS} from exemplar_set_entries where set_id = ? and removed_at is null order by pos, id",
        [s.id],
    )
    return [SetEntry(*r) for r in rows]


def _exemplar(store: Store, version_id: int, key: str | None = None) -> Exemplar:
    v = store.versions.get(version_id)
    ep = store.episodes.get(v.episode_id)
    return exemplar_from(kinds.transcript(ep.task.env), ep, store.versions.path(v.leaf_step_id), key)


def add_version(store: Store, name: str, version_id: int, *, key: str | None = None, by: str | None = None) -> SetEntry:
    """Add a version (or replace the entry of its episode, keeping key and position).
    Raises ExemplarSetError for a version of another environment, without steps, that a
    prompt file cannot hold, or a key the set has already."""
    s = get_set(store, name)
    v = store.versions.get(version_id)
    ep = store.episodes.get(v.episode_id)
    if ep.task.env != s.env:
        raise ExemplarSetError(f"exemplar set {name!r} is for {s.env}; version {version_id} is {ep.task.env}")
    steps = store.versions.path(v.leaf_step_id)
    if not steps:
        raise ExemplarSetError(f"version {version_id} has no steps to use as an exemplar")
    current = entries(store, name)
    same_episode = None
    for e in current:
        if e.version_id is not None and store.versions.get(e.version_id).episode_id == ep.id:
            same_episode = e
            break
    used = {e.key for e in current if e.key and e is not same_episode}
    if key is not None and key in used:
        raise ExemplarSetError(f"exemplar set {name!r} already has an entry {key!r}")
    transcript = kinds.transcript(s.env)
    ex = exemplar_from(transcript, ep, steps)
    slot = None  # the inherited entry the version takes the place of (keyed) or joins (block)
    if key is None and same_episode is None:
        slot = base_slot(transcript, ex, [e for e in current if e.inherited])
        key = slot.key if slot else None
    if transcript.keyed_entries:  # each exemplar its own entry (ALFWorld's react_put_0, ...)
        if key is None:
            key = same_episode.key if same_episode and same_episode.key else None
        if key is None:
            key = ex.key if ex.key and ex.key not in used else None
        if key is None:
            try:
                key = transcript.next_key(ex, used)
            except PromptFileError as exc:
                raise ExemplarSetError(str(exc)) from None
    elif key is None and same_episode is not None:
        key = same_episode.key
    elif key is None:
        key = (ep.task.data or {}).get("prompt_key")
    with store.transaction():
        if same_episode is not None:
            if same_episode.version_id == version_id and same_episode.key == key:
                return same_episode
            store.db.execute("update exemplar_set_entries set removed_at = ? where id = ?", [now(), same_episode.id])
            pos = same_episode.pos
        elif slot is not None:  # after the inherited block it joins, or in place of the exemplar it replaces
            if transcript.keyed_entries:
                store.db.execute("update exemplar_set_entries set removed_at = ? where id = ?", [now(), slot.id])
            pos = slot.pos
        else:
            pos = _next_pos(store, s.id)
        rid = store.db.execute(
            "insert into exemplar_set_entries (set_id, pos, key, version_id, text, added_by, added_at) "
            "values (?,?,?,?,?,?,?)",
            [s.id, pos, key, version_id, None, notes.current_user(by), now()],
        ).lastrowid
    return _entry(store, cast(int, rid))  # (an insert's row id)


def base_slot(transcript: Any, ex: Exemplar, inherited: list[SetEntry]) -> SetEntry | None:
    """The inherited entry a new exemplar stands for: keyed layouts (`<style>_<type>_<i>`, two
    of a type in a prompt) the one of its type nearest the task (`_0`, then `_1`, then the
    lowest number), which it replaces; block layouts the block its style's prompts use, which
    it joins. None when the set inherited nothing for it."""
    named = {e.key: e for e in inherited if e.key}
    if not named:
        return None
    if transcript.keyed_entries:
        try:
            pre = transcript.next_key(ex, set())[:-1]  # "react_put_"
        except PromptFileError:
            return None
        for k in (pre + "0", pre + "1"):
            if k in named:
                return named[k]
        rest = sorted(
            (k for k in named if k.startswith(pre) and k[len(pre) :].isdigit()), key=lambda k: int(k[len(pre) :])
        )
        return named[rest[0]] if rest else None
    pick = getattr(transcript, "block_key", None)
    if pick is None:
        return None
    try:
        return named[pick({k: "" for k in named}, ex.style)]
    except (ExemplarError, KeyError):
        return None


def add_raw(store: Store, name: str, key: str, text: str, *, by: str | None = None) -> SetEntry:
    """A prompt-file entry kept as text (e.g. cotqa_*), so exports reproduce the file.
    Raises ExemplarSetError for a key the set has already."""
    s = get_set(store, name)
    if any(e.key == key for e in entries(store, name)):
        raise ExemplarSetError(f"exemplar set {name!r} already has an entry {key!r}")
    with store.transaction():
        rid = store.db.execute(
            "insert into exemplar_set_entries (set_id, pos, key, version_id, text, added_by, added_at) "
            "values (?,?,?,?,?,?,?)",
            [s.id, _next_pos(store, s.id), key, None, text, notes.current_user(by), now()],
        ).lastrowid
    return _entry(store, cast(int, rid))  # (an insert's row id)


def remove(
    store: Store, name: str, *, key: str | None = None, version_id: int | None = None, episode_id: int | None = None
) -> int:
    """Mark entries removed (by key, version or episode); returns how many.
    Raises ExemplarSetError when nothing matches."""
    hits = []
    for e in entries(store, name):
        if key is not None and e.key == key:
            hits.append(e)
        elif version_id is not None and e.version_id == version_id:
            hits.append(e)
        elif (
            episode_id is not None
            and e.version_id is not None
            and store.versions.get(e.version_id).episode_id == episode_id
        ):
            hits.append(e)
    if not hits:
        raise ExemplarSetError(f"nothing to remove from exemplar set {name!r}")
    with store.transaction():
        for e in hits:
            store.db.execute("update exemplar_set_entries set removed_at = ? where id = ?", [now(), e.id])
    return len(hits)


def _next_pos(store: Store, set_id: int) -> int:
    r = store.db.execute("select max(pos) from exemplar_set_entries where set_id = ?", [set_id]).fetchone()
    return (r[0] if r[0] is not None else -1) + 1


def _entry(store: Store, rid: int) -> SetEntry:
    r = store.db.execute(f"select {_ENTRY_COLS} from exemplar_set_entries where id = ?", [rid]).fetchone()
    return SetEntry(*r)


def items(store: Store, name: str) -> Iterator[Exemplar | RawEntry]:
    """The set's entries as exemplars / raw text, in order."""
    for e in entries(store, name):
        if e.version_id is None:
            yield RawEntry(e.key or "", e.text or "")
        else:
            yield _exemplar(store, e.version_id, e.key)


def uses_version(store: Store, version_id: int) -> bool:
    """Whether any set holds (or held) the version: its steps were relied on as an exemplar."""
    return (
        store.db.execute("select 1 from exemplar_set_entries where version_id = ? limit 1", [version_id]).fetchone()
        is not None
    )


def current_revision(store: Store, name: str) -> int:
    """The id of the revision that holds the set's prompt dict as it is now. A revision is
    written the first time a content is used; a changed set gets a new one, and a version
    that pinned an older revision keeps reading that one (`revision_prompts`)."""
    env, prompts = prompt_dict(store, name)
    text = json.dumps(prompts, ensure_ascii=False, sort_keys=True)
    s = get_set(store, name)
    with store.transaction():
        last = store.db.execute(
            "select id, revision, prompts from exemplar_set_revisions where set_id = ? order by revision desc limit 1",
            [s.id],
        ).fetchone()
        if last is not None and last[2] == text:
            same: int = last[0]
            return same
        return cast(
            int,
            store.db.table("exemplar_set_revisions")
            .insert(
                {
                    "set_id": s.id,
                    "revision": (last[1] if last else 0) + 1,
                    "prompts": text,
                    "created_at": now(),
                    "base": s.base_note,
                }
            )
            .last_pk,
        )


def builtin_revision(store: Store, env: str, prompts: dict[str, str]) -> int:
    """The revision holding `prompts`, the built-in exemplars of `env` as this install ships
    them, so a version pins what it was sent: an upgrade that changes the package's file
    changes no stored version's prompt. Content-addressed: the same exemplars are the same
    revision whichever install wrote it; other exemplars are a new one. Kept under a set row
    of its own per environment (BUILTIN_HOLDER), which no listing shows."""
    text = json.dumps(prompts, ensure_ascii=False, sort_keys=True)
    name = BUILTIN_HOLDER.format(env=env)
    with store.transaction():
        row = store.db.execute("select id from exemplar_sets where name = ?", [name]).fetchone()
        set_id = (
            row[0]
            if row is not None
            else store.db.execute(
                "insert into exemplar_sets (name, env, description, source, created_by, created_at) values (?,?,?,?,?,?)",
                [name, env, "the built-in exemplars, each content as it was sent", "builtin", None, now()],
            ).lastrowid
        )
        found = store.db.execute(
            "select id from exemplar_set_revisions where set_id = ? and prompts = ?", [set_id, text]
        ).fetchone()
        if found is not None:
            known: int = found[0]
            return known
        last = store.db.execute(
            "select max(revision) from exemplar_set_revisions where set_id = ?", [set_id]
        ).fetchone()
        return cast(
            int,
            store.db.table("exemplar_set_revisions")
            .insert({"set_id": set_id, "revision": (last[0] or 0) + 1, "prompts": text, "created_at": now()})
            .last_pk,
        )


def revision_base(store: Store, revision_id: int) -> str | None:
    """The base a revision's set was built on (`builtin sha256:...`, `NAME rN`), or None."""
    r = store.db.execute("select base from exemplar_set_revisions where id = ?", [revision_id]).fetchone()
    return r[0] if r else None


def revision_number(store: Store, name: str, revision_id: int | None = None) -> int | None:
    """The set's revision number (the current one's when `revision_id` is None), or None when
    its content was never used (no revision written yet)."""
    s = get_set(store, name)
    sql = "select revision from exemplar_set_revisions where set_id = ?"
    args: list[Any] = [s.id]
    if revision_id is not None:
        sql, args = sql + " and id = ?", [s.id, revision_id]
    r = store.db.execute(sql + " order by revision desc limit 1", args).fetchone()
    return r[0] if r else None


def revision_prompts(store: Store, revision_id: int) -> tuple[str, dict[str, str]]:
    """(env, prompt dict) of a pinned revision - the exact exemplar text a version ran with.
    Raises ExemplarSetError for an unknown revision."""
    r = store.db.execute(
        "select s.env, r.prompts from exemplar_set_revisions r join exemplar_sets s on s.id = r.set_id where r.id = ?",
        [revision_id],
    ).fetchone()
    if r is None:
        raise ExemplarSetError(f"unknown exemplar set revision {revision_id}")
    return r[0], json.loads(r[1])


def prompt_dict(store: Store, name: str) -> tuple[str, dict[str, str]]:
    """(env, prompt dict in the original prompt-file layout) - what `agent.exemplars`
    reads when an AgentConfig has `exemplar_set=name`.
    Raises ExemplarSetError for an unknown set or entries a prompt file cannot hold."""
    s = get_set(store, name)
    try:
        return s.env, kinds.transcript(s.env).assemble(items(store, name))
    except PromptFileError as exc:
        raise ExemplarSetError(f"exemplar set {name!r}: {exc}") from None
