"""A lean HTTP/1.1 transport for the official `openai` client, for plain-http model servers.

A vLLM/SGLang cluster on a private network answers hundreds of requests a second over
plain http. There the default transport (httpcore + h11, in Python) costs about as much
CPU per request as the rest of the client. This one writes the same request on one
keep-alive socket per thread (a request in flight owns its connection, as a pooled one
would) and reads the answer in a few lines of its own. The official client still builds,
authenticates, times out and classifies every request: only the wire under it changes.
`openai_http_client` decides where it applies: http:// endpoints with no proxy configured
(https, proxies and `REACT_EDITOR_HTTP=httpx` keep the SDK's own transport).
"""

from __future__ import annotations

import os
import select
import socket
import threading
from typing import Any
from urllib.parse import urlsplit

import httpx2
import openai

PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")  # compared lower-cased


def applies(base_url: str) -> bool:
    """The lean transport is used for plain http endpoints with no proxy in the environment."""
    if os.environ.get("REACT_EDITOR_HTTP", "").lower() == "httpx":
        return False
    if any(v and k.lower() in PROXY_VARIABLES for k, v in os.environ.items()):  # any case, as urllib reads them
        return False
    try:
        return urlsplit(base_url).scheme == "http"
    except ValueError:
        return False


def openai_http_client(base_url: str) -> Any:
    """The `http_client` to hand `openai.OpenAI` for this endpoint (None: the SDK's own)."""
    if not applies(base_url):
        return None
    return openai.DefaultHttpxClient(transport=PlainHTTPTransport())


class PlainHTTPTransport(httpx2.BaseTransport):
    """HTTP/1.1 over a socket, one keep-alive connection per (thread, host, port). Errors
    are httpx's own (ConnectError, ConnectTimeout, ReadTimeout, WriteTimeout,
    RemoteProtocolError), so the openai client turns them into APIConnectionError /
    APITimeoutError as it does for its own transport."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: dict[_Connection, threading.Thread] = {}  # every open connection and its thread

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        if url.scheme != "http":
            raise httpx2.UnsupportedProtocol(f"this transport speaks plain http, not {url.scheme}", request=request)
        timeout = request.extensions.get("timeout") or {}
        body = request.read()  # (a streamed body is read whole and sent with its length)
        head = [request.method.encode("ascii"), b" ", url.raw_path, b" HTTP/1.1\r\n"]
        for key, value in request.headers.raw:
            if key.lower() not in (b"transfer-encoding", b"content-length"):
                head += [key, b": ", value, b"\r\n"]
        if body or request.method not in ("GET", "HEAD"):
            head.append(b"content-length: %d\r\n" % len(body))
        head.append(b"\r\n")
        payload = b"".join(head) + body
        conn = self._connection(url.host, url.port or 80, timeout.get("connect"), request)
        try:
            conn.sock.settimeout(timeout.get("write"))
            try:
                conn.sock.sendall(payload)
            except socket.timeout as exc:
                raise httpx2.WriteTimeout(f"timed out sending the request: {exc}", request=request) from exc
            conn.sock.settimeout(timeout.get("read"))
            try:
                status, reason, headers, body, keep = _read_response(conn.rfile, request.method == "HEAD")
            except socket.timeout as exc:
                raise httpx2.ReadTimeout(f"timed out waiting for the answer: {exc}", request=request) from exc
        except httpx2.TransportError:
            self._drop(conn)
            raise
        except (OSError, ValueError, _ProtocolError) as exc:
            self._drop(conn)
            raise httpx2.RemoteProtocolError(f"{type(exc).__name__}: {exc}", request=request) from exc
        if not keep:
            self._drop(conn)
        return httpx2.Response(status, headers=headers, stream=httpx2.ByteStream(body),
                               extensions={"http_version": b"HTTP/1.1", "reason_phrase": reason})

    def _connection(self, host: str, port: int, connect_s: float | None, request: httpx2.Request) -> "_Connection":
        """This thread's open connection to host:port, or a new one (a kept one the server
        closed meanwhile is seen before it is used: no request is ever sent twice)."""
        conns: dict[tuple[str, int], _Connection] = self._local.__dict__.setdefault("conns", {})
        conn = conns.get((host, port))
        if conn is not None and _readable(conn.sock):
            self._drop(conn)
            conn = None
        if conn is None:
            try:
                sock = socket.create_connection((host, port), timeout=connect_s)
            except socket.timeout as exc:
                raise httpx2.ConnectTimeout(f"timed out connecting to {host}:{port}", request=request) from exc
            except OSError as exc:
                raise httpx2.ConnectError(f"{type(exc).__name__}: {exc}", request=request) from exc
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = conns[(host, port)] = _Connection(sock, sock.makefile("rb"))
            with self._lock:
                ended = [c for c, t in self._open.items() if not t.is_alive()]
                for c in ended:  # a thread that ended (an app's step job) leaves no socket behind
                    del self._open[c]
                self._open[conn] = threading.current_thread()
            for c in ended:
                c.close()
        return conn

    def _drop(self, conn: "_Connection") -> None:
        conns = self._local.__dict__.get("conns", {})
        for key, kept in list(conns.items()):
            if kept is conn:
                del conns[key]
        with self._lock:
            self._open.pop(conn, None)
        conn.close()

    def close(self) -> None:
        with self._lock:
            conns, self._open = list(self._open), {}
        for conn in conns:
            conn.close()


class _Connection:
    def __init__(self, sock: socket.socket, rfile: Any):
        self.sock, self.rfile = sock, rfile

    def close(self) -> None:
        for part in (self.rfile, self.sock):
            try:
                part.close()
            except OSError:
                pass


class _ProtocolError(Exception):
    """The server's answer is not HTTP/1.x as this transport reads it."""


