"""TextWorld games as a ReAct Editor environment, as a separate installable plugin: the
`react_editor.envs` entry point `textworld` names `FAMILY`. Nothing in ReAct Editor knows
this package; everything about the environment is here (tasks, environment, transcript,
scoring, display)."""

from __future__ import annotations

from pathlib import Path

from envs.base import CustomField, EnvFamily, Metric
from envs.transcript.command import admissible_warning
from react_editor_textworld import games
from react_editor_textworld.transcript import KIND, TRANSCRIPT

EXEMPLARS_FILE = Path(__file__).parent / "data" / "exemplars.json"
MAX_STEPS = 30


def make_env(task, options: dict | None = None, blobs=None):
    from react_editor_textworld.env import TextWorldEnv

    return TextWorldEnv(KIND, games.game_path(task))


def summary(task) -> str:
    goal = task.text.rsplit("Your task is to:", 1)[-1].strip()
    return f"{task.id}: {goal}"


def action_warning(action: str, admissible) -> str | None:
    return admissible_warning(action, admissible)


FAMILY = EnvFamily(
    kind=KIND,
    list_tasks=games.list_tasks,
    get_task=games.get_task,
    make_env=make_env,
    default_max_steps=MAX_STEPS,
    custom_task=games.custom_task,
    exemplars_file=EXEMPLARS_FILE,
    references=games.references,
    transcript=TRANSCRIPT,
    label="TextWorld",
    task_types=(("cooking", "Cooking"), ("game", "Game")),
    metrics=(Metric("score", "Score %", "score_rate"),),
    results_caption="TextWorld: success rate % per task type and mean score %",
    custom_fields=(CustomField("game", "Path to a TextWorld game (.z8 or .ulx)"),),
    summary=summary,
    action_warning=action_warning,
)
