"""The jsonl export writes the common value types (texts, ints, finite floats, None) of
steps and calls itself instead of through json: every value a record may hold must still
come out exactly as json.dumps (the export's `_dumps`) writes it."""

from __future__ import annotations

import json

from sessions.exchange import Filters, Ref, export
from sessions.exchange.export import _dumps
from tests.engine_scripts import cfg
from tests.toy_envs import ROOM_TASK
from trajectory.records import ModelCall, Step, Usage

TEXTS = ['say "hi" \\ \t\n\r\b\f \x00\x01\x1f\x7f', "Naïve ☃ 𝄞 \u2028\u2029 </script>", ""]
FLOATS = [0.1 + 0.2, 1e16, 1e-7, -0.0, 2.5, 123456789.125, 5e-324, 1.7976931348623157e308]


def _call(i: int) -> ModelCall:
    tokens = [None, 0, 10**12][i % 3]
    return ModelCall(
        model='m "x" ☃',
        api_style="chat",
        purpose=["step", "critic"][i % 2],
        params={"temperature": FLOATS[i % len(FLOATS)], "stop": ["\n", "é"], "n": None},
        prompt_hash=f"{i:064x}",
        prompt_chars=i,
        completion=[None, *TEXTS][i % 4],
        usage=Usage(prompt_tokens=tokens, completion_tokens=tokens, cached_prompt_tokens=None),
        latency_ms=[None, *FLOATS][i % (len(FLOATS) + 1)],
        attempts=1 + i,
        cached=bool(i % 2),
        error=[None, *TEXTS][(i + 1) % 4],
        cut_from=[None, 50_007][i % 2],
    )


def test_tricky_values_come_out_as_json_writes_them(toy, tmp_path):
    ep, v = toy.store.episodes.create(ROOM_TASK, cfg(toy.llm), {})
    steps = [
        Step(
            index=i + 1,
            thought=[None, *TEXTS][i % 4],
            action=TEXTS[i % 3],
            observation=[None, *TEXTS][(i + 2) % 4],
            done=i == len(FLOATS) - 1,
            reward=FLOATS[i],
            info=[{}, {"won": False, "score": FLOATS[i]}][i % 2],
            call_ids=[-(i + 1)] if i % 3 else [-(i + 1), -(i + 2)] if i + 2 <= len(FLOATS) else [],
        )
        for i in range(len(FLOATS))
    ]
    toy.store.versions.append(v.id, steps, [_call(i) for i in range(len(FLOATS))])
    out = tmp_path / "x.jsonl"
    export(toy.store, "jsonl", out, filters=Filters(all_versions=True))
    line, end = out.read_text(encoding="utf-8").split("\n")  # (splitlines would cut at \u2028)
    assert end == ""
    rec = json.loads(line)
    assert _dumps(rec) == line
    assert [s["reward"] for s in rec["steps"]] == FLOATS
    assert [s["thought"] for s in rec["steps"]] == [s.thought for s in steps]
    stored = [None if c.latency_ms is None else round(c.latency_ms, 3) for c in map(_call, range(len(FLOATS)))]
    assert [c["latency_ms"] for c in rec["calls"]] == stored  # (kept to the microsecond)
    assert [c["usage"]["prompt_tokens"] for c in rec["calls"]] == [
        _call(i).usage.prompt_tokens for i in range(len(FLOATS))
    ]
    assert [c.get("cut_from") for c in rec["calls"]] == [_call(i).cut_from for i in range(len(FLOATS))]


def test_sqlite_json_quote_writes_every_character_as_json_does(toy):
    """The export lets SQLite's json_quote write the step and call texts: for every
    character (a lone surrogate cannot be stored) it must agree with _dumps."""
    text = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    quoted, null = toy.store.db.execute("select json_quote(?), json_quote(null)", [text]).fetchone()
    assert quoted == _dumps(text) and null == _dumps(None)


def test_a_call_of_another_episode_and_a_call_held_twice(toy, tmp_path):
    """A step may hold a call recorded under another episode (read by id) and the same call
    twice: the step lists both refs, the record lists the call once."""
    ep, v = toy.store.episodes.create(ROOM_TASK, cfg(toy.llm), {})
    rows, _ = toy.store.versions.append(v.id, [Step(index=1, action="look", call_ids=[-1])], [_call(1)])
    ep2, v2 = toy.store.episodes.create(ROOM_TASK, cfg(toy.llm), {})
    cid = rows[0].call_ids[0]
    toy.store.versions.append(
        v2.id,
        [
            Step(index=1, action="look", observation="x", call_ids=[cid, cid]),
            Step(index=2, action="look", observation="y", call_ids=[cid, 10**9]),
        ],
        [],
    )
    out = tmp_path / "x.jsonl"
    export(toy.store, "jsonl", out, filters=Filters(all_versions=True))
    lines = out.read_text(encoding="utf-8").split("\n")[:-1]  # (splitlines would cut at \u2028)
    first, second = (json.loads(line) for line in lines)
    assert [s["calls"] for s in second["steps"]] == [[1, 1], [1]]  # (no call 10**9: not recorded)
    assert second["calls"] == [{**first["calls"][0], "ref": 1}]
    for line in lines:
        assert _dumps(json.loads(line)) == line
    export(toy.store, "jsonl", out, refs=[Ref(ep2.id)])  # the call's own episode not exported
    assert out.read_text(encoding="utf-8") == lines[1].replace('"episode":{"ref":2,', '"episode":{"ref":1,', 1) + "\n"
