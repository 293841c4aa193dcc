"""The jsonl export's fast path (rows encoded straight from SQLite, a chunk of episodes at a
time, a large export's later episodes written by a second process) writes exactly what the
documented format gives when each record is built the plain way - from the store's records,
as dicts, through json.dumps - on a database with edits, carried steps, annotations and
non-ASCII, HTML and huge texts; and a failure in either process leaves no file and no
second process."""

from __future__ import annotations

import importlib
import io
import json
import signal
import types

import pytest

from sessions import annotations
from sessions.exchange import Filters, export, select
from sessions.exchange.schema import SCHEMA_NAME, SCHEMA_VERSION
from sessions.store import Store
from tests.export_support import ROOM_SCRIPT, cfg
from tests.toy_envs import ROOM_TASK
from trajectory.records import ModelCall, Step, Usage, env_only, safe_call_params

EXPORT = importlib.import_module("sessions.exchange.export")  # the module (the package's `export` is the function)
SPLIT = importlib.import_module("sessions.exchange.split")
TEXTS = [
    "Naïve café ☃ 𝄞 \u2028\u2029 «ok»",
    "<script>alert('x')</script> &amp; <b>",
    'q "x" \\ \t\n\x00\x1f\x7f',
    "Ω" * 70_000 + "end",
    "",
]


def _dumps(obj) -> str:  # the documented encoding, independent of the export module's
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _populate(toy) -> None:
    """Edited and branched room episodes (thought edit carrying the rest, action edit),
    annotated; then episodes of tricky texts, more than a chunk's worth."""
    toy.llm.push(*ROOM_SCRIPT)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm), name="room «1»")
    toy.engine.run(v.id)
    v2 = toy.engine.editor.edit(v.id, 1, "rewrite_thought", "Ünïcode </script> thought.", keep_rest=True)
    toy.llm.push(" go to table 1", " go to cabinet 1")
    v3 = toy.engine.editor.edit(v.id, 2, "rewrite_action", "go to shelf 1")
    toy.engine.run(v3.id, max_steps=2)
    annotations.annotate_version(toy.store, v2.id, by="alice", verdict="success", exemplar_ready=True, notes="gut ☃")
    annotations.annotate_version(toy.store, v3.id, by="bob", verdict="failure", add_failure_modes=["invalid_action"])
    steps3 = toy.store.versions.steps(v3.id)
    annotations.tag_step(toy.store, steps3[0].id, by="bob", add=["good_subgoal"], note="<i>fine</i>")
    annotations.tag_step(toy.store, steps3[2].id, by="bob", add=["hallucinated"])
    for k in range(5):
        e, ver = toy.store.episodes.create(ROOM_TASK, cfg(toy.llm), {"wording": TEXTS[k]})
        steps = [
            Step(
                index=i + 1,
                thought=TEXTS[(k + i) % 5],
                action=TEXTS[(k + i + 1) % 5],
                observation=TEXTS[(k + i + 3) % 5],
                reward=[0.5, 1e-7, 0.0][i % 3],
                info={"note": TEXTS[i % 5]},
                call_ids=[-(i + 1)],
            )
            for i in range(3)
        ]
        calls = [
            ModelCall(
                model="m ☃",
                api_style="chat",
                params={"stop": ["\n"], "base_url": "http://u:p@h/v1"},
                prompt_hash=f"{k}{i:063x}",
                prompt_chars=10 + i,
                completion=TEXTS[(k + i) % 5],
                usage=Usage(prompt_tokens=3, completion_tokens=None),
                latency_ms=[1.25, None, 1e16][i],
                error=[None, TEXTS[k]][i % 2],
                cut_from=[None, 20_001][i % 2],
            )
            for i in range(3)
        ]
        toy.store.versions.append(ver.id, steps, calls)


