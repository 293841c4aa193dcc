"""The map stays the territory (issue 45 item 4): docs/architecture.md has one row per module of
each package under its package's heading, and no row for a module that is gone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAP = ROOT / "docs" / "architecture.md"
PACKAGES = (
    "trajectory",
    "envs",
    "envs/transcript",
    "envs/alfworld",
    "envs/wikipedia",
    "sessions",
    "sessions/exchange",
    "agent",
    "agent/model",
    "react_editor",
    "app_pages",
)
HEADING = re.compile(r"^### `([\w/]+)/`")
ROW = re.compile(r"^\| `([\w.]+\.py)` \| (.+) \|$")


def mapped(text: str) -> dict[str, dict[str, str]]:
    """package -> {module file: what the row says it holds}, from the `### `pkg/`` tables."""
    out: dict[str, dict[str, str]] = {}
    package = None
    for line in text.splitlines():
        if line.startswith("#"):
            m = HEADING.match(line)
            package = m.group(1) if m else None
            if package:
                out.setdefault(package, {})
        elif package and (r := ROW.match(line)):
            out[package][r.group(1)] = r.group(2).strip()
    return out


def modules(package: str) -> set[str]:
    """The package's modules, but an `__init__.py` with nothing in it."""
    return {p.name for p in (ROOT / package).glob("*.py") if p.name != "__init__.py" or p.read_text("utf-8").strip()}


def test_every_module_has_its_row_and_every_row_its_module():
    rows = mapped(MAP.read_text("utf-8"))
    missing = {pkg: sorted(modules(pkg) - set(rows.get(pkg, {}))) for pkg in PACKAGES}
    gone = {pkg: sorted(set(rows.get(pkg, {})) - modules(pkg)) for pkg in PACKAGES}
    assert {k: v for k, v in missing.items() if v} == {}, "add a row `| `name.py` | what it holds |` to the map"
    assert {k: v for k, v in gone.items() if v} == {}, "these rows name modules that are gone: update the map"
    assert all(rows[pkg][name] for pkg in PACKAGES for name in rows[pkg]), "a row says nothing"


def test_the_parse_reads_rows_under_their_heading_only():
    text = (
        "### `sessions/`: the store\n\n| module | holds |\n| --- | --- |\n| `store.py` | the Store |\n\n"
        "## Elsewhere\n\n| `calls.py` | not a row of sessions/ |\n"
    )
    assert mapped(text) == {"sessions": {"store.py": "the Store"}}
