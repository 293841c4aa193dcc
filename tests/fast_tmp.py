"""Where the test session keeps its temporary files (not tests).

Every durable commit of a Store fsyncs (`pragma synchronous = full`); on a virtual disk that
is ~10-15 ms each, and a test commits tens of times. A test cannot observe an fsync (only a
power cut can), so the session's `tmp_path`s go to a RAM file system when the machine has
one with room, where an fsync returns at once. Everything else about the files is the same."""

from __future__ import annotations

import os

SHM = "/dev/shm"
MIN_FREE = 2 << 30  # bytes: a whole run writes ~400 MB; a small (container) /dev/shm is passed over


def _is_tmpfs(path: str) -> bool:
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            return any(line.split()[1:3] == [path, "tmpfs"] for line in mounts if len(line.split()) > 2)
    except OSError:
        return False


def ram_temp_root(environ=os.environ) -> str | None:
    """/dev/shm when it is a writable tmpfs with MIN_FREE bytes free and nobody chose a
    temporary folder (TMPDIR, PYTEST_DEBUG_TEMPROOT); else None (the usual temp folder)."""
    if environ.get("TMPDIR") or environ.get("PYTEST_DEBUG_TEMPROOT"):
        return None
    if not os.path.isdir(SHM) or not os.access(SHM, os.W_OK | os.X_OK) or not _is_tmpfs(SHM):
        return None
    st = os.statvfs(SHM)
    return SHM if st.f_bavail * st.f_frsize >= MIN_FREE else None
