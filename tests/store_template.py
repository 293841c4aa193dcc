"""A migrated empty database made once per test session and copied for each new database a
test opens in this process (not tests). Migrating from nothing runs every migration with its
fsyncs (0.2-0.5 s on a busy machine); copying the finished file takes a millisecond, and the
file is the same bytes the migrations made (they write nothing that depends on time or path).

Only a plain new file is copied: an existing path, `:memory:`, a read-only or `create=False`
open, a Store with a `tracer` (it may want to see the migration), a missing folder, a
leftover `-wal`/`-journal` file or migrations a test has replaced (to make an old database)
all take the Store's own path, as does any copy that fails."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

from sessions import schema
from sessions.store import Store


def _fresh_target(path, kw: dict) -> Path | None:
    """The file to seed from the template, or None when the Store must create it itself."""
    if kw.get("readonly") or not kw.get("create", True) or kw.get("tracer") is not None:
        return None
    if not isinstance(path, (str, os.PathLike)) or str(path) == ":memory:":
        return None
    p = Path(path)
    if os.path.lexists(p) or not p.parent.is_dir():
        return None
    if any(os.path.lexists(f"{p}{side}") for side in ("-wal", "-shm", "-journal")):
        return None
    return p


def _seed(template: Path, target: Path) -> None:
    """Put a copy of `template` at `target` unless something is there by then (another
    thread or process creating it wins: os.link never replaces a file)."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.seed")
    try:
        shutil.copyfile(template, tmp)
        os.link(tmp, target)
    except OSError:
        pass  # taken meanwhile, or a folder we cannot write: the Store decides
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def install(folder: Path) -> Callable[[], None]:
    """Make the template in `folder` and have every new `Store(path)` start from a copy of
    it; returns the function that undoes this."""
    template = folder / "template.db"
    Store(template).close()  # the real migrations, once
    original, migrations = Store.__init__, list(schema.MIGRATIONS)

    def __init__(self, path, *args, **kw):
        same = list(schema.MIGRATIONS) == migrations
        target = _fresh_target(path, kw) if same and not args else None
        if target is not None:
            _seed(template, target)
        original(self, path, *args, **kw)

    Store.__init__ = __init__

    def undo() -> None:
        Store.__init__ = original

    return undo
