"""The call log's part of the Store: every model call as it happened (what repeats sits once
in call_params), which is also the response cache; bulk reads for export; content-addressed
blobs; settings."""

from __future__ import annotations

import contextlib
import functools

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any, Iterable, Iterator

from sessions.connection import StoreError, _hex_blob, to_json, from_json
from sessions.rows import CallRow, StepRow, UsageRow
from trajectory.records import Episode, ModelCall, Usage, Version


MAX_KNOWN_BLOBS = 100_000  # blob keys a Store remembers as written (then it asks the database again)


class Calls:
    """Part of `sessions.store.Store` (uses its database and transactions)."""

    # ------------------------------------------------------------------ model calls
    # A call row holds what differs per call; what repeats (model, style, decoding params,
    # endpoint) sits once in call_params. The call log is also the response cache: a
    # successful call's `cache_key` answers identical temperature-0 requests later.
    def _params_row(self, c: ModelCall) -> int:
        data = json.dumps([c.model, c.api_style, c.params], ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        key = hashlib.sha256(data.encode()).hexdigest()[:24]
        cached = self._params_ids.get(key) or self._params_new.get(key)
        if cached is None:
            row = self.db.execute("select id from call_params where key = ?", [key]).fetchone()
            cached = row[0] if row else self._insert(
                "call_params", {"key": key, "model": c.model, "api_style": c.api_style, "params": to_json(c.params)})
            self._params_new[key] = cached
        return cached

    def _insert_call(self, c: ModelCall, episode_id: int) -> int:
        u = c.usage or Usage()
        return self.db.execute(
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
        ).lastrowid

    def record_calls(self, episode_id: int, calls: Iterable[ModelCall]) -> list[int]:
        """Record calls that produced no step (failed ones): nothing about a call is lost."""
        with self.transaction():
            return [self._insert_call(c, episode_id) for c in calls]

    # A paid answer the database could not take (its write lock held past LOCK_TIMEOUT_S) is
    # kept in a file beside it and recorded by the next writer: the next attempt is answered
    # from the call log (the response cache) instead of paying again.
    @functools.cached_property
    def _pending_file(self) -> Path | None:  # (asked at every step: built once)
        return None if self.file == ":memory:" else Path(f"{self.file}.pending-calls.jsonl")

    def keep_pending_calls(self, episode_id: int, calls: Iterable[ModelCall]) -> bool:
        """Append calls the database refused to the pending file; False if it cannot be written."""
        path = self._pending_file
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

    def record_pending_calls(self, into: list | None = None) -> int:
        """Record the calls kept in the pending file (then remove it); how many. `into`
        receives them as (episode id, call), for the engine to use once."""
        path = self._pending_file
        if path is None or not path.exists():
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
            with self.transaction():
                for eid, call in rows:
                    self._insert_call(call, eid)
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

    _CALL_SQL = (
        "select c.id, c.episode_id, c.created_at, p.model, p.api_style, c.purpose, p.params, c.prompt_hash, "
        "c.prompt_chars, c.completion, c.prompt_tokens, c.completion_tokens, c.cached_tokens, c.latency_ms, "
        "c.attempts, c.cached, c.error, c.cache_key, c.cut_from "
        "from model_calls c left join call_params p on p.id = c.params_id "
    )

    def calls(self, ids: Iterable[int] | None = None, *, episode_id: int | None = None) -> list[ModelCall]:
        if ids is not None:
            ids = list(ids)
            if not ids:
                return []
            rows = self.db.execute(self._CALL_SQL + f"where c.id in ({','.join('?' * len(ids))}) order by c.id", ids)
        else:
            rows = self.db.execute(self._CALL_SQL + "where c.episode_id = ? order by c.id", [episode_id])
        return [ModelCall(**dict(zip(CallRow._fields, self._call_fields(r, from_json(r[6], {}), Usage)))) for r in rows]

    @staticmethod
    def _call_fields(r, params: dict, usage: type) -> tuple:
        """A `_CALL_SQL` row as the values of `CallRow`'s fields, in order."""
        return (r[0], r[1], r[2], r[3] or "", r[4] or "completions", r[5], params,
                r[7].hex() if r[7] is not None else "", r[8] or 0, r[9],
                usage(prompt_tokens=r[10], completion_tokens=r[11], cached_prompt_tokens=r[12]),
                r[13], r[14], bool(r[15]), r[16], r[17].hex() if r[17] is not None else None, r[18])

    # ------------------------------------------------------------------ bulk reads (export)
    # A pydantic record per row costs more than the whole read; bulk reads of our own rows
    # give plain rows with the records' field names (StepRow, CallRow) instead.
    def read_episodes(self, episode_ids: Iterable[int], chunk: int = 200) -> Iterator[
            tuple[Episode, list[Version], dict[int, "StepRow"]]]:
        """Episodes (in the given order) with all their versions and steps, a chunk of
        episodes at a time: three set-based queries per chunk, never one per version. Rows
        come by `fetchall` (the cursor checks every fetch call; one call per query, not per row)."""
        ids = list(episode_ids)
        infos: dict[str, dict] = {}  # the same info text (e.g. {"won":false}) is parsed once, shared read-only
        for i in range(0, len(ids), chunk):
            part = ids[i : i + chunk]
            q = ",".join("?" * len(part))
            rows = self.db.execute(self._EP_SQL + f"where e.id in ({q})", part).fetchall()
            eps = {r[0]: self._episode_from_row(r) for r in rows}
            versions: dict[int, list[Version]] = {}
            rows = self.db.execute(f"select {self._VCOLS} from versions where episode_id in ({q}) order by id", part)
            for r in rows.fetchall():
                versions.setdefault(r[1], []).append(self._version_from_row(r))
            steps: dict[int, dict[int, StepRow]] = {}
            make, values = StepRow._make, self._step_fields  # bound once: called per row
            for r in self.db.execute(f"select {self._SCOLS} from steps where episode_id in ({q})", part).fetchall():
                steps.setdefault(r[1], {})[r[0]] = make(values(r, infos))
            for e in part:
                if e in eps:
                    yield eps[e], versions.get(e, []), steps.get(e, {})

    def episode_call_rows(self, episode_ids: Iterable[int]) -> dict[int, "CallRow"]:
        """The model calls recorded for these episodes, by id (one query per 500 episodes)."""
        out: dict[int, CallRow] = {}
        params: dict[str | None, dict] = {}
        make, values = CallRow._make, self._call_fields  # bound once: called per row
        ids = list(episode_ids)
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            rows = self.db.execute(self._CALL_SQL + f"where c.episode_id in ({','.join('?' * len(part))})", part)
            for r in rows.fetchall():
                if r[6] not in params:
                    params[r[6]] = from_json(r[6], {})
                out[r[0]] = make(values(r, params[r[6]], UsageRow))
        return out

    # ------------------------------------------------------------------ response cache
    def cache_get(self, key: str) -> tuple[str, Usage] | None:
        r = self.db.execute(
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
            chunk = ids[i:i + 500]
            r = self.db.execute(
                "select coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0) from model_calls "
                f"where episode_id in ({','.join('?' * len(chunk))}) and not coalesce(cached, 0)", chunk).fetchone()
            p_tok += int(r[0])
            c_tok += int(r[1])
        return p_tok, c_tok

    def cache_clear(self) -> int:
        """Turn every recorded response back into history only (nothing is deleted)."""
        with self.transaction():
            return self.db.execute("update model_calls set cache_key = null where cache_key is not null").rowcount

    get = cache_get  # the ResponseCache protocol of agent.client (recording a call fills it)

    # ------------------------------------------------------------------ blobs
    def put_blob(self, data: bytes) -> str:
        """Store content-addressed bytes (pages, long snapshot parts); their key. Inside
        `deferred_blobs()` the write waits for this thread's next transaction (a step's
        record), so an environment step costs no commit of its own."""
        key = hashlib.sha256(data).hexdigest()[:32]
        if key in self._blob_keys:  # committed already (blobs are never deleted)
            return key
        pending = getattr(self._local, "blobs", None)
        if pending is not None and not self.db.conn.in_transaction:
            pending[key] = data
            return key
        with self.transaction():
            self._write_blobs({key: data})
        return key

    @contextlib.contextmanager
    def deferred_blobs(self):
        """Blobs stored on this thread meanwhile are written by its next transaction
        (the one that records the step referring to them); any left at the end are
        written then, in one transaction."""
        if getattr(self._local, "blobs", None) is not None:  # nested: the outer scope writes them
            yield
            return
        self._local.blobs = {}
        try:
            yield
        finally:
            left, self._local.blobs = self._local.blobs, None
            if left:
                with self.transaction():
                    self._write_blobs(left)

    def _write_blobs(self, blobs: dict[str, bytes]) -> None:
        # plain SQL: sqlite-utils looks the row up by rowid afterwards, which a
        # WITHOUT ROWID table does not have (a page fetched twice would fail)
        self._blobs_new.update(blobs)  # first: a failed write gives them back (`_requeue_blobs`)
        self.db.conn.executemany("insert or ignore into blobs (key, data) values (?, ?)", list(blobs.items()))

    def _remember_blobs(self, blobs: dict[str, bytes]) -> None:
        if len(self._blob_keys) > MAX_KNOWN_BLOBS:
            self._blob_keys.clear()
        self._blob_keys.update(blobs)

    def _requeue_blobs(self, blobs: dict[str, bytes]) -> None:
        """A rolled-back transaction's deferred blobs wait for the next one (an
        environment may already refer to them)."""
        if not blobs:
            return
        pending = getattr(self._local, "blobs", None)
        if pending is not None:
            pending.update(blobs)
            return
        try:  # no scope to wait in (it ended inside the transaction that rolled back): now, on their own
            with self.transaction():
                self._write_blobs(blobs)
        except Exception:  # the transaction's own error is the one the caller hears of
            pass

    def _take_deferred_blobs(self) -> None:
        """At the start of a transaction: this thread's deferred blobs go in with it."""
        pending = getattr(self._local, "blobs", None)
        if pending:
            self._local.blobs = {}
            self._write_blobs(pending)

    def get_blob(self, key: str) -> bytes | None:
        r = self.db.execute("select data from blobs where key = ?", [key]).fetchone()
        return None if r is None else bytes(r[0])

    # ------------------------------------------------------------------ settings
    def get_setting(self, key: str, default: Any = None) -> Any:
        r = self.db.execute("select value from settings where key = ?", [key]).fetchone()
        return default if r is None else json.loads(r[0])

    def set_setting(self, key: str, value: Any) -> None:
        if "key" in key.lower() and "api" in key.lower():
            raise StoreError("API keys are never stored in the database")
        with self.transaction():
            self.db["settings"].upsert({"key": key, "value": json.dumps(value)}, pk="key")

    def integrity_check(self) -> str:
        return self.db.execute("pragma integrity_check").fetchone()[0]
