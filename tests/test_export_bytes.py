"""The jsonl export assembles each record from pre-encoded parts (shared steps and calls are
encoded once): every line must still be exactly what json.dumps writes for the record."""

from __future__ import annotations

import json

from sessions.exchange import Filters, export
from sessions.exchange.export import _dumps
from tests.test_engine import ROOM_SCRIPT, cfg
from tests.toy_envs import ROOM_TASK

TRICKY = 'go to "shelf" 1 \\ \t \x01 ☃ 𝄞 </script>'


def test_every_line_is_canonical_json(toy, tmp_path):
    toy.llm.push(*ROOM_SCRIPT[:3])
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, max_steps=6))
    toy.engine.run(v.id, max_steps=3)
    toy.engine.human_step(v.id, action=TRICKY)
    toy.engine.human_step(v.id, thought="Naïve “quotes” and a tab\there.")
    toy.engine.edit(v.id, 2, "rewrite_action", "go to shelf 1")
    out = tmp_path / "x.jsonl"
    rep = export(toy.store, "jsonl", out, filters=Filters(all_versions=True))
    lines = out.read_text(encoding="utf-8").splitlines()
    assert rep.versions == len(lines) == 2
    for line in lines:
        assert _dumps(json.loads(line)) == line
    steps = json.loads(lines[0])["steps"]
    assert steps[3]["action"] == TRICKY and steps[1]["reward"] == 0.0 and steps[1]["calls"] == [2]
    assert json.loads(lines[0])["calls"][0]["usage"].keys() == {"prompt_tokens", "completion_tokens",
                                                                 "cached_prompt_tokens"}
