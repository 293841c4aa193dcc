"""The model client's HTTP transport: libcurl (`pycurl`, maintained, C) under the official
`openai` client's own httpx client, in place of the SDK's pure-Python httpcore/h11 stack.

The SDK still builds every request and reads every answer (auth, headers, errors, status
codes, retries off, redirects, gzip): only the bytes on the wire go through libcurl, in place of
httpcore and h11 (the largest CPU share per call in a profile). Measured side by side on a busy
machine: the SDK's `post` on it costs 0.57-0.69x the CPU per call of the same on the SDK's
transport; our whole call (`benchmarks/client.py`, `ours` / `old`) 0.53-0.77x.

What the SDK's transport gave is kept:
- connections reused: a pool of curl handles per client, each keeping its one connection;
- timeouts: the connect timeout for the handshake, the read timeout for the whole request
  (a model's answer comes at once, so that is the wait for it); curl's timeout raises the
  same `TimeoutException` the SDK turns into `APITimeoutError`;
- errors: each curl error becomes the httpx error the SDK classifies (`ConnectError` for a
  refused, unresolvable or TLS-failing endpoint, `RemoteProtocolError` for a hang-up, ...);
- TLS: the certificates of `SSL_CERT_FILE` / `SSL_CERT_DIR`, else the system's, as the SDK's;
- Stop: a request's sockets are noted (`SOCKOPTFUNCTION`/`CLOSESOCKETFUNCTION`), so Stop can
  shut them down (`CurlStop.abort`: a waiting recv or a pending handshake ends at once), and
  curl's progress callback gives up a request still resolving its host name.
Proxies from the environment are not handled here: with one set, `agent.client` keeps the
SDK's own transport (which honours them and NO_PROXY exactly as before).
`REACT_EDITOR_HTTP=sdk` chooses the SDK's transport always (README).
"""

from __future__ import annotations

import io
import os
import socket
import ssl
import threading
from typing import Any, Callable

PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")  # (any case) what httpx reads from the environment
MAX_IDLE_HANDLES = 64  # curl handles (each with its connection) kept per client between requests

try:  # (optional: without it the SDK's own transport is used)
    import pycurl
except ImportError:  # pragma: no cover - pycurl ships wheels for the platforms we run on
    pycurl = None


def available() -> bool:
    return pycurl is not None


def proxies_in_environment() -> bool:
    """Does the environment name a proxy (as httpx would read it)? Then the SDK's transport
    is used, which honours it."""
    return any(os.environ.get(name) or os.environ.get(name.upper()) for name in PROXY_VARIABLES)


def _ca_options() -> list[tuple[int, str]]:
    """The certificates to trust, as the SDK's transport picks them: `SSL_CERT_FILE`, else
    `SSL_CERT_DIR`, else the system's default paths."""
    if os.environ.get("SSL_CERT_FILE"):
        return [(pycurl.CAINFO, os.environ["SSL_CERT_FILE"])]
    if os.environ.get("SSL_CERT_DIR"):
        return [(pycurl.CAPATH, os.environ["SSL_CERT_DIR"])]
    paths = ssl.get_default_verify_paths()
    found = [(pycurl.CAINFO, paths.openssl_cafile)] if os.path.isfile(paths.openssl_cafile) else []
    if os.path.isdir(paths.openssl_capath):
        found.append((pycurl.CAPATH, paths.openssl_capath))
    return found  # (none: libcurl's own default)


class CurlStop:
    """The sockets of one curl handle (its connection, or a handshake under way) and a flag
    its progress callback reads: `abort()` (the Stop watcher's) shuts the sockets down - a
    blocked wait ends at once and the server sees the connection closed - and makes curl give
    the request up at its next progress call (a host name still being resolved)."""

    __slots__ = ("fds", "lock", "stopped")

    def __init__(self) -> None:
        self.fds: set[int] = set()
        self.lock = threading.Lock()
        self.stopped = False

    def opened(self, fd: int, purpose: int) -> int:
        with self.lock:
            self.fds.add(fd)
        return pycurl.SOCKOPT_OK

    def closing(self, fd: int) -> int:
        with self.lock:  # (not shut down by a Stop once curl has let go of it)
            self.fds.discard(fd)
            os.close(fd)
        return 0

    def progress(self, *_: int) -> int:
        return 1 if self.stopped else 0  # (non-zero: curl ends the transfer, "aborted by callback")

    def abort(self) -> None:
        self.stopped = True
        with self.lock:
            for fd in self.fds:
                try:
                    with socket.socket(fileno=os.dup(fd)) as sock:
                        sock.shutdown(socket.SHUT_RDWR)
                except OSError:  # already closed, or not connected yet
                    pass


class _Handle:
    """One curl handle, set up once, with its `CurlStop` and buffers."""

    __slots__ = ("curl", "stop", "body", "head")

    def __init__(self, ca: list[tuple[int, str]]):
        self.curl = c = pycurl.Curl()
        self.stop = CurlStop()
        self.body = io.BytesIO()
        self.head: list[bytes] = []
        for option, value in (
            (pycurl.NOSIGNAL, 1),  # (threads: no SIGALRM for timeouts)
            (pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1),  # (as the SDK's transport)
            (pycurl.PROXY, ""),  # (no proxy of the environment: see proxies_in_environment)
            (pycurl.MAXCONNECTS, 1),  # (one connection a handle: the one Stop shuts down)
            (pycurl.FOLLOWLOCATION, 0),  # (the SDK's httpx client follows redirects itself)
            (pycurl.NOPROGRESS, 0),
            (pycurl.XFERINFOFUNCTION, self.stop.progress),
            (pycurl.SOCKOPTFUNCTION, self.stop.opened),
            (pycurl.CLOSESOCKETFUNCTION, self.stop.closing),
            (pycurl.WRITEFUNCTION, self.body.write),
            (pycurl.HEADERFUNCTION, self.head.append),
            *ca,
        ):
            c.setopt(option, value)

    def reset(self) -> None:
        self.body.seek(0)
        self.body.truncate()
        self.head.clear()
        self.stop.stopped = False


