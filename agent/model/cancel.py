"""Stop: the watcher that ends a request in flight at once when its caller's Stop is set.

The wire (`agent.model.wire`) opens every connection through `WatchedBackend`, an httpcore
network backend (httpcore's documented `network_backend=` extension point), whose streams note
which thread is blocked on them. One watcher thread of the process looks at the Stop of every
request in flight and shuts down the socket of each one whose Stop is set: a wait for the
answer (or for the next streamed token) ends at once and the server sees the connection
closed. A connection still being opened for a request with a Stop is opened in a thread of
its own, so Stop also ends a wait for DNS or a TCP handshake. A streamed answer is also
closed through the SDK's response (`close()`) at the next chunk after Stop."""

from __future__ import annotations

import concurrent.futures
import os
import socket
import threading
from typing import Any, Callable

from agent.model.api import Cancelled

CANCEL_POLL_S = 0.05  # how often the requests in flight have their Stop looked at

_READING: dict[int, "WatchedStream"] = {}  # thread -> the connection it is blocked on (sending or waiting)
_WATCHED: dict[int, threading.Event] = {}  # thread -> the Stop of its request in flight
_LOCK = threading.Lock()
_WAKE = threading.Condition(_LOCK)  # the watcher sleeps on it while no request is watched
IDLE = [False, 0]  # [the watcher sleeps until woken, requests watched since its last look]
_WATCHER: list[int] = []  # the pid whose watcher thread runs
_get_ident = threading.get_ident


class WatchedStream:
    """A connection (an httpcore network stream) noting which thread is blocked on it: Stop
    shuts that socket down (`shutdown` wakes a blocked recv, `close` does not)."""

    __slots__ = ("_inner", "get_extra_info", "close")

    def __init__(self, inner: Any):
        self._inner = inner
        self.get_extra_info = inner.get_extra_info
        self.close = inner.close

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        """The inner stream's read, with this thread noted as reading (a Stop shuts it down)."""
        me = _get_ident()
        _READING[me] = self
        try:
            return self._inner.read(max_bytes, timeout)
        finally:
            with _LOCK:  # not shut down once this thread has left it (another may take it)
                del _READING[me]

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        """The inner stream's write, with this thread noted as writing (a Stop shuts it down)."""
        me = _get_ident()
        _READING[me] = self
        try:
            return self._inner.write(buffer, timeout)
        finally:
            with _LOCK:
                del _READING[me]

    def start_tls(self, *args: Any, **kwargs: Any) -> "WatchedStream":
        """The TLS stream over this one, watched too."""
        return WatchedStream(self._inner.start_tls(*args, **kwargs))

    def abort(self) -> None:
        """Shut the socket down both ways, so a blocked read or write returns at once (never raises)."""
        sock = self._inner.get_extra_info("socket")
        try:
            socket.socket.shutdown(sock, socket.SHUT_RDWR)  # (the plain socket's, also under TLS)
        except (OSError, TypeError):  # already closed, or not a socket
            pass


class WatchedBackend:
    """An httpcore network backend (`inner`: httpcore's `SyncBackend`) whose connections are
    `WatchedStream`s."""

    def __init__(self, inner: Any):
        self._inner = inner

    def connect_tcp(self, *args: Any, **kwargs: Any) -> WatchedStream:
        """A watched TCP stream; with a Stop pending, one that Stop can also abandon while connecting."""
        return WatchedStream(_connect(self._inner.connect_tcp, *args, **kwargs))

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> WatchedStream:
        """As `connect_tcp`, over a Unix socket."""
        return WatchedStream(_connect(self._inner.connect_unix_socket, *args, **kwargs))

    def sleep(self, seconds: float) -> None:
        """The inner backend's sleep."""
        self._inner.sleep(seconds)


def _connect(connect: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Open a connection; for a request with a Stop, in a thread of its own, so that Stop also
    ends a wait for DNS or a TCP handshake: the request is given up at once, and the
    connection, should it still come, is closed."""
    cancel = _WATCHED.get(_get_ident())
    if cancel is None:
        return connect(*args, **kwargs)
    done: concurrent.futures.Future = concurrent.futures.Future()

    def run() -> None:
        try:
            done.set_result(connect(*args, **kwargs))
        except BaseException as exc:  # (handed to the waiting thread)
            done.set_exception(exc)

    threading.Thread(target=run, daemon=True, name="model-call-connect").start()
    while not cancel.is_set():
        try:
            return done.result(CANCEL_POLL_S)
        except concurrent.futures.TimeoutError:
            continue
    done.add_done_callback(lambda f: f.exception() is None and f.result().close())
    raise Cancelled("cancelled while the request was in flight")


def _watch() -> None:
    """The watcher thread: shuts down the connection of each request whose Stop is set; after
    a look with no request watched nor started since the last one, sleeps until one wakes it."""
    with _LOCK:
        while True:
            if not _WATCHED and not IDLE[1]:
                IDLE[0] = True
                while IDLE[0]:
                    _WAKE.wait()
            IDLE[1] = 0
            _WAKE.wait(CANCEL_POLL_S)  # (the lock is free meanwhile)
            for thread, cancel in _WATCHED.items():
                stream = _READING.get(thread) if cancel.is_set() else None
                if stream is not None:
                    stream.abort()


class Watched:
    """`with Watched(cancel):` around one request in this thread: a set `cancel` shuts its
    connection down (the request then fails; the caller reports it as `Cancelled`)."""

    __slots__ = ("cancel", "me")

    def __init__(self, cancel: threading.Event | None):
        self.cancel = cancel

    def __enter__(self) -> "Watched":
        if self.cancel is None:
            return self
        self.me = me = _get_ident()
        with _LOCK:
            IDLE[1] += 1
            if IDLE[0]:
                IDLE[0] = False
                _WAKE.notify()
            _WATCHED[me] = self.cancel
            if _WATCHER != [os.getpid()]:
                _WATCHER[:] = [os.getpid()]
                threading.Thread(target=_watch, daemon=True, name="model-call-stops").start()
        if self.cancel.is_set():
            self.__exit__()
            raise Cancelled("cancelled before the request was sent")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.cancel is not None:
            with _LOCK:
                _WATCHED.pop(self.me, None)
