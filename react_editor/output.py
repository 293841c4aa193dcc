"""What a command prints: `--json` or text (`emit`), control characters made visible, exact
bytes into a pipe, progress on stderr, and versions as people type them (`EP:N`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable


def version_refs(store: Any) -> Callable[..., str]:
    """`ref(version_id, episode=None) -> "EP:N"`: a version as people read and type it on the
    command line (N its per-episode number, docs/versions.md; the global id stays in --json),
    reading each episode's numbering once."""
    from sessions.numbering import labels, ref_part

    known: dict[int, dict[int, str]] = {}

    def ref(version_id: int, episode: int | None = None) -> str:
        ep = store.versions.get(version_id).episode_id if episode is None else episode
        if ep not in known:
            known[ep] = labels(store, ep)
        return f"{ep}:{ref_part(known[ep][version_id])}"

    return ref


def version_ref(store: Any, version_id: int) -> str:
    """One version as `EP:N` (see `version_refs`)."""
    return version_refs(store)(version_id)


# C0 controls but newline and tab, DEL and the C1 controls: what a terminal would act on;
# and the bidi controls, which reorder what a person reads (a right-to-left override)
_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_CONTROLS = {
    **{c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0)) if chr(c) not in "\n\t"},
    **{c: f"\\u{c:04x}" for c in _BIDI},
}
_JSON_C1 = {c: f"\\u{c:04x}" for c in (*range(0x7F, 0xA0), *_BIDI)}  # json.dumps escapes C0 itself


def visible(text: str) -> str:
    """`text` with control characters shown as `\\xNN`: stored text comes from models and
    imported files, and an escape sequence must not reach the terminal (title, colours, ...)."""
    return text.translate(_CONTROLS)


class VisibleStream:
    """A text stream that writes through `visible` (export to a terminal: an escape
    sequence in an exported thought must not drive it; a pipe or file stays byte-exact)."""

    def __init__(self, stream: Any):
        self.stream = stream

    def write(self, text: str) -> int:
        return self.stream.write(visible(text))

    def flush(self) -> None:
        self.stream.flush()


def write_exact(text: str) -> None:
    """Text whose bytes matter (a prompt as it is sent): exact into a pipe or a file, as
    `export --out -` writes; escaped only on a terminal, which an escape sequence would drive."""
    if sys.stdout.isatty():
        out = visible(text)
        sys.stdout.write(out if out.endswith("\n") else out + "\n")
    else:
        sys.stdout.write(text)
    sys.stdout.flush()


def emit(args: argparse.Namespace, data: Any, text: str | Callable[[], str] | None = None) -> None:
    """Print `data` as JSON with --json, else `text` (or a JSON rendering of data)."""
    if getattr(args, "json", False):
        sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=None).translate(_JSON_C1) + "\n")
    else:
        out = text() if callable(text) else text
        if out is None:
            out = json.dumps(data, ensure_ascii=False, indent=2).translate(_JSON_C1)
        out = visible(out)
        sys.stdout.write(out if out.endswith("\n") else out + "\n")


def progress(msg: str) -> None:
    """Progress goes to stderr so stdout stays machine-readable."""
    sys.stderr.write(visible(msg) + "\n")
    sys.stderr.flush()


def rollout_progress(handle=None) -> Callable[[int, int], None]:
    """Rollout progress for a job (`handle`) and, on a terminal only, as a line on stderr
    (when not watched, stderr stays one line: the error, if any)."""
    show = sys.stderr.isatty()

    def on_progress(done: int, total: int) -> None:
        if handle is not None:
            handle.progress(done=done, total=total)
        if show:
            progress(f"  {done}/{total} rollouts")

    return on_progress
