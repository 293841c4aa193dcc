"""The layering holds: no import cycles, no UI in the library, unambiguous installed names,
and environments that plug in without the base importing them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS_TOOL = ROOT.parent / "shared" / "tools" / "layers.py"


def _run(code: str, extra_path: Path | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(extra_path or ""), str(ROOT)) if p)
    return subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=cwd or ROOT, capture_output=True, text=True, timeout=120
    )


def test_layers_tool_reports_no_cycles_and_no_ui_in_library():
    if not LAYERS_TOOL.exists():
        pytest.skip("../shared/tools/layers.py is not here")
    out = subprocess.run([sys.executable, str(LAYERS_TOOL)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "file_cycles=0, package_cycles=0, ui_imports_in_library=0", out.stdout


def test_a_foreign_cli_module_on_the_path_does_not_break_the_command(tmp_path):
    (tmp_path / "cli.py").write_text("raise SystemExit('the wrong cli module was imported')\n")
    out = _run(
        "import sys; from react_editor.main import main; sys.argv=['react-editor','--help']; main()",
        extra_path=tmp_path,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "Step, edit and branch" in out.stdout


def test_an_installed_package_adds_an_environment_through_an_entry_point(tmp_path):
    (tmp_path / "coinflip.py").write_text(
        textwrap.dedent("""
        from envs.base import EnvFamily, StepResult
        from trajectory.records import Task

        TASK = Task(env="coinflip", id="c1", text="Flip the coin.")

        class Coin:
            kind, default_max_steps = "coinflip", 3
            def reset(self, task): return task.text
            def step(self, action): return StepResult("It lands heads.", done=True, reward=1.0, info={"won": True})

        FAMILY = EnvFamily("coinflip", lambda **_: [TASK], lambda tid, **_: TASK, lambda *a, **k: Coin(), 3)
    """)
    )
    dist = tmp_path / "coinflip-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: coinflip\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[react_editor.envs]\ncoinflip = coinflip:FAMILY\n")
    out = _run(
        textwrap.dedent("""
        from envs.registry import family, kinds
        fam = family("coinflip")
        env = fam.make_env(fam.get_task("c1"), {})
        print(sorted(kinds()), fam.list_tasks()[0].text, env.step("flip").observation)
    """),
        extra_path=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "'coinflip'" in out.stdout and "'alfworld'" in out.stdout
    assert "Flip the coin. It lands heads." in out.stdout


def test_unknown_environment_is_one_clear_error():
    from envs.base import EnvError
    from envs.registry import family

    with pytest.raises(EnvError, match="unknown environment 'nope'; known: alfworld, hotpotqa, fever"):
        family("nope")


def test_the_base_does_not_import_the_families():
    out = _run("import sys, envs.base; print(sorted(m for m in sys.modules if m.startswith('envs.')))")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['envs.base']"


ABOVE_ENVS = ("agent", "sessions", "trajectory", "react_editor", "app_pages", "app.py")


def env_name_literals(root: Path, names: set[str]) -> list[str]:
    """file:line of every string literal (not a docstring) above envs/ that is exactly the
    name of a built-in environment: a place that branches on an environment's name."""
    import io
    import tokenize

    hits = []
    for top in ABOVE_ENVS:
        p = root / top
        files = [p] if p.is_file() else sorted(p.rglob("*.py")) if p.is_dir() else []
        for f in files:
            for tok in tokenize.generate_tokens(io.StringIO(f.read_text(encoding="utf-8")).readline):
                if tok.type != tokenize.STRING:
                    continue
                body = tok.string.lstrip("rbuRBUfF")
                if body[:3] not in ('"""', "'''") and body.strip("'\"").lower() in names:
                    hits.append(f"{f.relative_to(root)}:{tok.start[0]}")
    return hits


def test_no_code_above_envs_names_a_built_in_environment():
    from envs.registry import BUILTIN

    assert env_name_literals(ROOT, set(BUILTIN)) == []


def test_the_name_check_finds_a_name_branch(tmp_path):
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "x.py").write_text(
        '"""alfworld in a docstring is fine"""\n# "fever" in a comment too\nif env == "hotpotqa":\n    pass\n'
    )
    assert env_name_literals(tmp_path, {"alfworld", "hotpotqa", "fever"}) == ["agent/x.py:3"]


def test_no_module_is_imported_under_the_name_of_another():
    """Issue 26 item 20: `from sessions import jobs as rows` read as `sessions.rows`; a
    project module imported under an alias never takes the name of another project module."""
    import ast

    skip = {"tests", "benchmarks", "build", "docs"}
    files = [
        p
        for p in ROOT.rglob("*.py")
        if not (set(p.relative_to(ROOT).parts) & skip)
        and not any(part.startswith(".") for part in p.relative_to(ROOT).parts)
    ]
    names = {p.stem for p in files if p.stem != "__init__"} | {p.parent.name for p in files if p.stem == "__init__"}
    wrong = []
    for p in files:
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in names:
                wrong += [
                    f"{p.relative_to(ROOT)}: {a.name} as {a.asname}"
                    for a in node.names
                    if a.asname and a.asname != a.name and a.asname in names
                ]
    assert wrong == []
