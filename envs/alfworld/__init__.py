"""ALFWorld on the real alfworld/textworld engine: built-in generated games, the official
download, the paper's wording, fast faithful resume. Defines the `alfworld` family (`FAMILY`, found by `envs.registry`)."""

from __future__ import annotations

from pathlib import Path

from envs.alfworld.exemplars import EXEMPLARS_FILE
from envs.alfworld.tasks import custom_task, external_references, get_task, list_tasks
from envs.alfworld.transcript import TASK_TYPES, TRANSCRIPT
from envs.base import CustomField, EnvError, EnvFamily, Option
from envs.transcript.command import admissible_warning


def make_env(task, options: dict | None = None, blobs=None):
    from envs.alfworld.env import AlfworldEnv

    return AlfworldEnv(wording=(options or {}).get("wording", "paper"))


def paper_sample(pool: list, source: str | None) -> list:
    """alfworld.ipynb runs all 134 official `valid_unseen` games (`eval_out_of_distribution`)."""
    if source != "official" or any((t.data or {}).get("split") != "valid_unseen" for t in pool):
        raise EnvError(
            "--sample paper for ALFWorld runs the 134 official valid_unseen games: use --tasks official "
            "(split valid_unseen)"
        )
    return pool


def download(dest: Path | None = None, **kw) -> Path:
    """The official ALFWorld data (`react-editor data alfworld`)."""
    from envs.alfworld.download import download_official
    from envs.alfworld.tasks import alfworld_data_dir

    if dest is None:
        dest = alfworld_data_dir()  # where the task lists read them ($ALFWORLD_DATA, ~ expanded)
    return download_official(dest, **kw)


def register_cli(sub, helpers) -> None:
    from envs.alfworld.cli import register

    register(sub, helpers)


def summary(task) -> str:
    goal = task.text.rsplit("Your task is to:", 1)[-1].strip()
    return f"{task.type or 'task'}: {goal}"


def action_warning(action: str, admissible) -> str | None:
    """Not among the admissible commands: the environment will answer 'Nothing happens.'"""
    return admissible_warning(action, admissible, "; the environment will answer 'Nothing happens.'")


FAMILY = EnvFamily(
    kind="alfworld",
    list_tasks=list_tasks,
    get_task=get_task,
    make_env=make_env,
    default_max_steps=49,
    custom_task=custom_task,
    exemplars_file=EXEMPLARS_FILE,
    references=external_references,
    transcript=TRANSCRIPT,
    label="ALFWorld",
    task_types=TASK_TYPES,
    results_caption="ALFWorld: success rate % per task type (paper layout, as Table 3)",
    builtin_label="built-in sample (generated)",
    exemplars_label="(built-in: played by a scripted policy, not the paper's)",
    sources=("builtin", "official"),
    ids_by_listing=False,
    paper_sample=paper_sample,
    options=(Option("wording", "--wording", "ALFWorld command wording", ("paper", "alfworld-0.4"), "paper"),),
    custom_fields=(CustomField("game", "Path to an ALFWorld game (game.tw-pddl)"),),
    summary=summary,
    action_warning=action_warning,
    cli=register_cli,
    downloads={"alfworld": download},
)