MAX_LINE = 65536
MAX_HEADERS = 200


def _read_response(rfile: Any, head_only: bool = False) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes, bool]:
    """(status, reason, headers, body, keep the connection?) of one HTTP/1.x answer
    (interim 1xx answers skipped; a body by Content-Length, chunks, or up to the close)."""
    while True:
        line = rfile.readline(MAX_LINE + 1)
        if not line:
            raise _ProtocolError("the server closed the connection without answering")
        parts = line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise _ProtocolError(f"not an HTTP status line: {line[:80]!r}")
        version, status = parts[0], int(parts[1])
        reason = parts[2].strip() if len(parts) > 2 else b""
        headers = _read_headers(rfile)
        if not (100 <= status < 200):
            break
    fields = {k.lower(): v for k, v in headers}
    connection = fields.get(b"connection", b"").lower()
    keep = b"close" not in connection if version == b"HTTP/1.1" else b"keep-alive" in connection
    if head_only or status in (204, 304):
        body = b""
    elif b"chunked" in fields.get(b"transfer-encoding", b"").lower():
        body = _read_chunked(rfile)
    elif b"content-length" in fields:
        n = int(fields[b"content-length"])
        body = rfile.read(n)
        if len(body) != n:
            raise _ProtocolError(f"the answer was cut short ({len(body)} of {n} bytes)")
    else:
        body, keep = rfile.read(), False
    return status, reason, headers, body, keep


def _read_headers(rfile: Any) -> list[tuple[bytes, bytes]]:
    headers = []
    while True:
        line = rfile.readline(MAX_LINE + 1)
        if line in (b"\r\n", b"\n"):
            return headers
        if not line:
            raise _ProtocolError("the server closed the connection in the middle of the headers")
        if len(line) > MAX_LINE or len(headers) >= MAX_HEADERS:
            raise _ProtocolError("the answer's headers are too long")
        key, sep, value = line.partition(b":")
        if not sep:
            raise _ProtocolError(f"not a header line: {line[:80]!r}")
        headers.append((key.strip(), value.strip()))


def _read_chunked(rfile: Any) -> bytes:
    parts = []
    while True:
        size_line = rfile.readline(MAX_LINE + 1)
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise _ProtocolError(f"not a chunk size: {size_line[:40]!r}") from None
        if size == 0:
            _read_headers(rfile)  # trailers
            return b"".join(parts)
        chunk = rfile.read(size)
        if len(chunk) != size or rfile.read(2) != b"\r\n":
            raise _ProtocolError("a chunk was cut short")
        parts.append(chunk)


def _readable(sock: socket.socket) -> bool:
    """An idle keep-alive socket with something to read was closed (or broken) by the server.
    (poll, not select: select cannot watch a descriptor numbered 1024 or more.)"""
    try:
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            return bool(poller.poll(0))
        ready, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(ready)
