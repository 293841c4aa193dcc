"""Download the official dev sets (`react-editor data hotpotqa|fever`).

HotpotQA: hotpot_dev_distractor_v1.json (or the fullwiki variant) from the HotpotQA
authors' server; FEVER: paper_dev.jsonl (the split ReAct evaluates on; or
shared_task_dev.jsonl) from fever.ai. Files land in <data dir>/<name>/ (default
~/.cache/react-editor/data, or $REACT_EDITOR_DATA), written to a .part file, checked to
parse, then renamed - an interrupted download never leaves a broken file behind.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

import httpx

from envs.base import EnvError

BASE_URLS = {
    "hotpotqa": "http://curtis.ml.cmu.edu/datasets/hotpot/",
    "fever": "https://fever.ai/download/fever/",
}
FILES = {
    "hotpotqa": {"distractor": "hotpot_dev_distractor_v1.json", "fullwiki": "hotpot_dev_fullwiki_v1.json"},
    "fever": {"paper_dev": "paper_dev.jsonl", "shared_task_dev": "shared_task_dev.jsonl"},
}
DEFAULT_VARIANT = {"hotpotqa": "distractor", "fever": "paper_dev"}


def _check(name: str, path: Path) -> int:
    """Parse the downloaded file; return its number of records."""
    try:
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
        raise EnvError(f"downloaded {name} file is not valid ({exc}); nothing was saved") from None


def download(name: str, dest: Path | None = None, progress: Callable[[str], None] = print,
             base_url: str | None = None, variant: str | None = None, force: bool = False,
             timeout: float = 60.0) -> Path:
    """Fetch the official `name` dev set into `dest` (a directory); return the file path."""
    from envs.wikipedia.tasks import data_dir

    if name not in FILES:
        raise EnvError(f"unknown dataset {name!r}; use hotpotqa or fever")
    variant = variant or DEFAULT_VARIANT[name]
    if variant not in FILES[name]:
        raise EnvError(f"unknown {name} variant {variant!r}; use one of {', '.join(FILES[name])}")
    filename = FILES[name][variant]
    folder = Path(dest).expanduser() if dest else data_dir() / name
    target = folder / filename
    if target.is_file() and not force:
        progress(f"{target} already present")
        return target
    url = (base_url or BASE_URLS[name]).rstrip("/") + "/" + filename
    folder.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")
    progress(f"downloading {url}")
    try:
        with httpx.stream("GET", url, timeout=timeout, follow_redirects=True,
                          headers={"User-Agent": "react-editor/0.1 (dataset download)"}) as r:
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
        count = _check(name, part)
        part.replace(target)
    except httpx.HTTPError as exc:
        raise EnvError(f"download of {url} failed: {type(exc).__name__}: {exc}") from None
    finally:
        part.unlink(missing_ok=True)
    progress(f"saved {count} records to {target}")
    return target
