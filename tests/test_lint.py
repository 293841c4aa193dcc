"""The tree passes `ruff check` and `ruff format --check` with the project's configuration
(pyproject.toml, `[tool.ruff]`), and those checks can fail: a file with an unused import in a copy
of the configuration is reported, and so is a file the formatter would change."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUFF = str(
    Path(sys.executable).with_name("ruff")
    if Path(sys.executable).with_name("ruff").exists()
    else shutil.which("ruff") or "ruff"
)


def _ruff(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run([RUFF, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_tree_passes_ruff() -> None:
    out = _ruff("check", "--no-cache", "--output-format", "concise", ".", cwd=ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]


def test_the_tree_is_formatted() -> None:
    out = _ruff("format", "--no-cache", "--check", ".", cwd=ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]


def test_ruff_reads_the_project_rules_and_reports_a_finding(tmp_path: Path) -> None:
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "bad.py").write_text('"""A module with an unused import."""\n\nimport os\n', encoding="utf-8")
    (tmp_path / "long.py").write_text(f'"""Long lines are the formatter\'s."""\n\nX = ["{"x" * 60}", "{"y" * 60}"]\n')
    out = _ruff("check", "--no-cache", "--output-format", "concise", ".", cwd=tmp_path)
    assert out.returncode == 1 and "bad.py:3:8: F401" in out.stdout and "long.py" not in out.stdout, out.stdout
    fmt = _ruff("format", "--no-cache", "--diff", "long.py", cwd=tmp_path)  # [tool.ruff.format]: 120 columns
    assert fmt.returncode == 1 and '-X = ["' in fmt.stdout and "+X = [\n" in fmt.stdout, fmt.stdout + fmt.stderr
