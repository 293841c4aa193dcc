"""`react-editor` - the headless face of the product. Everything the UI does, this does.

Each group of subcommands lives in its own module with a `register(sub)` function that
adds argparse parsers and sets `func=callable(args) -> int`. Errors a user can cause are
raised as `CliError` (or the library's own error types) and end as one line on stderr
with a non-zero exit code.
"""

from __future__ import annotations

import argparse
import gc
import sys

from react_editor import (
    command_run,
    confirm,
    core,
    exchange,
    exemplar_commands,
    experiment,
    jobs,
    judge,
    launch,
    lazy_parser,
    model,
    search,
    suggest,
    whatif,
)
from react_editor.args import Parser, argv_problem, fail
from react_editor.command_run import run_command

COMMAND_GROUPS = (
    core,
    exchange,
    exemplar_commands,
    experiment,
    whatif,
    jobs,
    confirm,
    launch,
    search,
    suggest,
    model,
    judge,
)


def register_family_groups(sub) -> None:
    """The command groups environment families contribute (`EnvFamily.cli`: `react-editor
    alfworld ...`, `react-editor wiki ...`), each registered once."""
    from envs.registry import loaded

    seen = set()
    for fam in loaded():
        if fam.cli is not None and fam.cli not in seen:
            seen.add(fam.cli)
            fam.cli(sub, command_run)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given the command line `argv`, only as much of it as that command needs:
    the families' own groups are loaded unless `argv` names one of ours (so `--help`, and
    `react-editor alfworld ...`, still find them), and a command's family-dependent flags
    wait until that command is parsed (`lazy_parser.LazyParser`)."""
    parser = Parser(prog="react-editor", description="Step, edit and branch ReAct agent trajectories.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=lazy_parser.LazyParser)
    for group in COMMAND_GROUPS:
        group.register(sub)
    if argv is None or _command_word(argv) not in sub.choices:
        register_family_groups(sub)
    return parser


def _command_word(argv: list[str]) -> str | None:
    """The command `argv` names (the first word that is not an option), if any."""
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # the process's own command (`react-editor`, `python -m react_editor`)
        code = main(sys.argv[1:])
        # the process ends now: its last garbage collection would walk every object left, a
        # second after a HotpotQA run or a stopped job (benchmarks/stop_latency.py): not done
        gc.freeze()
        return code
    argv = list(argv)
    problem = argv_problem(argv)  # before argparse: its own messages would echo the bad bytes
    if problem:
        return fail(problem)
    import envs.registry  # noqa: F401  (installs the kind resolver `sessions/` reaches transcripts by; loads no family)

    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a one-line argument error: a code, also when called in-process
        return exc.code if isinstance(exc.code, int) else 2
    return run_command(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
