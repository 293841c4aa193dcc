"""What the project imports, it declares (issue 26, item 2): every module of every package
imports in a fresh interpreter, and every third-party package imported at the top of a
name is a dependency in pyproject.toml with a lower bound (an undeclared import - `httpx2`
was one - fails on a machine that resolved the declared ones differently)."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("trajectory", "envs", "sessions", "agent", "react_editor", "app_pages")


def _sources() -> list[Path]:
    return [ROOT / "app.py", *(p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py")))]


def _top_level_imports(path: Path) -> set[str]:
    """The first name of every absolute import in a file (at any depth of the file)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> dict[str, str]:
    """pyproject's dependencies: normalised distribution name -> its requirement."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {_norm(re.split(r"[<>=!~;\[ ]", d, maxsplit=1)[0]): d for d in deps}


def test_every_third_party_import_is_declared_with_a_lower_bound():
    ours = set(PACKAGES) | {"app"}
    dists = metadata.packages_distributions()
    declared = _declared()
    missing = {}
    for path in _sources():
        for name in _top_level_imports(path) - ours - set(sys.stdlib_module_names):
            if not {_norm(d) for d in dists.get(name, [name])} & set(declared):
                missing.setdefault(name, str(path.relative_to(ROOT)))
    assert missing == {}, f"imported but not declared in pyproject.toml: {missing}"
    unbounded = [req for req in declared.values() if not re.search(r">=|==|~=", req)]
    assert unbounded == [], f"declared without a lower bound: {unbounded}"


def test_every_module_of_the_project_imports():
    """In a fresh interpreter (nothing imported before it), every module, one after the other.
    Scripts - `__main__` modules and the app's page scripts (app.py runs them with
    `st.Page`) - are compiled, not run; their imports are checked by the test above."""
    pages = {f"app_pages.{name}" for name in re.findall(r'PAGES / "(\w+)\.py"', (ROOT / "app.py").read_text())}
    assert "app_pages.editor" in pages
    for name in pages:
        compile((ROOT / (name.replace(".", "/") + ".py")).read_text(encoding="utf-8"), name, "exec")
    script = (
        "import importlib, json, pkgutil, sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "failed = {}\n"
        f"for pkg in {list(PACKAGES)!r}:\n"
        "    mod = importlib.import_module(pkg)\n"
        "    names = [pkg] + [m.name for m in pkgutil.walk_packages(mod.__path__, pkg + '.')\n"
        f"                     if not m.name.endswith('.__main__') and m.name not in {sorted(pages)!r}]\n"
        "    for name in names:\n"
        "        try:\n"
        "            importlib.import_module(name)\n"
        "        except Exception as exc:\n"
        "            failed[name] = f'{type(exc).__name__}: {exc}'\n"
        "print(json.dumps(failed))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {}
