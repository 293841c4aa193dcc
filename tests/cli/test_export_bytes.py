"""The jsonl export assembles each record from pre-encoded parts (shared steps and calls are
encoded once): every line must still be exactly what json.dumps writes for the record."""

from __future__ import annotations

import json

from sessions.exchange import Filters, export
from sessions.exchange.export import _dumps
from tests.engine_scripts import ROOM_SCRIPT, cfg
from tests.toy_envs import ROOM_TASK

TRICKY = 'go to "shelf" 1 \\ \t \x01 ☃ 𝄞 </script>'


def test_every_line_is_canonical_json(toy, tmp_path):
    toy.llm.push(*ROOM_SCRIPT)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, max_steps=8))
    toy.engine.run(v.id)  # won: a done step
    v2 = toy.engine.editor.edit(v.id, 3, "rewrite_action", TRICKY)
    toy.engine.human_step(v2.id, thought="Naïve “quotes” and a tab\there.")
    out = tmp_path / "x.jsonl"
    rep = export(toy.store, "jsonl", out, filters=Filters(all_versions=True))
    lines = out.read_text(encoding="utf-8").splitlines()
    assert rep.versions == len(lines) == 2
    for line in lines:
        assert _dumps(json.loads(line)) == line
    won, edited = (json.loads(line) for line in lines)
    assert won["steps"][-1]["done"] is True and won["steps"][-1]["reward"] == 1.0
    assert edited["steps"][2]["action"] == TRICKY and edited["steps"][3]["thought"].startswith("Naïve")
    assert won["calls"][0]["usage"].keys() == {"prompt_tokens", "completion_tokens", "cached_prompt_tokens"}
