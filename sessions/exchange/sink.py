"""Where an export writes: a file (written to a temporary file renamed over the target at
the end, so a failed export leaves no half file), '-' for stdout, or an open text stream;
and `ExportError`, the one-line error every export raises."""

from __future__ import annotations

import io
import os
import stat
import tempfile
from pathlib import Path
from typing import IO

from sessions.store import StoreError


class ExportError(StoreError, ValueError):
    pass


class _Sink:
    """A path (written to a temp file, renamed at the end), '-' or an open text stream.

    Only a regular file (or nothing) at the path is replaced: a symlink, FIFO or device
    there is refused, never swapped for our file. The new file gets the mode a plain
    `open()` would (0666 minus the umask), not mkstemp's 0600."""

    def __init__(self, out: str | os.PathLike[str] | IO[str]):
        self.tmp: str | None = None
        self.path = "-"
        if isinstance(out, (str, os.PathLike)) and str(out) != "-":
            target = Path(out)
            try:
                _check_target(target)
                _check_folder(target)
                fd, self.tmp = tempfile.mkstemp(prefix=".export-", dir=str(target.parent))
            except (OSError, ValueError) as exc:
                raise ExportError(f"cannot write {_shown(target)}: {getattr(exc, 'strerror', None) or exc}") from None
            self.f: IO[str] = io.open(fd, "w", encoding="utf-8", newline="")
            self.path = str(target)
        elif isinstance(out, (str, os.PathLike)):
            import sys

            self.f = sys.stdout
        else:
            self.f = out
        self.bytes = 0

    def write(self, text: str) -> None:
        try:
            self.f.write(text)
        except OSError as exc:  # disk full, ...
            raise ExportError(f"cannot write {_shown(Path(self.path))}: {exc.strerror or exc}") from None
        self.bytes += len(text) if text.isascii() else len(text.encode("utf-8"))

    def write_bytes(self, data: bytes) -> None:
        """UTF-8 text already encoded (a second process's lines): past the text layer when
        the stream has one."""
        buf = getattr(self.f, "buffer", None)
        try:
            if buf is None:
                self.f.write(data.decode("utf-8"))
            else:
                self.f.flush()
                buf.write(data)
        except OSError as exc:  # disk full, ...
            raise ExportError(f"cannot write {_shown(Path(self.path))}: {exc.strerror or exc}") from None
        self.bytes += len(data)

    def close(self, ok: bool) -> None:
        if self.tmp is None:
            self.f.flush()
            return
        try:
            self.f.close()
            if ok:
                os.chmod(self.tmp, 0o666 & ~_umask())
                _check_target(Path(self.path))  # still nothing but a regular file there
                os.replace(self.tmp, self.path)
                return
        except OSError as exc:
            raise ExportError(f"cannot write {_shown(Path(self.path))}: {exc.strerror or exc}") from None
        finally:
            if os.path.lexists(self.tmp):
                os.unlink(self.tmp)


def _check_target(target: Path) -> None:
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        raise ExportError(f"{_shown(target)} is a directory; give a file path")
    if not stat.S_ISREG(st.st_mode):
        raise ExportError(
            f"{_shown(target)} is not a regular file (a symlink, FIFO or device); "
            "refusing to replace it - give another path, or '-' for stdout"
        )


def _check_folder(target: Path) -> None:
    """The folder must exist (a typo makes no tree of folders) and be reached without a
    symbolic link among the parts typed (`link_to_etc/x.jsonl` would write into /etc)."""
    parent = target.parent
    for part in (parent, *parent.parents):
        if str(part) in ("", ".", "/"):
            continue
        if part.is_symlink():
            raise ExportError(f"{_shown(part)} is a symbolic link; give the folder it points to")
    if not parent.is_dir():
        raise ExportError(f"no folder {_shown(parent)}; create it first")


def _umask() -> int:
    """The process umask, read without changing it where Linux shows it (threads share it)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _shown(p: Path) -> str:
    return repr(str(p))[1:-1]  # a path with control characters or NUL stays one line
