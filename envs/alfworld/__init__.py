"""ALFWorld on the real alfworld/textworld engine: built-in generated games, the official
download, the paper's wording, fast faithful resume. Defines the `alfworld` family (`FAMILY`, found by `envs.registry`)."""

from __future__ import annotations

from envs.base import EnvFamily
from envs.alfworld.exemplars import EXEMPLARS_FILE
from envs.alfworld.tasks import custom_task, external_references, get_task, list_tasks


def make_env(task, options: dict | None = None, blobs=None):
    from envs.alfworld.env import AlfworldEnv

    return AlfworldEnv(wording=(options or {}).get("wording", "paper"))


FAMILY = EnvFamily(kind="alfworld", list_tasks=list_tasks, get_task=get_task, make_env=make_env,
                   default_max_steps=49, custom_task=custom_task, exemplars_file=EXEMPLARS_FILE,
                   references=external_references)