def _edit(e, refs: dict[int, int], limit: int):
    if e is None:
        return None
    ref = refs.get(e.replaced_step) if e.replaced_step is not None else None
    out = {
        "kind": e.kind,
        "index": e.index,
        "replaced_step": ref if ref is not None and ref <= limit else None,
        "old_thought": e.old_thought,
        "old_action": e.old_action,
    }
    if e.origin is not None:
        out["origin"] = e.origin
    return out


def _call(c: ModelCall, ref: int) -> dict:
    d = {
        "ref": ref,
        "created_at": c.created_at,
        "model": c.model,
        "api_style": c.api_style,
        "purpose": c.purpose,
        "params": safe_call_params(c.params),
        "prompt_hash": c.prompt_hash,
        "prompt_chars": c.prompt_chars,
        "completion": c.completion,
        "usage": c.usage.model_dump(mode="json"),
        "latency_ms": c.latency_ms,
        "attempts": c.attempts,
        "cached": c.cached,
        "error": c.error,
    }
    if c.cut_from:
        d["cut_from"] = c.cut_from
    return d


def _step(s, ref: int, refs: dict[int, int], limit: int, call_refs: list[int], sann: dict) -> dict:
    info = s.info
    if "carried_from" in info:
        src = refs.get(info["carried_from"])
        info = {**info, "carried_from": src if src is not None and src <= limit else None}
    return {
        "ref": ref,
        "index": s.index,
        "thought": s.thought,
        "action": s.action,
        "observation": s.observation,
        "done": s.done,
        "reward": s.reward,
        "info": info,
        "source": s.source,
        "edit": _edit(s.edit, refs, limit),
        "calls": call_refs,
        "created_at": s.created_at,
        "annotations": [
            {"annotator": a.annotator, "created_at": a.created_at, "tags": a.tags, "note": a.note}
            for a in sann.get(s.id, [])
        ],
    }


def _episode_lines(store: Store, batch, ep_ref: int):
    """One episode's records, built the plain way (the format's rules, no shortcuts)."""
    ep = batch.episode
    calls = {
        c.id: c for c in store.calls.read(sorted({i for p in batch.paths.values() for s in p for i in s.call_ids}))
    }
    vann = annotations.version_histories(store, [v.id for v in batch.versions])
    sann = annotations.episode_step_histories(store, ep.id)
    vids = [v.id for v in batch.versions]
    current = ep.current_version if ep.current_version in vids else vids[-1]
    episode = {
        "ref": ep_ref,
        "name": ep.name,
        "created_at": ep.created_at,
        "task": ep.task.model_dump(mode="json"),
        "config": ep.config.model_dump(mode="json"),
        "env_options": env_only(ep.env_options),
    }
    step_refs: dict[int, int] = {}
    call_refs: dict[int, int] = {}
    made: dict[int, dict] = {}
    version_refs: dict[int, int] = {}
    for n, v in enumerate(batch.versions, 1):
        version_refs[v.id] = n
        limit = len(step_refs)
        steps = []
        for s in batch.paths[v.id]:
            if s.id not in made:
                ref = step_refs[s.id] = len(step_refs) + 1
                held = [call_refs.setdefault(c, len(call_refs) + 1) for c in s.call_ids if c in calls]
                made[s.id] = _step(s, ref, step_refs, limit, held, sann)
            steps.append(made[s.id])
        held = dict.fromkeys(c for s in batch.paths[v.id] for c in s.call_ids if c in calls)
        version = {
            "ref": n,
            "parent": version_refs.get(v.parent_version) if v.parent_version else None,
            "current": v.id == current,
            "name": v.name,
            "status": v.status,
            "error": v.error,
            "outcome": v.outcome.model_dump(mode="json"),
            "draft_thought": v.draft_thought,
            "draft_edit": _edit(v.draft_edit, step_refs, limit),
            "edits": [_edit(e, step_refs, limit) for e in v.edits],
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
                for a in vann.get(v.id, [])
            ],
        }
        yield (
            _dumps(
                {
                    "schema": SCHEMA_NAME,
                    "schema_version": SCHEMA_VERSION,
                    "episode": episode,
                    "version": version,
                    "steps": steps,
                    "calls": [_call(calls[c], call_refs[c]) for c in held],
                }
            )
            + "\n"
        )


