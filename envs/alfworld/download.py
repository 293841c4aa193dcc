"""`react-editor data alfworld`: what `alfworld-download` does, for the text games only.

Downloads the json, pddl and tw-pddl archives of the alfworld release into the data
directory and unzips them (the MaskRCNN detector is not needed for text games), then copies
the logic files. `ALFWORLD_DOWNLOAD_BASE` (or `base_url=`) points at a mirror; tests use a
server on 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import tempfile
import zipfile
from pathlib import Path

BASE_URL = "https://github.com/alfworld/alfworld/releases/download"
ARCHIVES = ("0.2.2/json_2.1.1_json.zip", "0.2.2/json_2.1.1_pddl.zip", "0.4.0/json_2.1.2_tw-pddl.zip")


def _fetch(url: str, dest: Path, progress) -> None:
    import httpx

    tmp = dest.with_suffix(dest.suffix + ".part")
    with httpx.stream("GET", url, follow_redirects=True, timeout=60.0) as r:
        if r.status_code != 200:
            from envs.base import EnvError

            raise EnvError(f"download failed: {url} answered HTTP {r.status_code}")
        total = int(r.headers.get("content-length") or 0)
        done = 0
        with open(tmp, "wb") as fh:
            for chunk in r.iter_bytes(1 << 20):
                fh.write(chunk)
                done += len(chunk)
        progress(
            f"downloaded {url.rsplit('/', 1)[-1]} ({done // 1024} KiB{'' if not total else f' of {total // 1024}'})"
        )
    os.replace(tmp, dest)


def download_official(dest: Path, progress=print, base_url: str | None = None, force: bool = False) -> Path:
    """Fetch and unzip the official games into `dest` (the future $ALFWORLD_DATA); returns
    `dest/json_2.1.1`."""
    from alfworld.info import ALFRED_PDDL_PATH, ALFRED_TWL2_PATH

    base = (base_url or os.environ.get("ALFWORLD_DOWNLOAD_BASE") or BASE_URL).rstrip("/")
    dest = Path(dest).expanduser()
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="alfworld-dl-") as tmpdir:
        for rel in ARCHIVES:
            zpath = Path(tmpdir) / rel.rsplit("/", 1)[-1]
            _fetch(f"{base}/{rel}", zpath, progress)
            try:
                with zipfile.ZipFile(zpath) as zf:
                    names = zf.namelist()
                    for name in names:
                        target = (dest / name).resolve()
                        if not str(target).startswith(str(dest.resolve())):
                            raise zipfile.BadZipFile(f"unsafe path {name}")
                        if force or not target.exists():
                            zf.extract(name, dest)
            except zipfile.BadZipFile as exc:
                from envs.base import EnvError

                raise EnvError(f"corrupt archive {zpath.name}: {exc}") from None
            progress(f"unpacked {zpath.name} ({len(names)} files)")
    logic = dest / "logic"
    logic.mkdir(exist_ok=True)
    for src in (ALFRED_PDDL_PATH, ALFRED_TWL2_PATH):
        if force or not (logic / Path(src).name).exists():
            shutil.copy(src, logic / Path(src).name)
    return dest / "json_2.1.1"
