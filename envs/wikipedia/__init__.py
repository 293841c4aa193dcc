"""The paper's Wikipedia API (search / lookup / finish) for HotpotQA and FEVER, over a
live MediaWiki wiki, a Kiwix ZIM file, or the built-in sample ZIM (the default).

Defines the `hotpotqa` and `fever` families (7 steps each, as the notebooks) (`FAMILIES`, found by `envs.registry`). Episode option
`wiki`: None / "builtin", "live" (with `wiki_url`), or "zim:/path/file.zim".
"""

from __future__ import annotations

import random
import re
import threading
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envs.base import QA, TEXT_METHODS, BlobStore, CustomField, EnvError, EnvFamily, Metric, Option
from envs.wikipedia import tasks
from envs.wikipedia.paths import PROMPTS_FILES
from envs.wikipedia.scoring import FEVER_LABELS, normalize_answer
from envs.wikipedia.transcript import TRANSCRIPTS
from trajectory.records import Task

if TYPE_CHECKING:
    from envs.wikipedia.env import WikiEnv

# Both notebooks loop `for i in range(1, 8)`: 7 steps (the CoT-SC back-off threshold of the
# paper, 5 on FEVER, is the family's `qa.backoff_steps`).
DEFAULT_MAX_STEPS = {"hotpotqa": 7, "fever": 7}
PAPER_SEED = 233
PAPER_POOL = 7405  # the notebooks shuffle range(7405)
PAPER_N = 500
_ZIM_CACHE: dict[str, Any] = {}
_ZIM_LOCK = threading.Lock()
_BUILTIN_KEYS: dict[str, str] = {}  # a built-in ZIM's path -> its resolved path (the _ZIM_CACHE key)


def open_backend(options: dict | None = None):
    """The backend an episode's options name. ZIM archives are opened once per process
    (libzim readers are thread-safe); live backends get their own HTTP client."""
    from envs.wikipedia.live import DEFAULT_API, LiveBackend
    from envs.wikipedia.zim import ZimBackend

    options = options or {}
    wiki = options.get("wiki") or "builtin"
    if wiki == "live":
        return LiveBackend(options.get("wiki_url") or DEFAULT_API, timeout=float(options.get("wiki_timeout") or 10.0))
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
    known = _BUILTIN_KEYS.get(str(path)) if name == "builtin" else None  # (a built-in ZIM's name holds its
    key = known or str(Path(path).resolve())  # content's hash: its resolved path is worked out once)
    if name == "builtin" and known is None:
        _BUILTIN_KEYS[str(path)] = key
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
    roots = (tasks.data_dir().resolve(), Path(CORPUS_DIR).resolve())
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


def make_env(
    kind: str, task: Task | None = None, options: dict | None = None, blobs: BlobStore | None = None
) -> "WikiEnv":
    from envs.wikipedia.env import WikiEnv  # on use: the command line's start-up stays light

    options = options or {}
    env = WikiEnv(
        kind,
        open_backend(options),
        blobs,
        default_max_steps=DEFAULT_MAX_STEPS[kind],
        friendly_lookup=bool(options.get("friendly_lookup")),
    )
    if task is not None:
        env.reset(task)
    return env


def _success(reward: float, info: dict) -> bool:
    """FEVER: the label is correct; HotpotQA: exact match (the paper's scores)."""
    if "correct" in info:
        return bool(info["correct"])
    if "em" in info:
        return bool(info["em"])
    return reward > 0


def _sample_paper(kind: str, pool: list[Task], source: str | None) -> list[Task]:
    """The notebooks shuffle the dev indices 0..7404 with `random.Random(233)` and take 500."""
    if len(pool) < PAPER_POOL:
        raise EnvError(
            f"--sample paper draws from the {PAPER_POOL} {kind} dev tasks; this selection has "
            f"{len(pool)} (use --tasks react or official)"
        )
    idxs = list(range(PAPER_POOL))
    random.Random(PAPER_SEED).shuffle(idxs)
    return [pool[i] for i in idxs[:PAPER_N]]


def _download(kind: str, dest: Path | None = None, **kw) -> Path:
    from envs.wikipedia import datasets

    return datasets.download_react(dest, **kw) if kind == "react" else datasets.download(kind, dest, **kw)


def _register_cli(sub, helpers) -> None:
    from envs.wikipedia.cli import register

    register(sub, helpers)


_WIKI_ACTION = re.compile(r"^(search|lookup|finish)\[.*\]$", re.IGNORECASE | re.DOTALL)


def _action_warning(action: str, admissible=None) -> str | None:
    a = action.strip()
    if not a or _WIKI_ACTION.match(a):
        return None
    return f"'{a}' does not parse: a Wikipedia action is Search[entity], Lookup[keyword] or Finish[answer]."


_OPTIONS = (
    Option("wiki", "--wiki", "Wikipedia backend: builtin (default), live, zim:PATH"),
    Option("wiki_url", "--wiki-url", "MediaWiki API URL for --wiki live", url_name="the MediaWiki API URL"),
    Option(
        "friendly_lookup",
        "--friendly-lookup",
        "lookup before any search explains itself (the original says 'No more results.')",
        switch=True,
    ),
)
_DISPLAY = {
    "hotpotqa": dict(
        label="HotpotQA",
        task_types=(("bridge", "bridge"), ("comparison", "comparison")),
        metrics=(Metric("em", "EM", "em"), Metric("f1", "F1", "f1")),
        results_caption="HotpotQA: exact match and F1 % (paper layout, as Table 1)",
        qa=QA(normalize_answer, 6, backoff_steps=7),
        custom_fields=(
            CustomField("question", "Question"),
            CustomField("answer", "Gold answer / label (optional)", False),
        ),
    ),
    "fever": dict(
        label="FEVER",
        task_types=tuple((x, x) for x in FEVER_LABELS),
        metrics=(Metric("accuracy", "Acc"),),
        results_caption="FEVER: accuracy % (paper layout, as Table 1)",
        qa=QA(normalize_answer, 3, backoff_steps=5),
        custom_fields=(
            CustomField("question", "Claim"),
            CustomField("answer", "Gold answer / label (optional)", False),
        ),
    ),
}
FAMILIES = {
    kind: EnvFamily(
        kind=kind,
        list_tasks=partial(tasks.list_tasks, kind),
        get_task=partial(tasks.get_task, kind),
        make_env=partial(make_env, kind),
        default_max_steps=DEFAULT_MAX_STEPS[kind],
        custom_task=partial(tasks.custom_task, kind),
        exemplars_file=PROMPTS_FILES[kind],
        references=external_references,
        transcript=TRANSCRIPTS[kind],
        success=_success,
        results_by_type=False,
        methods=TEXT_METHODS,
        sources=("builtin", "official", "react"),
        paper_sample=partial(_sample_paper, kind),
        options=_OPTIONS,
        action_warning=_action_warning,
        action_hint="Search[...], Lookup[...] or Finish[...]",
        cli=_register_cli,
        downloads={kind: partial(_download, kind), "react": partial(_download, "react")},
        **_DISPLAY[kind],
    )
    for kind in ("hotpotqa", "fever")
}
