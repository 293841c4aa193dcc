"""Core commands: tasks, run, resume, step, show, versions, edit, branch, episodes, data - registered in
this order from the modules that hold them (task_commands, run_commands, show_commands, edit_commands;
what they share is in episode_args)."""

from __future__ import annotations

import argparse

from react_editor import edit_commands, run_commands, show_commands, task_commands


def register(sub: argparse._SubParsersAction) -> None:
    task_commands.register_tasks(sub)
    run_commands.register(sub)
    show_commands.register_show(sub)
    show_commands.register_lists(sub)
    edit_commands.register(sub)
    task_commands.register_data(sub)
