"""A scripted agent and critic for the `suggest` tests (issue 29): the toy room's agent that
fails unless a hint is inserted, and a critic answering with given candidates."""

from __future__ import annotations

import json
import threading

from tests.toy_envs import ROOM_TASK
from trajectory.records import AgentConfig

CRITIC_MARK = "You review the trajectory"
HINT = "The mug is in the cabinet."
GOOD = {"step": 2, "kind": "insert_thought_before", "text": HINT, "rationale": "the shelf is empty"}
IDLE = {"step": 1, "kind": "rewrite_thought", "text": "I should look around first.", "rationale": "plan"}
IDLE2 = {"step": 3, "kind": "insert_thought_after", "text": "Maybe the shelf again.", "rationale": "retry"}


def cfg(llm, **kw) -> AgentConfig:
    return AgentConfig(model="scripted-model", base_url=llm.base_url, max_retries=1, timeout_s=5, **kw)


class RoomAgent:
    """The toy room's agent: unaided it goes to the empty shelf and loops there (a failure
    at the step limit); after the hint 'The mug is in the cabinet.' it goes to the cabinet
    and wins. Critic requests get `critic` (a JSON text, or a callable)."""

    def __init__(self, critic: str | None = None):
        self.critic = critic
        self.lock = threading.Lock()
        self.agent_calls = 0
        self.critic_calls = 0

    def __call__(self, body: dict) -> str:
        prompt = body.get("prompt") or body["messages"][0]["content"]
        if CRITIC_MARK in prompt:
            with self.lock:
                self.critic_calls += 1
            return self.critic or "{}"
        with self.lock:
            self.agent_calls += 1
        tail = prompt[prompt.rfind("Here is the task.") :]
        if tail.endswith(f"think: {HINT}\nOK.\n>"):
            return " go to cabinet 1"
        for obs, action in (
            ("The cabinet 1 is closed.\n>", " open cabinet 1"),
            ("In it, you see a mug 1.\n>", " take mug 1 from cabinet 1"),
            ("from the cabinet 1.\n>", " go to table 1"),
            ("On the table 1, you see nothing.\n>", " put mug 1 in/on table 1"),
        ):
            if tail.endswith(obs):
                return action
        if tail.endswith("OK.\n>") or tail.endswith("you see nothing.\n>"):
            return " go to shelf 1"
        return " think: To solve the task, I need to find a mug, then put it in table 1."


def critic_json(*cands: dict) -> str:
    return "Here are my suggestions:\n```json\n" + json.dumps({"candidates": list(cands)}) + "\n```\nGood luck."


def fail_episode(toy) -> "RoomAgent":
    """Episode 1, version 1: a failure (the shelf, again and again, until the step limit 8)."""
    agent = RoomAgent()
    toy.llm.set_responder(agent)
    ep, v = toy.engine.start_episode(ROOM_TASK, cfg(toy.llm, max_steps=8))
    rep = toy.engine.run(v.id)
    assert rep.done and not rep.success
    return agent


MAGIC = "Check the question word by word."


def hotpot_fixer(critic_candidates: list[dict]):
    """A HotpotQA agent (built-in tasks) that answers wrongly, and rightly once its thought
    says MAGIC; critic requests get `critic_candidates`."""
    from pathlib import Path

    from tests.experiment_agents import wiki_agent
    from tests.scripted_server import prompt_text

    corpus = Path(__file__).resolve().parent.parent / "envs" / "wikipedia" / "corpus" / "hotpotqa.jsonl"
    rows = [json.loads(line) for line in corpus.read_text().splitlines() if line.strip()]
    plain, fixed = wiki_agent({}), wiki_agent({r["question"]: r["answer"] for r in rows})

    def respond(body):
        text = prompt_text(body)
        if CRITIC_MARK in text:
            return json.dumps({"candidates": critic_candidates})
        return fixed(body) if MAGIC in text.rpartition("Question:")[2] else plain(body)

    return respond
