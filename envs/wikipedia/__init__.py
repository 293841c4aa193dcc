"""The paper's Wikipedia API (search / lookup / finish) for HotpotQA and FEVER, over a
live MediaWiki wiki, a Kiwix ZIM file, or the built-in sample ZIM (the default).

Defines the `hotpotqa` (7 steps) and `fever` (5 steps) families (`FAMILIES`, found by `envs.registry`). Episode option
`wiki`: None / "builtin", "live" (with `wiki_url`), or "zim:/path/file.zim".
"""

from __future__ import annotations

import threading
from functools import partial
from pathlib import Path
from typing import Any

from envs.base import BlobStore, EnvError, EnvFamily
from envs.wikipedia import tasks as _tasks
from envs.wikipedia.env import WikiEnv
from envs.wikipedia.paths import PROMPTS_FILES
from trajectory.records import Task

# Both notebooks loop `for i in range(1, 8)`: 7 steps (the CoT-SC back-off threshold of the
# paper, 5 on FEVER, lives with the methods).
DEFAULT_MAX_STEPS = {"hotpotqa": 7, "fever": 7}
_ZIM_CACHE: dict[str, Any] = {}
_ZIM_LOCK = threading.Lock()


def open_backend(options: dict | None = None):
    """The backend an episode's options name. ZIM archives are opened once per process
    (libzim readers are thread-safe); live backends get their own HTTP client."""
    from envs.wikipedia.live import DEFAULT_API, LiveBackend
    from envs.wikipedia.zim import ZimBackend

    options = options or {}
    wiki = options.get("wiki") or "builtin"
    if wiki == "live":
        return LiveBackend(options.get("wiki_url") or DEFAULT_API,
                           timeout=float(options.get("wiki_timeout") or 10.0))
    if wiki == "builtin":
        from envs.wikipedia.builtin import builtin_zim

        path = builtin_zim(options.get("corpus_dir"))
        name = "builtin"
    elif isinstance(wiki, str) and wiki.startswith("zim:"):
        path = Path(wiki[4:]).expanduser()
        name = f"zim:{path}"
        if not wiki[4:].strip():
            raise EnvError("option wiki='zim:' needs a file path, e.g. zim:/data/wikipedia_en_all_nopic.zim")
    else:
        raise EnvError(f"unknown wiki backend {wiki!r}; use builtin, live, or zim:/path/file.zim")
    key = str(Path(path).resolve())
    with _ZIM_LOCK:
        backend = _ZIM_CACHE.get(key)
        if backend is None:
            backend = _ZIM_CACHE[key] = ZimBackend(path, name=name)
    return _Shared(backend)


def external_references(task: Task | None = None, options: dict | None = None) -> list[str]:
    """The ZIM file, corpus folder or wiki URL the options point at outside the configured
    data (REACT_EDITOR_DATA, the built-in corpus, the default Wikipedia API): an imported
    episode opens them only once a person confirms."""
    from envs.wikipedia.builtin import CORPUS_DIR
    from envs.wikipedia.live import DEFAULT_API

    options = options or {}
    roots = (_tasks.data_dir().resolve(), Path(CORPUS_DIR).resolve())
    wiki = options.get("wiki") or "builtin"
    refs = []
    if wiki == "live" and options.get("wiki_url") not in (None, "", DEFAULT_API):
        refs.append(str(options["wiki_url"]))
    paths = [wiki[4:]] if isinstance(wiki, str) and wiki.startswith("zim:") else []
    paths += [str(options["corpus_dir"])] if options.get("corpus_dir") else []
    for raw in paths:
        p = Path(raw).expanduser().resolve()
        if not any(p.is_relative_to(r) for r in roots):
            refs.append(str(p))
    return refs


class _Shared:
    """A shared ZIM backend whose close() leaves the cached archive open."""

    def __init__(self, inner):
        self._inner = inner
        self.name = inner.name

    def search(self, entity):
        return self._inner.search(entity)

    def close(self) -> None:
        pass


def make_env(kind: str, task: Task | None = None, options: dict | None = None,
             blobs: BlobStore | None = None) -> WikiEnv:
    options = options or {}
    env = WikiEnv(kind, open_backend(options), blobs, default_max_steps=DEFAULT_MAX_STEPS[kind],
                  friendly_lookup=bool(options.get("friendly_lookup")))
    if task is not None:
        env.reset(task)
    return env


FAMILIES = {
    kind: EnvFamily(
        kind=kind,
        list_tasks=partial(_tasks.list_tasks, kind),
        get_task=partial(_tasks.get_task, kind),
        make_env=partial(make_env, kind),
        default_max_steps=DEFAULT_MAX_STEPS[kind],
        custom_task=partial(_tasks.custom_task, kind),
        exemplars_file=PROMPTS_FILES[kind],
        references=external_references,
    )
    for kind in ("hotpotqa", "fever")
}
