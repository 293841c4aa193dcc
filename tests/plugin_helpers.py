"""The TextWorld plugin installed into a folder as `pip install --target` would, for tests that
load it through its entry point without a network."""

from __future__ import annotations

import importlib
import shutil
import sys
import tomllib
from contextlib import contextmanager
from pathlib import Path

PLUGIN = Path(__file__).resolve().parents[1] / "plugins" / "react-editor-textworld"


def install_plugin(prefix: Path) -> Path:
    """The plugin's package plus `<name>-<version>.dist-info` (METADATA, entry_points.txt)
    from its pyproject.toml - what `pip install --target prefix` writes, without a network."""
    meta = tomllib.loads((PLUGIN / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    shutil.copytree(
        PLUGIN / "react_editor_textworld",
        prefix / "react_editor_textworld",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    dist = prefix / f"{meta['name'].replace('-', '_')}-{meta['version']}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {meta['version']}\n")
    groups = meta["entry-points"]
    (dist / "entry_points.txt").write_text(
        "".join(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) for group, eps in groups.items())
    )
    return prefix


@contextmanager
def plugin_loaded(site: Path):
    """The plugin installed at `site` found through its entry point in this process, as in a
    `react-editor` started with `site` on PYTHONPATH (for tests that need one such process, not
    one per command); afterwards the process is as before: no path, no module, no family."""
    from agent.exemplars import builtin_prompt_dict
    from envs import registry

    def forget() -> None:
        registry._plugins.cache_clear()
        builtin_prompt_dict.cache_clear()
        for ep in registry.entry_points(group=registry.ENTRY_POINT_GROUP):
            registry._FAMILIES.pop(ep.name, None)
        for name in [m for m in sys.modules if m.startswith("react_editor_textworld")]:
            del sys.modules[name]

    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    forget()
    try:
        yield
    finally:
        forget()
        sys.path.remove(str(site))
        importlib.invalidate_caches()
        registry._plugins.cache_clear()
