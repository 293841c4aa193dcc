"""The model layer uses the `openai` client's public API only (issue 38): no project file names
a private module or attribute of the SDK (`openai._models`, `client._client`, `_prepare_url`,
...), so an SDK release that renames its internals cannot break every model call. The private
names are read from the installed SDK itself, plus the instance attributes it keeps."""

from __future__ import annotations

import re
from pathlib import Path

import openai

ROOT = Path(__file__).resolve().parents[2]
INSTANCE = {
    "_client",
    "_custom_headers",
    "_custom_query",
    "_strict_response_validation",
    "_platform",
    "_limits",
    "_transport",
    "_mounts",
    "_pool",
    "_network_backend",
    "_base_url",
    "_options",
}
SKIP = {".git", "__pycache__", ".venv", "venv", "node_modules", "build"}


def _private_names() -> set[str]:
    import openai.resources.chat.completions as chat
    import openai.resources.completions as completions

    names = set(INSTANCE)
    for cls in (openai.OpenAI, openai.Stream, completions.Completions, chat.Completions, openai.DefaultHttpxClient):
        for c in cls.__mro__:
            if c.__module__.split(".")[0] in ("openai", "httpx", "httpx2"):
                names |= {n for n in vars(c) if n.startswith("_") and not n.startswith("__")}
    return names


def _project_files() -> list[Path]:
    return [p for p in ROOT.rglob("*.py") if not SKIP & set(p.relative_to(ROOT).parts)]


def _own_names(files: list[Path]) -> set[str]:
    """Underscore names the project defines itself (`def _request`, `self._request = ...`): a
    use of one of those is the project's own (an SDK release may have a method of that name)."""
    own = re.compile(r"\bdef\s+(_\w+)|\bself\.(_\w+)\s*(?::[^=\n]*)?=[^=]|^\s+(_\w+)\s*(?::[^=\n]*)?=[^=]", re.M)
    names: set[str] = set()
    for path in files:
        for found in own.finditer(path.read_text(encoding="utf-8", errors="replace")):
            names.add(next(g for g in found.groups() if g))
    return names - INSTANCE


def test_no_project_file_names_a_private_sdk_module_or_attribute():
    files = _project_files()
    module = re.compile(r"\bopenai(\.\w+)*\._\w+|from\s+openai(\.\w+)*\s+import\s+[^\n]*\b_\w+")
    names = _private_names() - _own_names(files)
    attribute = re.compile(r"\.(%s)\b" % "|".join(map(re.escape, sorted(names, key=len, reverse=True))))
    here = Path(__file__).resolve()
    hits = []
    for path in files:
        if path == here:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            code = line.split("#", 1)[0]
            found = module.search(code) or attribute.search(code)
            if found:
                hits.append(f"{path.relative_to(ROOT)}:{n}: {found.group(0)}")
    assert hits == [], "private SDK names:\n" + "\n".join(hits)


def test_the_scan_finds_what_the_old_client_named():
    """The scan is not blind: the private names the libcurl-era client used are caught."""
    attribute = re.compile(r"\.(%s)\b" % "|".join(map(re.escape, sorted(_private_names()))))
    module = re.compile(r"\bopenai(\.\w+)*\._\w+")
    for old in ("options = openai._models.FinalRequestOptions", "openai._types.Omit()"):
        assert module.search(old), old
    for old in ("str(self.client._prepare_url(path))", "type(client._client)", "http._transport._pool"):
        assert attribute.search(old), old