_SKIPPED = frozenset({b"host", b"content-length", b"connection", b"transfer-encoding"})  # (curl writes its own)


def transport_for(httpx_module: Any, on_start: Callable[[CurlStop], None],
                  on_end: Callable[[], None]) -> Any:
    """A `httpx_module.BaseTransport` (httpx or httpx2: whichever the SDK's client is) on
    libcurl. `on_start(stop)` / `on_end()` are called around each request in its thread (the
    Stop watcher's registration, `agent.client`)."""
    errors = _error_map(httpx_module)

    class CurlTransport(httpx_module.BaseTransport):
        def __init__(self) -> None:
            self._idle: list[_Handle] = []
            self._lock = threading.Lock()
            self._ca = _ca_options()

        def handle_request(self, request: Any) -> Any:
            with self._lock:
                handle = self._idle.pop() if self._idle else None
            if handle is None:
                handle = _Handle(self._ca)
            try:
                status, head, body = _perform(handle, request, on_start, on_end, errors, httpx_module)
            except BaseException:
                handle.curl.close()  # (its connection's state is unknown)
                raise
            with self._lock:
                if len(self._idle) < MAX_IDLE_HANDLES:
                    self._idle.append(handle)
                    handle = None
            if handle is not None:
                handle.curl.close()
            return httpx_module.Response(status, headers=head, stream=httpx_module.ByteStream(body),
                                         extensions={"http_version": b"HTTP/1.1"})

        def close(self) -> None:
            with self._lock:
                idle, self._idle = self._idle, []
            for handle in idle:
                handle.curl.close()

    return CurlTransport()


def _perform(handle: _Handle, request: Any, on_start: Callable[[CurlStop], None], on_end: Callable[[], None],
             errors: dict[int, Any], httpx_module: Any) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Send `request` on `handle`: (status, headers, body) of the final answer."""
    c = handle.curl
    handle.reset()
    timeout = request.extensions.get("timeout") or {}
    method = request.method
    c.setopt(pycurl.URL, str(request.url))
    c.setopt(pycurl.CUSTOMREQUEST, method)
    c.setopt(pycurl.NOBODY, method == "HEAD")
    if method in ("GET", "HEAD"):
        c.setopt(pycurl.HTTPGET, 1)
    else:
        c.setopt(pycurl.POSTFIELDS, request.read())
    c.setopt(pycurl.HTTPHEADER, [k + b": " + v for k, v in request.headers.raw if k.lower() not in _SKIPPED]
             + [b"Expect:"])  # (no 100-continue wait for a large body)
    c.setopt(pycurl.CONNECTTIMEOUT_MS, _ms(timeout.get("connect")))
    c.setopt(pycurl.TIMEOUT_MS, _ms(timeout.get("read")))
    on_start(handle.stop)
    try:
        c.perform()
    except pycurl.error as exc:
        code, message = exc.args
        kind = errors.get(code, httpx_module.TransportError)
        if code == 28 and not c.getinfo(pycurl.CONNECT_TIME):
            kind = httpx_module.ConnectTimeout
        raise kind(f"{message} (curl error {code})", request=request) from None
    finally:
        on_end()
    return c.getinfo(pycurl.RESPONSE_CODE), _headers(handle.head), handle.body.getvalue()


def _ms(seconds: float | None) -> int:
    return 0 if seconds is None else max(1, int(seconds * 1000))  # (0: no limit)


def _headers(lines: list[bytes]) -> list[tuple[bytes, bytes]]:
    """The final answer's headers from curl's header lines (an interim answer's are dropped)."""
    start = max((i for i, line in enumerate(lines) if line.startswith(b"HTTP/")), default=-1) + 1
    pairs = []
    for line in lines[start:]:
        name, sep, value = line.partition(b":")
        if sep:
            pairs.append((name.strip(), value.strip()))
    return pairs


def _error_map(httpx_module: Any) -> dict[int, Any]:
    """curl's error codes (libcurl's CURLcode numbers, stable) -> the httpx exception the SDK
    classifies (a connection error, a timeout)."""
    h = httpx_module
    return {
        1: h.UnsupportedProtocol, 3: h.UnsupportedProtocol,  # unsupported protocol, malformed URL
        5: h.ProxyError, 6: h.ConnectError, 7: h.ConnectError,  # proxy / host not resolved, refused
        35: h.ConnectError, 60: h.ConnectError, 77: h.ConnectError,  # TLS handshake, certificate, CA file
        28: h.ReadTimeout, 42: h.ReadError,  # timed out, aborted by the progress callback (Stop)
        8: h.RemoteProtocolError, 18: h.RemoteProtocolError, 52: h.RemoteProtocolError,  # weird reply, cut, none
        55: h.WriteError, 56: h.ReadError,  # send / recv failed (a Stop's shutdown, a reset)
    }
