"""Issue 39 #6: a plugin installed while the app runs (`pip install -e plugins/...`) shows from
the next page load on: the site folder's new .pth file is read as the interpreter reads it at
start (the editable install's path, or its import hook) and the entry points are read again."""

from __future__ import annotations

import importlib
import site
import sys
import tomllib

import pytest

from envs import registry
from tests.plugin_helpers import PLUGIN

META = tomllib.loads((PLUGIN / "pyproject.toml").read_text(encoding="utf-8"))["project"]
STEM = f"{META['name'].replace('-', '_')}-{META['version']}"
FINDER = f"__editable___{STEM.replace('-', '_').replace('.', '_')}_finder"

# What setuptools' editable install puts in site-packages when it cannot add a plain path:
# a .pth whose import line installs a finder that maps the package to its source folder.
FINDER_SOURCE = """
import importlib.abc, importlib.util, sys
MAPPING = {"react_editor_textworld": %r}

class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname in MAPPING:
            return importlib.util.spec_from_file_location(
                fullname, MAPPING[fullname] + "/__init__.py", submodule_search_locations=[MAPPING[fullname]])
        return None

def install():
    if not any(type(f).__name__ == "_Finder" and f.__module__ == __name__ for f in sys.meta_path):
        sys.meta_path.append(_Finder())
"""


@pytest.fixture
def site_dir(tmp_path):
    """An empty site folder of this process (as site-packages is), known to the registry before
    anything is installed in it; afterwards the process is as before."""
    d = tmp_path / "site-packages"
    d.mkdir()
    known = site.getsitepackages
    site.getsitepackages = lambda: [str(d), *known()]
    path, meta_path = list(sys.path), list(sys.meta_path)
    sys.path.insert(0, str(d))
    try:
        registry.refresh()  # the folder is seen, empty
        assert "textworld" not in registry.kinds()
        yield d
    finally:
        site.getsitepackages = known
        sys.path[:], sys.meta_path[:] = path, meta_path
        for name in [m for m in sys.modules if m.startswith(("react_editor_textworld", "__editable__"))]:
            del sys.modules[name]
        registry._FAMILIES.pop("textworld", None)
        registry._FROM_PLUGINS.discard("textworld")
        importlib.invalidate_caches()
        registry.refresh()


def install_editable(d, how: str) -> None:
    """`pip install -e plugins/react-editor-textworld` into `d`: the dist-info with the entry
    point, and a .pth that makes the source folder importable (a path, or an import hook)."""
    dist = d / f"{STEM}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {META['name']}\nVersion: {META['version']}\n")
    (dist / "entry_points.txt").write_text(
        "".join(f"[{g}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) for g, eps in META["entry-points"].items())
    )
    pth = d / f"__editable__.{STEM}.pth"
    if how == "path":
        pth.write_text(f"{PLUGIN}\n")
    else:
        (d / f"{FINDER}.py").write_text(FINDER_SOURCE % str(PLUGIN / "react_editor_textworld"))
        pth.write_text(f"import {FINDER}; {FINDER}.install()\n")


@pytest.mark.parametrize("how", ["path", "hook"])
def test_a_plugin_installed_while_the_process_runs_is_found_at_the_next_refresh(site_dir, how):
    install_editable(site_dir, how)
    assert "textworld" not in registry.kinds()  # nothing looks before the next page load
    assert registry.refresh() is True
    assert "textworld" in registry.kinds()
    fam = registry.family("textworld")  # its package imports from the source folder
    assert fam.kind == "textworld" and sys.modules["react_editor_textworld"].__file__.startswith(str(PLUGIN))
    assert registry.refresh() is False  # nothing new: nothing read again
    # uninstalled: gone at the next look
    for f in site_dir.iterdir():
        if f.is_dir():
            for g in f.iterdir():
                g.unlink()
            f.rmdir()
        else:
            f.unlink()
    assert registry.refresh() is True and "textworld" not in registry.kinds()


def test_the_app_shows_a_plugin_installed_while_it_runs_at_the_next_page_load(site_dir, app):
    toy, make = app
    at = make()
    assert "textworld" not in at.selectbox(key="new_env").options
    install_editable(site_dir, "path")
    at.run()
    assert not at.exception, at.exception
    assert "textworld" in at.selectbox(key="new_env").options
