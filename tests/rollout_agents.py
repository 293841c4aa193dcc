"""A scripted agent for the toy room that the resample / what-if tests share (not tests)."""

from __future__ import annotations

import itertools
import threading


class Agent:
    """A scripted agent for the toy room. After the opening thought it goes to the cabinet
    (and wins) or to the shelf (and loops there until the step limit), alternating, or by
    `choose()`. After an inserted hint 'The mug is in the cabinet.' it always wins."""

    def __init__(self, choose=None):
        turns = itertools.cycle([" go to cabinet 1", " go to shelf 1"])
        self.lock = threading.Lock()
        self.choose = choose or (lambda: next(turns))
        self.calls = 0

    def __call__(self, body: dict) -> str:
        prompt = body["prompt"]
        with self.lock:
            self.calls += 1
        tail = prompt[prompt.rfind("Here is the task.") :]
        if tail.endswith("think: The mug is in the cabinet.\nOK.\n>"):
            return " go to cabinet 1"
        if tail.endswith("OK.\n>"):
            with self.lock:
                return self.choose()
        for obs, action in (
            ("The cabinet 1 is closed.\n>", " open cabinet 1"),
            ("In it, you see a mug 1.\n>", " take mug 1 from cabinet 1"),
            ("from the cabinet 1.\n>", " go to table 1"),
            ("On the table 1, you see nothing.\n>", " put mug 1 in/on table 1"),
            ("On the shelf 1, you see nothing.\n>", " go to shelf 1"),
        ):
            if tail.endswith(obs):
                return action
        return " think: To solve the task, I need to find a mug, then put it in table 1."