def _expected(store: Store) -> str:
    batches = select(store, None, Filters(all_versions=True))
    return "".join(line for n, b in enumerate(batches, 1) for line in _episode_lines(store, b, n))


@pytest.mark.parametrize("chunk, two", [(2, True), (200, False)])
def test_the_fast_path_writes_what_the_plain_records_give(toy, tmp_path, monkeypatch, chunk, two):
    _populate(toy)
    monkeypatch.setattr(EXPORT, "CHUNK", chunk)  # 2: several chunks per process
    monkeypatch.setattr(SPLIT, "SPLIT", two)  # the later episodes written by a second process
    out = tmp_path / "x.jsonl"
    rep = export(toy.store, "jsonl", out, filters=Filters(all_versions=True))
    got = out.read_bytes().decode("utf-8")
    assert (rep.episodes, rep.versions, rep.steps) == (
        6,
        8,
        sum(len(json.loads(x)["steps"]) for x in got.split("\n")[:-1]),
    )
    assert "Ω" * 70_000 in got and "</script>" in got and "http://u:p@" not in got
    assert got == _expected(toy.store)
    assert rep.bytes == len(got.encode("utf-8"))
    assert list(tmp_path.glob(".export-*")) == []


def _boom_after(monkeypatch, n: int) -> None:
    seen = []
    real = EXPORT.EpisodeEncoder.lines

    def lines(self):  # the n-th episode cannot be encoded
        seen.append(1)
        if len(seen) == n:
            raise RuntimeError("disk on fire")
        return real(self)

    monkeypatch.setattr(EXPORT.EpisodeEncoder, "lines", lines)


def test_a_failure_here_leaves_no_file_and_no_second_process(toy, tmp_path, monkeypatch):
    _populate(toy)
    monkeypatch.setattr(SPLIT, "SPLIT", True)
    started = []
    monkeypatch.setattr(SPLIT.Part, "__enter__", lambda self: started.append(self) or self)
    _boom_after(monkeypatch, 2)
    out = tmp_path / "x.jsonl"
    with pytest.raises(RuntimeError, match="disk on fire"):
        export(toy.store, "jsonl", out, filters=Filters(all_versions=True))
    assert not out.exists() and list(tmp_path.glob(".export-*")) == []
    part = started[0]
    assert part.proc.returncode == -signal.SIGKILL  # killed and waited for (its file has no name: nothing to remove)


def test_a_failure_in_the_second_process_is_one_line_and_leaves_no_file(toy, tmp_path, monkeypatch):
    _populate(toy)
    monkeypatch.setattr(SPLIT, "SPLIT", True)
    started = []
    real = SPLIT.Part.__init__

    def init(self, store, filters, episodes):  # the second process is sent a database that is not there
        started.append(self)
        real(self, types.SimpleNamespace(file=str(tmp_path / "gone.db")), filters, episodes)

    monkeypatch.setattr(SPLIT.Part, "__init__", init)
    out = tmp_path / "x.jsonl"
    with pytest.raises(EXPORT.StoreError) as err:
        export(toy.store, "jsonl", out, filters=Filters(all_versions=True))
    assert str(err.value) == f"export failed in its second process: no database at {tmp_path / 'gone.db'}"
    assert not out.exists() and list(tmp_path.glob(".export-*")) == []
    assert started[0].proc.returncode == 1


def test_two_processes_write_the_same_into_a_text_stream(toy, monkeypatch):
    """A stream without a byte layer (StringIO) takes the second process's lines as text."""
    _populate(toy)
    monkeypatch.setattr(SPLIT, "SPLIT", True)
    buf = io.StringIO()
    rep = export(toy.store, "jsonl", buf, filters=Filters(all_versions=True))
    assert buf.getvalue() == _expected(toy.store) and rep.episodes == 6
