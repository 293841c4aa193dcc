"""The jsonl export's encoder: each version's record written straight from the stored rows
(`StepJson`, `Calls.rows` tuples: this store wrote them, trusted), with no record object per
step or call; what many rows share (a step's JSON in every version holding it, call heads,
info dicts) is encoded once. `_dumps` is the one JSON encoder every export format uses."""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring as _esc  # the text encoder _ENCODER uses (ensure_ascii=False)
from typing import Any, Iterable, Iterator, cast, get_args

from sessions.annotations import StepAnnotation, VersionAnnotation
from sessions.connection import _ids, from_json
from sessions.exchange.schema import SCHEMA_NAME, SCHEMA_VERSION
from sessions.exchange.selection import EpisodeBatch
from sessions.row_records import StepJson, stored_id
from sessions.store import Store
from trajectory.records import EditInfo, Source, Version, env_only, safe_call_params

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)  # NaN is not JSON


def _dumps(obj: Any) -> str:
    return _ENCODER.encode(obj)


# What _ENCODER writes for a text, a number and a flag, without its per-call overhead (the
# records' repeated parts are assembled from these and `_esc` for texts that are never None;
# tests compare the bytes with _dumps).
def _str(v: str | None) -> str:
    return "null" if v is None else _esc(v)


def _num(v: int | float | None) -> str:
    t = type(v)
    if t is int or (isinstance(v, float) and t is float and math.isfinite(v)):
        return repr(v)
    return "null" if v is None else _dumps(v)


def _hex(v: str | None) -> str:
    """What SQLite's lower(hex(v)) gives for a text or NULL (a stored digest is bytes)."""
    return "" if v is None else str(v).encode().hex()


def _bool(v: bool) -> str:
    return "true" if v else "false"


# ---------------------------------------------------------------------- jsonl records

_LINE_HEAD = f'{{"schema":{_dumps(SCHEMA_NAME)},"schema_version":{_dumps(SCHEMA_VERSION)},"episode":'


_SOURCES = {s: _esc(s) for s in get_args(Source)}  # a step's source as JSON
_CUT = '"cut_from":'


class Shared:
    """What many episodes of one export share, encoded once: a call's model..params part
    by (call_params id, purpose), an info dict's JSON by its stored text (None: it holds a
    ref, encoded per step). Bounded: cleared when large."""

    LIMIT = 4096

    def __init__(self, store: Store):
        self.store = store
        self.params: dict[int | None, tuple[str, str, str | None]] = {}  # call_params rows by id
        self.heads: dict[tuple[int | None, str | None], str] = {}
        self.infos: dict[str | None, str | None] = {}
        self.extras: dict[int, str] = {}  # step id -> its `,"reasoning":...` tail (the steps that have one)

    def learn_extras(self, episode_ids: list[int]) -> None:
        """The reasoning, tool call and raw message of the chunk's steps that have them (the
        `messages` / `tools` styles; one query, none found for a text-style database)."""
        self.extras = {}
        if not episode_ids:
            return
        marks = ",".join("?" * len(episode_ids))
        rows = self.store.db.execute(
            f"select id, reasoning, tool_call, message from steps where episode_id in ({marks}) and "
            "(reasoning is not null or tool_call is not null or message is not null)",
            episode_ids,
        ).fetchall()
        for sid, reasoning, call, message in rows:
            tail = ""
            if reasoning is not None:
                tail += f',"reasoning":{_esc(reasoning)}'
            if call is not None:
                tail += f',"tool_call":{_dumps(from_json(call, None))}'
            if message is not None:
                tail += f',"message":{_dumps(from_json(message, None))}'
            self.extras[sid] = tail

    def learn(self, calls: Iterable[tuple[Any, ...]]) -> None:
        """Read the call_params rows of these calls (`Calls.rows` tuples) not known yet."""
        need = {c[2] for c in calls if c[2] not in self.params}
        if need:
            if len(self.params) > self.LIMIT:
                self.params.clear()
            self.params.update(self.store.calls.params_rows(need))

    def head(self, pid: int | None, purpose: str | None) -> str:
        key = (pid, purpose)
        h = self.heads.get(key)
        if h is None:
            if len(self.heads) > self.LIMIT:
                self.heads.clear()
            if pid not in self.params:  # (cleared by `learn` since its chunk was read)
                self.params.update(self.store.calls.params_rows([pid]))
            model, style, params = self.params[pid]
            h = self.heads[key] = (
                f'"model":{_esc(model)},"api_style":{_esc(style)},"purpose":{_str(purpose)},'
                f'"params":{_dumps(safe_call_params(from_json(params, {})))}'
            )
        return h

    def info(self, text: str | None) -> str | None:
        if text in self.infos:
            return self.infos[text]
        if len(self.infos) > self.LIMIT:
            self.infos.clear()
        info = from_json(text, {})
        self.infos[text] = out = None if "carried_from" in info else _dumps(info) if info else "{}"
        return out


