"""Built-in ALFWorld tasks and their expert walkthroughs, shared by the ALFWorld CLI tests (not tests)."""

from __future__ import annotations

import json
from pathlib import Path

from envs.alfworld.wording import to_wording
from envs.registry import family


def first_task(task_type: str):
    return next(t for t in family("alfworld").list_tasks(source="builtin") if t.type == task_type)


def walkthrough(task, wording="paper") -> list[str]:
    return [to_wording(c, wording) for c in json.loads(Path(task.data["game"]).read_text())["walkthrough"]]
