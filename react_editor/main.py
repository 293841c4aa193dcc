"""`react-editor` - the headless face of the product. Everything the UI does, this does.

Each group of subcommands lives in its own module with a `register(sub)` function that
adds argparse parsers and sets `func=callable(args) -> int`. Errors a user can cause are
raised as `CliError` (or the library's own error types) and end as one line on stderr
with a non-zero exit code.
"""

from __future__ import annotations

import argparse
import sys

from react_editor import common, confirm, core, exchange, experiment, jobs, launch, search, whatif
from react_editor import suggest
from react_editor.common import run_command

COMMAND_GROUPS = (core, exchange, experiment, whatif, jobs, confirm, launch, search, suggest)


def register_family_groups(sub) -> None:
    """The command groups environment families contribute (`EnvFamily.cli`: `react-editor
    alfworld ...`, `react-editor wiki ...`), each registered once."""
    from envs.registry import loaded

    seen = set()
    for fam in loaded():
        if fam.cli is not None and fam.cli not in seen:
            seen.add(fam.cli)
            fam.cli(sub, common)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="react-editor",
        description="Step, edit and branch ReAct agent trajectories.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in COMMAND_GROUPS:
        group.register(sub)
    register_family_groups(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return run_command(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