class EpisodeEncoder:
    """File-relative refs for one episode, encoded straight from the stored rows
    (`StepCols`, `Calls.rows` tuples: trusted, this store wrote them). A step's JSON is made
    once (the first record that holds it) and reused, so a shared prefix is byte-identical
    in every record. References (edits, carried_from) resolve only to steps of earlier
    records - what an importer has already created when it reads them."""

    def __init__(
        self,
        store: Store,
        batch: EpisodeBatch,
        ep_ref: int,
        calls: dict[int, tuple[Any, ...]],
        histories: tuple[dict[int, list[VersionAnnotation]], dict[int, list[StepAnnotation]]],
        shared: Shared,
    ):
        self.batch, self.ep_ref, self.shared = batch, ep_ref, shared
        self.paths = cast("dict[int, list[StepJson]]", batch.paths)  # read with select(raw=True)
        ep = batch.episode
        self.store, self.calls, self.fetched = store, calls, False
        self.step_ids: dict[int, Any] = {}  # an encoded step's recorded call ids
        self.vann, self.sann = histories
        self.heads, self.infos, self.texts = shared.heads, shared.infos, _SOURCES  # (read per call and step)
        self.step_ref: dict[int, int] = {}
        self.call_ref: dict[int, int] = {}
        self.step_cache: dict[int, str] = {}  # a step's JSON, written once and reused
        self.call_cache: dict[int, str] = {}
        self.version_ref: dict[int, int] = {}
        vids = [v.id for v in batch.versions]
        self.current = ep.current_version if ep.current_version in vids else vids[-1]
        self.episode_json = _dumps(
            {
                "ref": ep_ref,
                "name": ep.name,
                "created_at": ep.created_at,
                "task": ep.task.model_dump(mode="json"),
                "config": ep.config.model_dump(mode="json"),
                # the import marks (confirmation, digest) are this database's state, not the episode's
                "env_options": env_only(ep.env_options),
            }
        )

    def _edit(self, e: EditInfo | None, limit: int) -> dict[str, Any] | None:
        if e is None:
            return None
        ref = self.step_ref.get(e.replaced_step) if e.replaced_step is not None else None
        out: dict[str, Any] = {
            "kind": e.kind,
            "index": e.index,
            "replaced_step": ref if ref is not None and ref <= limit else None,
            "old_thought": e.old_thought,
            "old_action": e.old_action,
        }
        if e.origin is not None:  # a suggested edit: critic, prompt hash, the what-if groups that proved it
            out["origin"] = e.origin
        return out

    def _call(self, cid: int) -> int:
        """The call's ref; its JSON is made on first use."""
        ref = self.call_ref.get(cid)
        if ref is not None:
            return ref
        ref = self.call_ref[cid] = len(self.call_ref) + 1
        _, at, pid, purpose, phash, chars, done, pt, ct, kt, lat, att, cached, err, cut = self.calls[cid]
        # byte for byte _dumps({"ref": ..., "created_at": ..., ..., "error": ...}), written directly
        # (the usual types inline; anything else through _num/_str, which _dumps agrees with)
        self.call_cache[cid] = (
            f'{{"ref":{ref},"created_at":{at},{self.heads.get((pid, purpose)) or self.shared.head(pid, purpose)},'
            f'"prompt_hash":"{phash.hex() if phash.__class__ is bytes else _hex(phash)}","prompt_chars":{chars:d},'
            f'"completion":{done},'
            f'"usage":{{"prompt_tokens":{pt if pt.__class__ is int else _num(pt)},'
            f'"completion_tokens":{ct if ct.__class__ is int else _num(ct)},'
            f'"cached_prompt_tokens":{kt if kt.__class__ is int else "null" if kt is None else _num(kt)}}},'
            f'"latency_ms":{_num(lat) if lat.__class__ is not float or lat - lat else repr(lat)},'
            f'"attempts":{att if att.__class__ is int else _num(att)},"cached":{"true" if cached else "false"},'
            f'"error":{err}{f",{_CUT}{_dumps(cut)}}}" if cut else "}"}'
        )
        return ref

    def _recorded(self, ids: list[int]) -> list[int]:
        """The ids among these that name a recorded call. A call recorded under another
        episode is read here, with every other such call of this episode's paths (one query)."""
        calls = self.calls
        if not self.fetched and any(c not in calls for c in ids):
            self.fetched = True
            missing = {c for path in self.paths.values() for s in path for c in _ids(s.call_ids) if c not in calls}
            found = self.store.calls.rows(ids=sorted(missing))
            self.shared.learn(found.values())
            calls.update(found)
        return [c for c in ids if c in calls]

    def _info(self, text: str | None, limit: int) -> str:
        out = self.shared.info(text)
        if out is None:  # refs to steps: this file's, if written before
            info = from_json(text, {})
            src = self.step_ref.get(info["carried_from"])
            out = _dumps({**info, "carried_from": src if src is not None and src <= limit else None})
        return out

    def _step(self, s: StepJson, limit: int) -> str:
        sid, _, _, idx, texts, done, r, info, source, edit, cids, at = s
        refs = self.step_ref
        ref = refs[sid] = len(refs) + 1
        # the usual step: one call ("[id]"), of this episode, not yet encoded (no _ids, no list)
        cid = int(cids[1:-1]) if cids and "," not in cids and cids[1:-1].isdecimal() else None
        if cid in self.calls:
            cref = self.call_ref.get(cid) or self._call(cid)
            call_refs, self.step_ids[sid] = f"{cref}", (cid,)
        else:
            ids = self._recorded(_ids(cids))
            call_refs = ",".join([str(self._call(c)) for c in ids])
            self.step_ids[sid] = ids
        ann = self.sann.get(sid)
        notes = (
            _dumps(
                [{"annotator": a.annotator, "created_at": a.created_at, "tags": a.tags, "note": a.note} for a in ann]
            )
            if ann
            else "[]"
        )
        r = r or 0.0  # (as StepRow reads a stored NULL, and -0.0)
        # byte for byte _dumps({"ref": ..., "index": ..., ..., "annotations": ...}), written directly
        # (the usual types inline; anything else through _num/_str, which _dumps agrees with)
        d = self.step_cache[sid] = (
            f'{{"ref":{ref},"index":{idx:d},"thought":{texts},"done":{"true" if done else "false"},'
            f'"reward":{"0.0" if not r else _num(r) if r.__class__ is not float or r - r else repr(r)},'
            f'"info":{self.infos.get(info) or self._info(info, limit)},"source":{self.texts.get(source) or _esc(source)},'
            f'"edit":{"null" if edit is None else _dumps(self._edit(EditInfo.model_validate_json(edit), limit))},'
            f'"calls":[{call_refs}],"created_at":{at},"annotations":{notes}}}'
        )
        extra = self.shared.extras.get(sid)
        if extra:  # a `messages` / `tools` step: its reasoning, call and raw message after the rest
            d = self.step_cache[sid] = f"{d[:-1]}{extra}}}"
        return d

    def _version(self, n: int, v: Version, limit: int) -> str:
        return _dumps(
            {
                "ref": n,
                "parent": self.version_ref.get(v.parent_version) if v.parent_version else None,
                "current": v.id == self.current,
                "name": v.name,
                "status": v.status,
                "error": v.error,
                "outcome": v.outcome.model_dump(mode="json"),
                "draft_thought": v.draft_thought,
                "draft_edit": self._edit(v.draft_edit, limit),
                "edits": [self._edit(e, limit) for e in v.edits],
                "created_at": v.created_at,
                "updated_at": v.updated_at,
                "annotations": [
                    {
                        "annotator": a.annotator,
                        "created_at": a.created_at,
                        "verdict": a.verdict,
                        "failure_modes": a.failure_modes,
                        "notes": a.notes,
                        "exemplar_ready": a.exemplar_ready,
                    }
                    for a in self.vann.get(stored_id(v.id), [])
                ],
            }
        )

    def lines(self) -> Iterator[tuple[str, int]]:
        """One JSON line per version (newline included: no copy to add it), byte for byte
        `_dumps` of the record {schema, schema_version, episode, version, steps, calls}: the parts that repeat
        (the episode, shared steps, calls) are encoded once and joined."""
        cache, step, step_ids, call_cache = self.step_cache, self._step, self.step_ids, self.call_cache
        head = f'{_LINE_HEAD}{self.episode_json},"version":'
        for n, v in enumerate(self.batch.versions, 1):
            self.version_ref[stored_id(v.id)] = n
            limit = len(self.step_ref)
            path = self.paths[stored_id(v.id)]
            steps = ",".join([cache.get(s[0]) or step(s, limit) for s in path])
            # a call is listed once per record, where its first step holds it
            calls = ",".join([call_cache[cid] for cid in dict.fromkeys([c for s in path for c in step_ids[s[0]]])])
            yield f'{head}{self._version(n, v, limit)},"steps":[{steps}],"calls":[{calls}]}}\n', len(path)
