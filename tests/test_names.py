"""Names a reader can follow: a module is imported under its own name (`from sessions import
jobs`, not `as rows` or `as xs`; `/work/names_rename.py` does the renames), and what the
gate shares (the token variable, the loopback address and test) is written once, in
agent/gate.py."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# sessions/ is renamed by its own owner; add it here once it holds no alias either
CHECKED = ("agent", "react_editor", "app_pages", "envs", "trajectory", "benchmarks", "tests")
PACKAGES = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()}


def _files(dirs=CHECKED) -> list[Path]:
    out = [ROOT / "app.py", ROOT / "app_server.py"]
    for d in dirs:
        out += [p for p in (ROOT / d).rglob("*.py") if "build" not in p.parts]
    return [p for p in out if p.is_file()]


def _is_module(dotted: str) -> bool:
    parts = dotted.split(".")
    if parts[0] in PACKAGES:
        base = ROOT.joinpath(*parts)
        return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()
    return parts[0] in sys.stdlib_module_names and len(parts) == 1


def renamed_modules(tree: ast.AST) -> list[str]:
    """`module as alias` for each project or standard-library module bound to another name."""
    wrong = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            wrong += [
                f"{node.module}.{a.name} as {a.asname}"
                for a in node.names
                if a.asname and a.asname != a.name and _is_module(f"{node.module}.{a.name}")
            ]
        elif isinstance(node, ast.Import):
            wrong += [
                f"{a.name} as {a.asname}"
                for a in node.names
                if a.asname
                and a.asname != a.name.rpartition(".")[2]
                and (a.name.split(".")[0] in PACKAGES or a.name.split(".")[0] in sys.stdlib_module_names)
            ]
    return wrong


def test_modules_are_imported_under_their_own_names():
    wrong = [f"{p.relative_to(ROOT)}: {w}" for p in _files() for w in renamed_modules(ast.parse(p.read_text("utf-8")))]
    assert wrong == [], "run python /work/names_rename.py (or rename by hand): " + "; ".join(wrong)


def test_the_check_catches_an_alias():
    tree = ast.parse(
        "from sessions import jobs as rows\nimport datetime as _dt\nfrom sessions import jobs\n"
        "from sessions.jobs import finish as done\nimport streamlit as st\n"
    )
    assert renamed_modules(tree) == ["sessions.jobs as rows", "datetime as _dt"]


SHARED = {"REACT_EDITOR_TOKEN", "127.0.0.1", "REACT_EDITOR_ALLOWED_ENDPOINTS"}


def test_what_the_gate_shares_is_written_once():
    """The token variable, the loopback address and the loopback test live in agent/gate.py
    only (they once existed twice); the rest of the code imports them."""
    found = []
    for p in _files(("agent", "react_editor", "app_pages", "envs", "sessions", "trajectory")):
        if p == ROOT / "agent" / "gate.py":
            continue
        for node in ast.walk(ast.parse(p.read_text("utf-8"))):
            if isinstance(node, ast.Constant) and node.value in SHARED:
                found.append(f"{p.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
            elif isinstance(node, ast.Attribute) and node.attr == "is_loopback":
                found.append(f"{p.relative_to(ROOT)}:{node.lineno}: .is_loopback")
            elif isinstance(node, ast.FunctionDef) and "loopback" in node.name:
                found.append(f"{p.relative_to(ROOT)}:{node.lineno}: def {node.name}")
    assert found == []
