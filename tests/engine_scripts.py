"""Scripted model replies and the agent settings the engine-level tests share (not tests)."""

from __future__ import annotations

from trajectory.records import AgentConfig


def cfg(llm, **kw) -> AgentConfig:
    return AgentConfig(model="scripted-model", base_url=llm.base_url, max_retries=2, timeout_s=5, **kw)


ROOM_SCRIPT = [
    " think: To solve the task, I need to find a mug, then put it in table 1. ",
    " go to cabinet 1",
    " open cabinet 1",
    " take mug 1 from cabinet 1",
    " go to table 1",
    " put mug 1 in/on table 1",
]

WIKI_SCRIPT = [
    " I need to search Velmora, find its capital, then find when it was founded.\nAction 1: Search[Velmora]\nObservation 1: (the model hallucinates this)",
    " The capital is Marrowgate. I need to look it up.",  # no action: the paper's fallback
    " Search[Marrowgate]",
    " Marrowgate has a founding year. Let me look up founded.\nAction 3: Lookup[founded]",
    " It was founded in 1650, so the answer is 1650.\nAction 4: Finish[1650]",
]
