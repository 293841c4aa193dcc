"""Download the official dev sets (`react-editor data hotpotqa|fever`) and the ReAct
release's prompt and data files (`react-editor data react`).

HotpotQA: hotpot_dev_distractor_v1.json (or the fullwiki variant) from the HotpotQA
authors' server; FEVER: paper_dev.jsonl (the split ReAct evaluates on; or
shared_task_dev.jsonl) from fever.ai. Files land in <data dir>/<name>/ (default
~/.cache/react-editor/data, or $REACT_EDITOR_DATA), written to a .part file, checked to
parse, then renamed - an interrupted download never leaves a broken file behind. The ReAct
files keep the repository's layout under <data dir>/react/ (data/..., prompts/...), where
`tasks.react_dir` and the prompt readers look by default.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

import httpx

from envs.base import EnvError

BASE_URLS = {"hotpotqa": "http://curtis.ml.cmu.edu/datasets/hotpot/", "fever": "https://fever.ai/download/fever/"}
FILES = {
    "hotpotqa": {"distractor": "hotpot_dev_distractor_v1.json", "fullwiki": "hotpot_dev_fullwiki_v1.json"},
    "fever": {"paper_dev": "paper_dev.jsonl", "shared_task_dev": "shared_task_dev.jsonl"},
}
DEFAULT_VARIANT = {"hotpotqa": "distractor", "fever": "paper_dev"}
REACT_RELEASE_URL = "https://raw.githubusercontent.com/ysymyth/ReAct/master/"
REACT_RELEASE = {  # path in the repository -> what it must parse as
    "data/hotpot_dev_v1_simplified.json": "hotpotqa",
    "data/paper_dev.jsonl": "fever",
    "prompts/alfworld_3prompts.json": "prompts",
    "prompts/fever.json": "prompts",
    "prompts/prompts_naive.json": "prompts",
}


def _check(name: str, path: Path) -> int:
    """Parse the downloaded file; return its number of records."""
    try:
        if name == "prompts":
            prompts = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(prompts, dict) or not all(isinstance(v, str) for v in prompts.values()):
                raise ValueError("not a ReAct prompt file (a JSON object of prompt texts)")
            return len(prompts)
        if name == "hotpotqa":
            rows = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(rows, list) or (rows and not {"question", "answer"} <= set(rows[0])):
                raise ValueError("not a list of HotpotQA questions")
            return len(rows)
        n = 0
        with path.open(encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    if n == 0 and not {"claim", "label"} <= set(row):
                        raise ValueError("not FEVER claims")
                    n += 1
        return n
    except (ValueError, UnicodeDecodeError) as exc:
        raise EnvError(
            f"downloaded {name} file {path.name.removesuffix('.part')} is not valid ({exc}); nothing was saved"
        ) from None


def download(
    name: str,
    dest: Path | None = None,
    progress: Callable[[str], None] = print,
    base_url: str | None = None,
    variant: str | None = None,
    force: bool = False,
    timeout: float = 60.0,
) -> Path:
    """Fetch the official `name` dev set into `dest` (a directory); return the file path."""
    from envs.wikipedia.tasks import data_dir

    if name not in FILES:
        raise EnvError(f"unknown dataset {name!r}; use hotpotqa or fever")
    variant = variant or DEFAULT_VARIANT[name]
    if variant not in FILES[name]:
        raise EnvError(f"unknown {name} variant {variant!r}; use one of {', '.join(FILES[name])}")
    filename = FILES[name][variant]
    folder = Path(dest).expanduser() if dest else data_dir() / name
    url = (base_url or BASE_URLS[name]).rstrip("/") + "/" + filename
    return _fetch(url, folder / filename, name, progress, timeout, force)


def download_react(
    dest: Path | None = None,
    progress: Callable[[str], None] = print,
    base_url: str | None = None,
    force: bool = False,
    timeout: float = 60.0,
) -> Path:
    """Fetch the ReAct release's data and prompt files into `dest` (default <data dir>/react),
    in the repository's layout; return that folder."""
    from envs.wikipedia.tasks import data_dir

    root = Path(dest).expanduser() if dest else data_dir() / "react"
    base = (base_url or REACT_RELEASE_URL).rstrip("/") + "/"
    for rel, kind in REACT_RELEASE.items():
        _fetch(base + rel, root / rel, kind, progress, timeout, force)
    return root


def _fetch(url: str, target: Path, kind: str, progress: Callable[[str], None], timeout: float, force: bool) -> Path:
    """Download `url` to `target` through a .part file that must parse as `kind` first
    (nothing to do when `target` is there already, unless `force`)."""
    if target.is_file() and not force:
        progress(f"{target} already present")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")
    progress(f"downloading {url}")
    try:
        with httpx.stream(
            "GET",
            url,
            timeout=timeout,
            follow_redirects=True,
            headers={"User-Agent": "react-editor/0.1 (dataset download)"},
        ) as r:
            if r.status_code != 200:
                raise EnvError(f"download of {url} failed: HTTP {r.status_code}")
            total = int(r.headers.get("Content-Length") or 0)
            done, last = 0, 0.0
            with part.open("wb") as f:
                for chunk in r.iter_bytes(1 << 20):
                    f.write(chunk)
                    done += len(chunk)
                    now = time.monotonic()
                    if now - last > 1.0:
                        last = now
                        pct = f" ({100 * done // total}%)" if total else ""
                        progress(f"  {done / 1e6:.1f} MB{pct}")
        count = _check(kind, part)
        part.replace(target)
    except httpx.HTTPError as exc:
        raise EnvError(f"download of {url} failed: {type(exc).__name__}: {exc}") from None
    finally:
        part.unlink(missing_ok=True)
    progress(f"saved {count} records to {target}")
    return target
