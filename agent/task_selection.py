"""Which tasks an experiment runs: a source (builtin, official, react), explicit ids (a
comma list or @FILE), a reproducible random subset, or the original notebooks' own subset.

`--sample paper` is the family's (`EnvFamily.paper_sample`): HotpotQA and FEVER shuffle the
dev indices 0..7404 with `random.Random(233)` and take the first 500 (hotpotqa.ipynb,
FEVER.ipynb); ALFWorld runs all 134 `valid_unseen` games (alfworld.ipynb).
"""

from __future__ import annotations

import json
import random
import stat
from pathlib import Path

from envs.base import EnvError
from envs.registry import family
from trajectory.records import Task

SOURCES = ("builtin", "official", "react")  # task sets some family knows (EnvFamily.sources)


def _read_ids(spec: str) -> list[str]:
    if spec.startswith("@"):
        path = Path(spec[1:]).expanduser()
        try:
            if not stat.S_ISREG(path.stat().st_mode):  # a FIFO or device would block or never end
                raise EnvError(f"task list {path} is not a regular file")
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise EnvError(f"cannot read task list {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise EnvError(f"task list {path} is not UTF-8 text") from None
        if text.lstrip().startswith("["):
            try:
                return [str(x).strip() for x in json.loads(text)]
            except ValueError as exc:
                raise EnvError(f"{path}: not a JSON list of task ids ({exc})") from None
        return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return [x.strip() for x in spec.split(",") if x.strip()]


def select_tasks(
    env: str,
    tasks: str = "builtin",
    *,
    source: str | None = None,
    limit: int | None = None,
    sample: str | int | None = None,
    seed: int = 0,
    split: str | None = None,
) -> list[Task]:
    """The experiment's task list, in a stable order. Raises EnvError (one line) for an
    unknown source or id, an empty selection, or a sample larger than the pool."""
    fam = family(env)
    opts = {"split": split} if split else {}
    if tasks is not None and not tasks.strip():
        raise EnvError("the task selection is empty (--tasks needs builtin, official, react, ID,ID,... or @FILE)")
    spec = (tasks or "builtin").strip()
    if spec in SOURCES or spec in fam.sources:
        if spec not in fam.sources:
            raise EnvError(f"{fam.label} has no {spec!r} task set; use {' or '.join(fam.sources)}")
        pool = fam.list_tasks(source=spec, **opts)
        source = spec
    else:
        ids = _read_ids(spec)
        if not ids:
            raise EnvError("the task selection is empty")
        source = source or "builtin"
        known = {t.id: t for t in fam.list_tasks(source=source, **opts)} if fam.ids_by_listing else None
        pool = []
        for i, tid in enumerate(ids, 1):
            try:
                if known is not None and tid not in known:
                    raise EnvError(f"no {env} task {tid!r} in the {source} set")
                pool.append(known[tid] if known is not None else fam.get_task(tid, source=source, **opts))
            except EnvError:
                if not spec.startswith("@"):
                    raise
                # never echo a file's content: `--tasks @/etc/shadow` must not print its lines
                raise EnvError(
                    f"entry {i} of task list {spec[1:]} is not a {env} task id in the {source} set"
                ) from None
    if sample is not None and str(sample) != "":
        pool = _sample(env, pool, sample, seed, source)
    if limit is not None:
        if limit < 1:
            raise EnvError("--limit must be at least 1")
        pool = pool[:limit]
    if not pool:
        raise EnvError("the task selection is empty")
    return pool


def _sample(env: str, pool: list[Task], sample: str | int, seed: int, source: str | None) -> list[Task]:
    if str(sample) == "paper":
        fam = family(env)
        if fam.paper_sample is None:
            raise EnvError(f"{fam.label} has no paper task sample; use --sample N")
        return fam.paper_sample(pool, source)
    try:
        n = int(sample)
    except ValueError:
        raise EnvError(f"--sample takes a number or 'paper', not {sample!r}") from None
    if not 1 <= n <= len(pool):
        raise EnvError(f"--sample {n}: the selection has {len(pool)} tasks")
    chosen = sorted(random.Random(seed).sample(range(len(pool)), n))
    return [pool[i] for i in chosen]


def task_finder(source: str):
    """`find_task(env, text)` for `import --source`: the dataset task whose question or
    claim is `text` (whitespace-insensitive), read once per environment; None if unknown."""
    if source not in SOURCES:
        raise EnvError(f"unknown task source {source!r}; use one of {', '.join(SOURCES)}")
    by_env: dict[str, dict[str, Task]] = {}

    def find(env: str, text: str) -> Task | None:
        if family(env).qa is None:  # only text-answer tasks have a dataset answer to look up
            return None
        if env not in by_env:
            by_env[env] = {" ".join(t.text.split()): t for t in family(env).list_tasks(source=source)}
        return by_env[env].get(" ".join(text.split()))

    return find
