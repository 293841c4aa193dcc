"""The calls part of the Store (`store.calls`): every model call as it happened (what repeats
sits once in call_params), which is also the response cache; the answers a locked database
could not take, kept in a file beside it until the next writer records them."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any, Iterable, cast

from sessions.connection import _hex_blob, from_json, to_json
from sessions.database import Database, RowIds, insert_row
from sessions.row_records import CallRow
from trajectory.records import ModelCall, Usage

_CALL_SQL = (
    "select c.id, c.episode_id, c.created_at, p.model, p.api_style, c.purpose, p.params, c.prompt_hash, "
    "c.prompt_chars, c.completion, c.prompt_tokens, c.completion_tokens, c.cached_tokens, c.latency_ms, "
    "c.attempts, c.cached, c.error, c.cache_key, c.cut_from "
    "from model_calls c left join call_params p on p.id = c.params_id "
)

# a call's columns as the jsonl export writes them (`Calls.rows`): the per-call values as
# stored (prompt_hash: bytes), its texts JSON-quoted (see rows.SJSON), and the call_params id
# in place of model, api_style and params
_EXPORT_SQL = (
    "select id, json_quote(created_at), params_id, purpose, prompt_hash, coalesce(prompt_chars, 0), json_quote(completion), "
    "prompt_tokens, completion_tokens, cached_tokens, latency_ms, attempts, coalesce(cached, 0) != 0, json_quote(error), "
    "cut_from from model_calls "
)


# json.dumps(..., ensure_ascii=False, sort_keys=True, separators=(",", ":")) without building an
# encoder per call: the same text
_KEY_JSON = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode
_NO_USAGE = Usage()
# a call's call_params key by its values (with their types: 0 and 0.0 say different JSON), so
# call after call with the same parameters do not encode and hash them again
_PARAMS_KEYS: dict[tuple[Any, ...], str] = {}


def _params_key(model: str, api_style: str, params: dict[str, Any]) -> str:
    try:
        values = (
            model,
            api_style,
            tuple((k, v.__class__, tuple(v) if v.__class__ is list else v) for k, v in params.items()),
        )
        found = _PARAMS_KEYS.get(values)
    except TypeError:  # (a value that cannot be hashed, a list of lists: not remembered)
        values, found = None, None
    if found is None:
        found = hashlib.sha256(_KEY_JSON([model, api_style, params]).encode()).hexdigest()[:24]
        if values is not None:
            if len(_PARAMS_KEYS) > 4096:  # (bounded: stop sequences vary with the step)
                _PARAMS_KEYS.clear()
            _PARAMS_KEYS[values] = found
    return found


class Calls:
    """The model_calls and call_params tables. `file`: the database file (the pending
    answers are kept beside it; none for ":memory:")."""

    def __init__(self, database: Database, file: str):
        self._database, self._file = database, file
        self.params = RowIds()  # call_params ids by key (committed rows; the Store's transactions keep it)

    # ------------------------------------------------------------------ model calls
    # A call row holds what differs per call; what repeats (model, style, decoding params,
    # endpoint) sits once in call_params. The call log is also the response cache: a
    # successful call's `cache_key` answers identical temperature-0 requests later.
    def _params_row(self, c: ModelCall) -> int:
        key = _params_key(c.model, c.api_style, c.params)
        cached = self.params.get(key)
        if cached is None:
            row = self._database.db.execute("select id from call_params where key = ?", [key]).fetchone()
            cached = self.params.learn(
                key,
                row[0]
                if row
                else insert_row(
                    self._database.db,
                    "call_params",
                    {"key": key, "model": c.model, "api_style": c.api_style, "params": to_json(c.params)},
                ),
            )
        return cached

    def insert(self, c: ModelCall, episode_id: int, conn: Any = None) -> int:
        """The call's row id. `conn`: this thread's connection when the caller has it at hand."""
        u = c.usage or _NO_USAGE
        row_id = (
            (conn or self._database.db.conn)
            .execute(
                "insert into model_calls (episode_id, created_at, params_id, purpose, prompt_hash, prompt_chars, "
                "completion, prompt_tokens, completion_tokens, cached_tokens, latency_ms, attempts, cached, error, "
                "cache_key, cut_from) values (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [
                    c.episode_id or episode_id,
                    c.created_at,
                    self._params_row(c),
                    c.purpose,
                    _hex_blob(c.prompt_hash),
                    c.prompt_chars,
                    c.completion,
                    u.prompt_tokens,
                    u.completion_tokens,
                    u.cached_prompt_tokens,
                    round(c.latency_ms, 3) if c.latency_ms is not None else None,
                    c.attempts,
                    int(c.cached),
                    c.error,
                    _hex_blob(c.cache_key[:32]) if c.cache_key and c.error is None else None,
                    c.cut_from,
                ],
            )
            .lastrowid
        )
        return cast(int, row_id)  # (an insert: always set)

    def record(self, episode_id: int, calls: Iterable[ModelCall]) -> list[int]:
        """Record calls that produced no step (failed ones): nothing about a call is lost."""
        with self._database.transaction():
            return [self.insert(c, episode_id) for c in calls]

    # A paid answer the database could not take (its write lock held past LOCK_TIMEOUT_S) is
    # kept in a file beside it and recorded by the next writer: the next attempt is answered
    # from the call log (the response cache) instead of paying again.
    @functools.cached_property
    def pending_file(self) -> Path | None:  # (asked at every step: built once)
        """The file where calls are kept while they cannot be written (`<db>.pending-calls.jsonl`);
        None for an in-memory database."""
        return None if self._file == ":memory:" else Path(f"{self._file}.pending-calls.jsonl")

    @functools.cached_property
    def _pending_name(self) -> str:
        return str(self.pending_file)

    def keep_pending(self, episode_id: int, calls: Iterable[ModelCall]) -> bool:
        """Append calls the database refused to the pending file; False if it cannot be written."""
        path = self.pending_file
        lines = "".join(json.dumps({"episode": episode_id, "call": c.model_dump(mode="json")}) + "\n" for c in calls)
        if path is None or not lines:
            return False
        try:
            with open(path, "a", encoding="utf-8") as f:
                f.write(lines)
                f.flush()
                os.fsync(f.fileno())
            return True
        except OSError:
            return False

    def record_pending(self, into: list[Any] | None = None) -> int:
        """Record the calls kept in the pending file (then remove it); how many. `into`
        receives them as (episode id, call), for the engine to use once."""
        path = self.pending_file
        if path is None or not os.path.exists(self._pending_name):  # (asked at every step: a plain stat)
            return 0
        taken = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}")
        try:
            os.replace(path, taken)  # one drainer takes the file; later answers start a new one
        except OSError:
            return 0
        rows = []
        for line in taken.read_text(encoding="utf-8").splitlines():
            try:
                d = json.loads(line)
                rows.append((int(d["episode"]), ModelCall.model_validate({**d["call"], "id": None})))
            except (ValueError, KeyError, TypeError):
                continue  # a line cut by a crash: the rest still count
        try:
            with self._database.transaction():
                for eid, call in rows:
                    self.insert(call, eid)
        except Exception:  # still blocked (or any failure): give the answers back for the next drainer
            with open(path, "a", encoding="utf-8") as f:  # (another blocked writer may have started a new file)
                f.write(taken.read_text(encoding="utf-8"))
                f.flush()
                os.fsync(f.fileno())
            taken.unlink(missing_ok=True)
            raise
        taken.unlink(missing_ok=True)
        if into is not None:
            into.extend(rows)
        return len(rows)

    def read(self, ids: Iterable[int]) -> list[ModelCall]:
        """The calls of these ids, in id order."""
        ids = list(ids)
        if not ids:
            return []
        rows = self._database.db.execute(_CALL_SQL + f"where c.id in ({','.join('?' * len(ids))}) order by c.id", ids)
        return [_call(r) for r in rows]

    def of_episode(self, episode_id: int | None) -> list[ModelCall]:
        """Every call recorded for the episode, in id order."""
        rows = self._database.db.execute(_CALL_SQL + "where c.episode_id = ? order by c.id", [episode_id])
        return [_call(r) for r in rows]

    def rows(self, episode_ids: Iterable[int] = (), *, ids: Iterable[int] = ()) -> dict[int, tuple[Any, ...]]:
        """The model calls recorded for these episodes (or with these ids), by id, as plain
        tuples (`_EXPORT_SQL`'s columns: what the jsonl export writes, texts JSON-quoted; what
        repeats by its call_params id, see `params_rows`). One query per 500 episodes or ids."""
        out: dict[int, tuple[Any, ...]] = {}
        for column, keys in (("episode_id", list(episode_ids)), ("id", list(ids))):
            for i in range(0, len(keys), 500):
                part = keys[i : i + 500]
                rows = self._database.db.execute(_EXPORT_SQL + f"where {column} in ({','.join('?' * len(part))})", part)
                out.update({r[0]: r for r in rows.fetchall()})
        return out

    def params_rows(self, ids: Iterable[int | None]) -> dict[int | None, tuple[str, str, str | None]]:
        """(model, api_style, params JSON text) by call_params id, as `_CALL_SQL` reads them
        (None: a call without a params row)."""
        out: dict[int | None, tuple[str, str, str | None]] = {None: ("", "completions", None)}
        keys = [i for i in ids if i is not None]
        for i in range(0, len(keys), 500):
            part = keys[i : i + 500]
            rows = self._database.db.execute(
                "select id, coalesce(model, ''), coalesce(nullif(api_style, ''), 'completions'), params from call_params "
                f"where id in ({','.join('?' * len(part))})",
                part,
            )
            out.update({r[0]: r[1:] for r in rows.fetchall()})
        return out

    # ------------------------------------------------------------------ response cache
    def cached(self, key: str) -> tuple[str, Usage] | None:
        """(completion, usage) of a successful call stored under `key` (a temperature-0 request's
        cache key), or None."""
        r = self._database.db.execute(
            "select completion, prompt_tokens, completion_tokens, cached_tokens from model_calls "
            "where cache_key = ? and error is null limit 1",
            [_hex_blob(key[:32])],
        ).fetchone()
        if r is None:
            return None
        return r[0] or "", Usage(prompt_tokens=r[1], completion_tokens=r[2], cached_prompt_tokens=r[3])

    def billed_tokens(self, episode_ids: Iterable[int]) -> tuple[int, int]:
        """(prompt, completion) tokens of the calls of these episodes that reached the model
        server (cache hits are free), summed in SQL: a summary never loads every call."""
        p_tok = c_tok = 0
        ids = list(episode_ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            r = self._database.db.execute(
                "select coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0) from model_calls "
                f"where episode_id in ({','.join('?' * len(chunk))}) and not coalesce(cached, 0)",
                chunk,
            ).fetchone()
            p_tok += int(r[0])
            c_tok += int(r[1])
        return p_tok, c_tok

    def clear_cache(self) -> int:
        """Turn every recorded response back into history only (nothing is deleted)."""
        with self._database.transaction():
            return self._database.db.execute(
                "update model_calls set cache_key = null where cache_key is not null"
            ).rowcount

    get = cached  # the ResponseCache protocol of agent.client (recording a call fills it)


def _call_fields(r: Any, params: dict[str, Any], usage: type) -> tuple[Any, ...]:
    """A `_CALL_SQL` row as the values of `CallRow`'s fields, in order."""
    return (
        r[0],
        r[1],
        r[2],
        r[3] or "",
        r[4] or "completions",
        r[5],
        params,
        r[7].hex() if r[7] is not None else "",
        r[8] or 0,
        r[9],
        usage(prompt_tokens=r[10], completion_tokens=r[11], cached_prompt_tokens=r[12]),
        r[13],
        r[14],
        bool(r[15]),
        r[16],
        r[17].hex() if r[17] is not None else None,
        r[18],
    )


def _call(r: Any) -> ModelCall:
    """A `_CALL_SQL` row as its record."""
    return ModelCall(**dict(zip(CallRow._fields, _call_fields(r, from_json(r[6], {}), Usage))))
