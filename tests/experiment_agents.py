"""Scripted agents for experiment tests and benchmarks: responders for tests/scripted_server.py
that answer every prompt format an experiment sends (ReAct, Act, Standard, CoT, ALFWorld),
deterministically from the prompt, with an optional fixed latency.

`wiki_agent(answers)`: `answers` maps a question/claim text to what the agent says (a
string) or to a list cycled per request (CoT-SC votes); unknown tasks get "unknown".
`alfworld_agent()`: visits the receptacles of the room one by one (real env work).
`HOTPOT`: the built-in HotpotQA corpus's questions (id, question, answer), for the answers.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from pathlib import Path
from typing import Any, Callable

from tests.scripted_server import Reply, prompt_text

_TASK = re.compile(r"^(?:Question|Claim): (.*)$", re.MULTILINE)
_STEP_CUE = re.compile(r"(Thought|Action) (\d+):$")
_CORPUS = Path(__file__).resolve().parents[1] / "envs" / "wikipedia" / "corpus" / "hotpotqa.jsonl"
HOTPOT = [json.loads(line) for line in _CORPUS.read_text().splitlines() if line.strip()]


def wiki_agent(
    answers: dict[str, Any], *, latency_s: float = 0.0, react_steps: int = 1, search: str = "Search[Ostwick]"
) -> Callable[[dict], Reply]:
    """A HotpotQA/FEVER agent. ReAct/Act take `react_steps - 1` searches, then finish."""
    cycles: dict[str, Any] = {}
    lock = threading.Lock()

    def say(task: str) -> str:
        want = answers.get(task, "unknown")
        if isinstance(want, list):
            with lock:
                it = cycles.setdefault(task, itertools.cycle(want))
                return next(it)
        return want

    def respond(body: dict) -> Reply:
        prompt = prompt_text(body)
        tasks = _TASK.findall(prompt)
        task = tasks[-1] if tasks else ""
        tail = prompt.rstrip()
        if tail.endswith("\nAnswer:"):
            text = f" {say(task)}"
        elif tail.endswith("\nThought:"):
            a = say(task)
            text = f" Let's think step by step. So the answer is {a}.\nAnswer: {a}"
        else:
            m = _STEP_CUE.search(tail)
            i = int(m.group(2)) if m else 1
            act = f"Finish[{say(task)}]" if i >= react_steps else search
            text = f" I will act.\nAction {i}: {act}" if m and m.group(1) == "Thought" else f" {act}"
        return Reply(text=text, delay_s=latency_s)

    return respond


def alfworld_agent(*, latency_s: float = 0.0) -> Callable[[dict], Reply]:
    """Goes to each receptacle of the room in turn (the env computes every move)."""

    def respond(body: dict) -> Reply:
        prompt = prompt_text(body)
        task = prompt[prompt.rfind("Here is the task.") :]
        places = re.findall(r"an? ([a-z]+ \d+)", task.split("\n")[1] if "\n" in task else "")
        turn = task.count("\n>")
        return Reply(text=f" go to {places[(turn - 1) % len(places)]}" if places else " look", delay_s=latency_s)

    return respond
