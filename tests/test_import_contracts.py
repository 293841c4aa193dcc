"""The import contracts of pyproject.toml (`[tool.importlinter]`) hold, checked by the
maintained `lint-imports` inside the project (no ../shared tool needed), and each contract
can fail: a copy of the packages with one forbidden import added breaks exactly it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("trajectory", "envs", "sessions", "agent", "react_editor", "app_pages")
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(LINT), "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=300)


def test_the_project_keeps_every_import_contract():
    out = _lint(ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "Contracts: 4 kept, 0 broken." in out.stdout


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    """The packages' Python files and pyproject.toml, copied (the checks below add one import each)."""
    root = tmp_path_factory.mktemp("contracts")
    shutil.copy(ROOT / "pyproject.toml", root)
    for pkg in PACKAGES:
        shutil.copytree(
            ROOT / pkg,
            root / pkg,
            ignore=lambda d, names: [
                n for n in names if not (n.endswith(".py") or (Path(d) / n).is_dir()) or n == "__pycache__"
            ],
        )
    return root


@pytest.mark.parametrize(
    "module, line, broken",
    [
        ("sessions/blobs.py", "import agent.summary", "Layers"),
        ("react_editor/confirm.py", "import app_pages.page_text", "Layers"),
        ("agent/summary.py", "import streamlit", "No Streamlit below the app"),
        ("envs/wikipedia/__init__.py", "import envs.alfworld", "Environment families are independent"),
        ("sessions/blobs.py", "import sessions.store", "No import cycles"),
    ],
)
def test_each_contract_fails_on_the_import_it_forbids(copy, module, line, broken):
    path = copy / module
    before = path.read_text()
    path.write_text(before + f"\n{line}  # added by the test\n")
    try:
        out = _lint(copy)
    finally:
        path.write_text(before)
    assert out.returncode == 1, out.stdout[-2000:]
    text = " ".join(out.stdout.split())  # (long contract names wrap)
    assert "1 broken" in text and _verdict(text, broken) == "BROKEN", out.stdout[-3000:]


def _verdict(text: str, contract: str) -> str:
    """KEPT or BROKEN: the word that follows the contract's name in lint-imports' summary."""
    rest = text[text.index(contract) :]
    kept, broken = rest.find(" KEPT"), rest.find(" BROKEN")
    return "BROKEN" if broken != -1 and (kept == -1 or broken < kept) else "KEPT"
