"""The TextWorld plugin installed into a folder as `pip install --target` would, for tests that
load it through its entry point without a network."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

PLUGIN = Path(__file__).resolve().parents[1] / "plugins" / "react-editor-textworld"


def install_plugin(prefix: Path) -> Path:
    """The plugin's package plus `<name>-<version>.dist-info` (METADATA, entry_points.txt)
    from its pyproject.toml - what `pip install --target prefix` writes, without a network."""
    meta = tomllib.loads((PLUGIN / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    shutil.copytree(PLUGIN / "react_editor_textworld", prefix / "react_editor_textworld",
                    ignore=shutil.ignore_patterns("__pycache__"))
    dist = prefix / f"{meta['name'].replace('-', '_')}-{meta['version']}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {meta['version']}\n")
    groups = meta["entry-points"]
    (dist / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) for group, eps in groups.items()))
    return prefix
