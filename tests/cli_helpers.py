"""Helpers the CLI tests share: `react-editor` in process, and a child-process script (not tests)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from react_editor.main import main
from tests.scripted_server import ScriptedLLM

ROOT = Path(__file__).resolve().parent.parent


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def cli_json(capsys, *argv: str):
    code, out, err = cli(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


CHILD = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})
    import envs.registry as base
    from agent import exemplars
    from tests import toy_envs
    fams = toy_envs.families(); fams.pop("made")
    base._FAMILIES.update(fams)
    exemplars.builtin_prompt_dict = lambda env: toy_envs.ROOM_EXEMPLARS
    from react_editor.main import main
    sys.exit(main(sys.argv[1:]))
    """
)


def run_args(llm: ScriptedLLM, db: Path, *extra) -> list:
    return ["experiment", "run", "--model", "m", "--base-url", llm.base_url, "--db", db, "--json", *extra]
