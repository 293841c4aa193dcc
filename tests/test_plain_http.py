"""agent.plain_http under the REAL `openai` client, against tiny servers on 127.0.0.1.

Every request goes through `openai.OpenAI` (or `agent.client.ModelClient`) with the lean
transport underneath, so what is proven is what the runner gets: the SDK's parsing, its
exception classes and ModelClient's error texts, on top of this transport's wire handling.
`RawServer` is a raw-socket HTTP/1.1 server written here so that each test controls the
bytes on the wire, counts TCP connections, and sees every request the client sent.
"""

from __future__ import annotations

import gzip
import json
import os
import select
import socket
import threading
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import httpx2
import openai
import pytest

from agent import plain_http
from agent.client import ModelClient, ModelError, shared_openai
from agent.plain_http import PlainHTTPTransport
from tests.scripted_server import Reply, ScriptedLLM
from trajectory.records import AgentConfig

KEY = "sk-plain-http-test-7c1d"
MODEL = "plain-model"
WAIT_S = 10.0  # a deadline for the server side to catch up, never a measurement
ENV_NAMES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
             "Http_Proxy", "Https_Proxy", "All_Proxy", "NO_PROXY", "no_proxy",
             "REACT_EDITOR_HTTP", "OPENAI_BASE_URL", "OPENAI_API_KEY", "REQUEST_METHOD")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy, transport switch or OpenAI variable of the outer environment leaks in."""
    for name in list(os.environ):
        if name.lower().endswith("_proxy") or name in ENV_NAMES:
            monkeypatch.delenv(name, raising=False)


# -- a tiny raw-socket HTTP/1.1 server ----------------------------------------------------

@dataclass
class Seen:
    """One request as the server read it off the wire."""

    conn: int  # which accepted TCP connection (0, 1, ... in accept order)
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def prompt(self) -> str:
        return self.json()["prompt"]


@dataclass
class Answer:
    """What the server does with one request: send `data`, then
    keep        read the next request on the same connection;
    close       close the connection;
    linger      answer nothing more on it, but keep it open until the client hangs up
                (a request the client still sends on it is recorded in `late`);
    half-close  shut down the server's sending side (the client sees EOF), then as linger."""

    data: bytes = b""
    then: str = "keep"


class RawServer:
    """Accept loop in a daemon thread, one daemon thread per connection, 127.0.0.1 port 0."""

    def __init__(self, respond: Callable[[Seen], Answer]):
        self.respond = respond
        self.seen: list[Seen] = []
        self.late: list[Seen] = []  # requests sent on a connection the server had ended
        self.accepted = 0
        self.hung_up: set[int] = set()  # connections the client closed
        self.ended: set[int] = set()  # connections the server stopped answering on
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._socks: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port = self._listener.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._accept_loop, daemon=True,
                                        name=f"raw-http-{self.port}")
        self._thread.start()

    # -- test side ---------------------------------------------------------------------
    def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Until the server's state satisfies `predicate` (a deadline, not a timing assert)."""
        with self._cond:
            assert self._cond.wait_for(predicate, timeout=WAIT_S), "server state never reached"

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)
        self._listener.close()
        with self._cond:
            socks = list(self._socks)
        for s in socks:  # wakes any connection thread blocked in recv
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    # -- server side -------------------------------------------------------------------
    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                sock, _ = self._listener.accept()
            except (socket.timeout, OSError):
                continue
            with self._cond:
                n = self.accepted
                self.accepted += 1
                self._socks.append(sock)
                self._cond.notify_all()
            threading.Thread(target=self._serve, args=(sock, n), daemon=True).start()

    def _note(self, what: set[int] | list[Seen], item: Any) -> None:
        with self._cond:
            if isinstance(what, set):
                what.add(item)
            else:
                what.append(item)
            self._cond.notify_all()

    def _serve(self, sock: socket.socket, n: int) -> None:
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rfile = sock.makefile("rb")
        try:
            while True:
                req = _read_request(rfile, n)
                if req is None:
                    self._note(self.hung_up, n)
                    return
                self._note(self.seen, req)
                answer = self.respond(req)
                if answer.data:
                    sock.sendall(answer.data)
                if answer.then == "keep":
                    continue
                if answer.then == "close":
                    self._note(self.ended, n)
                    return
                if answer.then == "half-close":
                    sock.shutdown(socket.SHUT_WR)
                self._note(self.ended, n)
                late = _read_request(rfile, n)  # EOF from the client, or a request it should not send
                if late is None:
                    self._note(self.hung_up, n)
                else:
                    self._note(self.late, late)
                return
        except (OSError, ValueError):
            return
        finally:
            rfile.close()
            sock.close()


def _read_request(rfile: Any, conn: int) -> Seen | None:
    line = rfile.readline(65537)
    if not line:
        return None
    method, path, _version = line.decode("latin-1").split(" ", 2)
    headers: dict[str, str] = {}
    while True:
        h = rfile.readline(65537)
        if h in (b"\r\n", b"\n", b""):
            break
        k, _, v = h.decode("latin-1").partition(":")
        assert k.lower() not in headers, f"header {k} sent twice"
        headers[k.strip().lower()] = v.strip()
    body = rfile.read(int(headers.get("content-length", "0")))
    return Seen(conn, method, path, headers, body)


@pytest.fixture
def raw_server() -> Iterator[Callable[[Callable[[Seen], Answer]], RawServer]]:
    """`raw_server(respond)` starts a RawServer; all of them are stopped after the test."""
    servers: list[RawServer] = []

    def start(respond: Callable[[Seen], Answer]) -> RawServer:
        servers.append(RawServer(respond))
        return servers[-1]

    yield start
    for s in servers:
        s.stop()


@pytest.fixture
def lean() -> Iterator[Callable[..., openai.OpenAI]]:
    """`lean(base_url, timeout=...)`: the real openai client on the lean transport."""
    clients: list[openai.OpenAI] = []

    def make(base_url: str, timeout: float = 10.0) -> openai.OpenAI:
        http_client = plain_http.openai_http_client(base_url)
        assert isinstance(http_client._transport, PlainHTTPTransport)
        clients.append(openai.OpenAI(api_key=KEY, base_url=base_url, http_client=http_client,
                                     max_retries=0, timeout=timeout))
        return clients[-1]

    yield make
    for c in clients:
        c.close()


# -- answers --------------------------------------------------------------------------------

def completion(text: str) -> dict[str, Any]:
    """A fixed completion body (no ids or clocks): equal answers compare equal."""
    return {"id": "cmpl-fixed", "object": "text_completion", "created": 1700000000, "model": MODEL,
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}


def http(status: int = 200, body: bytes = b"", *, headers: list[tuple[str, str]] | None = None,
         version: str = "HTTP/1.1", reason: str = "OK", length: bool = True) -> bytes:
    """The bytes of one answer; with `length`, a Content-Length header for `body`."""
    lines = [f"{version} {status} {reason}", "Content-Type: application/json"]
    if length:
        lines.append(f"Content-Length: {len(body)}")
    lines += [f"{k}: {v}" for k, v in headers or []]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def chunked(data: bytes, size: int) -> bytes:
    """`data` in chunks of `size` bytes (with a chunk extension), a last chunk and a trailer."""
    out = b""
    for i in range(0, len(data), size):
        part = data[i:i + size]
        out += f"{len(part):x};ext=1\r\n".encode() + part + b"\r\n"
    return out + b"0\r\nX-Trailer: yes\r\n\r\n"


def echo(text: str) -> str:
    return f"echo: {text}"


def echo_json(req: Seen) -> bytes:
    return json.dumps(completion(echo(req.prompt)), ensure_ascii=False).encode()


def keep_alive_echo(req: Seen) -> Answer:
    return Answer(http(200, echo_json(req)))


def ask(client: openai.OpenAI, prompt: str) -> Any:
    """One completion request as ModelClient sends it: the JSON body, the raw JSON answer."""
    return client.post("/completions", body={"model": MODEL, "prompt": prompt}, cast_to=object)


def error_json(status: int, message: str) -> bytes:
    kind = "rate_limit_exceeded" if status == 429 else "server_error"
    return json.dumps({"error": {"message": message, "type": kind, "param": None,
                                 "code": kind}}).encode()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed when we leave: nothing listens there


# -- 1. where the lean transport applies ------------------------------------------------------

HTTP_URL = "http://10.0.0.7:8000/v1"


def test_plain_http_url_gets_the_lean_transport():
    """An http:// endpoint with a clean environment gets an httpx client on PlainHTTPTransport,
    and shared_openai (the runner's way in) builds its openai client on it."""
    assert plain_http.applies(HTTP_URL)
    assert plain_http.applies("HTTP://127.0.0.1:9/v1")
    client = plain_http.openai_http_client(HTTP_URL)
    assert isinstance(client, httpx2.Client)
    assert isinstance(client._transport, PlainHTTPTransport)
    built = shared_openai("k", f"http://127.0.0.1:{closed_port()}/v1", 7.5)
    assert isinstance(built._client._transport, PlainHTTPTransport)


@pytest.mark.parametrize("url", ["https://api.openai.com/v1", "https://10.0.0.7:8443/v1",
                                 "ftp://10.0.0.7/v1", "10.0.0.7:8000/v1", "", "http://[::1"])
def test_other_schemes_keep_the_sdk_transport(url: str):
    """https (and anything that is not a plain http URL) gets None: the SDK's own transport."""
    assert plain_http.applies(url) is False
    assert plain_http.openai_http_client(url) is None


def test_https_endpoint_through_shared_openai_is_not_lean():
    """shared_openai for an https endpoint leaves the SDK's default transport in place."""
    built = shared_openai("k", "https://127.0.0.1:1/v1", 7.25)
    assert not isinstance(built._client._transport, PlainHTTPTransport)


PROXY_NAMES = [
    "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
    "Http_Proxy", "All_Proxy",  # urllib (and so httpx) reads them in any case
]


@pytest.mark.parametrize("name", PROXY_NAMES)
def test_a_proxy_variable_keeps_the_sdk_transport(monkeypatch: pytest.MonkeyPatch, name: str):
    """With any proxy variable set, the SDK's transport (which honours proxies) is kept."""
    assert plain_http.openai_http_client(HTTP_URL) is not None  # clean environment: lean
    monkeypatch.setenv(name, "http://127.0.0.1:3128")
    assert plain_http.applies(HTTP_URL) is False
    assert plain_http.openai_http_client(HTTP_URL) is None


def test_an_empty_proxy_variable_is_no_proxy(monkeypatch: pytest.MonkeyPatch):
    """An empty proxy variable configures nothing (as for httpx): the lean transport stays."""
    monkeypatch.setenv("HTTP_PROXY", "")
    monkeypatch.setenv("all_proxy", "")
    assert isinstance(plain_http.openai_http_client(HTTP_URL)._transport, PlainHTTPTransport)


@pytest.mark.parametrize("value, lean", [("httpx", False), ("HTTPX", False), ("plain", True),
                                         ("", True)])
def test_react_editor_http_switch(monkeypatch: pytest.MonkeyPatch, value: str, lean: bool):
    """REACT_EDITOR_HTTP=httpx (any case) opts out of the lean transport; other values do not."""
    monkeypatch.setenv("REACT_EDITOR_HTTP", value)
    assert plain_http.applies(HTTP_URL) is lean
    assert (plain_http.openai_http_client(HTTP_URL) is not None) is lean


# -- 2. same request, same answer as the SDK's own transport -------------------------------

@pytest.mark.parametrize("path, body", [
    ("/completions", {"model": MODEL, "prompt": "Café → 東京 🚀\nThought 1:", "max_tokens": 9,
                      "stop": ["\nObservation 1:"], "temperature": 0}),
    ("/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": "hé"}]}),
], ids=["completions", "chat"])
def test_round_trip_matches_the_default_transport(scripted_llm: ScriptedLLM, lean, path: str,
                                                  body: dict[str, Any]):
    """The lean transport sends the SDK's request byte for byte (method, path, body, every
    header: auth, content-type, content-length of the UTF-8 body, host) and hands back
    the same parsed JSON as the SDK's default transport, from the same server."""
    answer = {**completion("Ünïcödé 北京 🐍"), "extra": {"nested": [1, 2.5, None, True]}}
    scripted_llm.set_default(Reply(json=answer))
    default = openai.OpenAI(api_key=KEY, base_url=scripted_llm.base_url, max_retries=0,
                            timeout=10.0)
    try:
        assert not isinstance(default._client._transport, PlainHTTPTransport)
        via_default = default.post(path, body=body, cast_to=object)
    finally:
        default.close()
    via_lean = lean(scripted_llm.base_url).post(path, body=body, cast_to=object)

    assert via_lean == via_default == answer
    first, second = scripted_llm.requests
    assert (second.method, second.path, second.raw) == (first.method, first.path, first.raw)
    assert json.loads(second.raw) == body
    assert second.headers == first.headers
    h = second.headers
    assert h["authorization"] == f"Bearer {KEY}"
    assert h["content-type"] == "application/json"
    assert h["content-length"] == str(len(second.raw))
    assert h["host"] == f"127.0.0.1:{scripted_llm.port}"


def test_typed_sdk_call_parses_through_the_lean_transport(scripted_llm: ScriptedLLM, lean):
    """The SDK's typed `completions.create` and `models.list` work on the lean transport."""
    scripted_llm.push("typed answer")
    client = lean(scripted_llm.base_url)
    out = client.completions.create(model=MODEL, prompt="p", max_tokens=5)
    assert out.choices[0].text == "typed answer"
    assert [m.id for m in client.models.list()] == ["scripted-model"]
    assert [r.method for r in scripted_llm.requests] == ["POST", "GET"]


# -- 3. keep-alive --------------------------------------------------------------------------

def test_sequential_requests_share_one_connection(raw_server, lean):
    """Five requests in a row from one thread go over ONE TCP connection, each answered right."""
    server = raw_server(keep_alive_echo)
    client = lean(server.base_url)
    for i in range(5):
        assert ask(client, f"q{i}")["choices"][0]["text"] == echo(f"q{i}")
    assert server.accepted == 1
    assert [(s.conn, s.prompt) for s in server.seen] == [(0, f"q{i}") for i in range(5)]


@pytest.mark.parametrize("version, headers", [
    ("HTTP/1.1", [("Connection", "close")]),
    ("HTTP/1.1", [("Connection", "Close")]),
    ("HTTP/1.0", []),
], ids=["1.1-close", "1.1-Close", "1.0"])
def test_connection_close_answer_gets_a_new_connection(raw_server, lean, version: str,
                                                       headers: list[tuple[str, str]]):
    """After an answer that ends the connection (Connection: close, or HTTP/1.0 without
    keep-alive) the next request goes on a new connection. The server leaves the old one
    open without answering on it: a client that reused it would hang, and the server
    records any request sent there. The client hangs up each ended connection."""
    server = raw_server(lambda req: Answer(http(200, echo_json(req), headers=headers,
                                                version=version), then="linger"))
    client = lean(server.base_url, timeout=5.0)
    for i in range(4):
        assert ask(client, f"q{i}")["choices"][0]["text"] == echo(f"q{i}")
    assert server.accepted == 4
    assert [s.conn for s in server.seen] == [0, 1, 2, 3]
    server.wait_for(lambda: server.hung_up == {0, 1, 2, 3})
    assert server.late == []


def test_http_1_0_keep_alive_answer_keeps_the_connection(raw_server, lean):
    """HTTP/1.0 with `Connection: keep-alive` is kept: three requests, one connection."""
    server = raw_server(lambda req: Answer(http(200, echo_json(req), version="HTTP/1.0",
                                                headers=[("Connection", "keep-alive")])))
    client = lean(server.base_url)
    for i in range(3):
        assert ask(client, f"k{i}")["choices"][0]["text"] == echo(f"k{i}")
    assert server.accepted == 1


def test_keep_alive_holds_with_many_files_open(raw_server, lean):
    """Keep-alive does not depend on the socket's descriptor number: with more than 1024
    descriptors open in the process, three requests still share one connection."""
    import resource
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < 1300:
        pytest.skip("needs a descriptor limit of at least 1300")
    server = raw_server(keep_alive_echo)
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        client = lean(server.base_url)
        for i in range(3):
            assert ask(client, f"f{i}")["choices"][0]["text"] == echo(f"f{i}")
        assert server.accepted == 1
    finally:
        for fd in held:
            os.close(fd)


# -- 4. a kept connection the server closed meanwhile -----------------------------------------

def _wait_for_client_side_eof(client: openai.OpenAI) -> None:
    """Block until the client's kept socket has the server's FIN (so the test does not
    depend on how fast loopback delivers it)."""
    transport = client._client._transport
    for conn in list(getattr(transport, "_open", ())):
        select.select([conn.sock], [], [], WAIT_S)


@pytest.mark.parametrize("how", ["close", "half-close"])
def test_idle_connection_closed_by_server_is_not_reused(raw_server, lean, how: str):
    """The server ends an idle keep-alive connection after the first answer. The second
    request succeeds on a new connection and reaches the server exactly once; with
    `half-close` the server still reads the old connection, so a request sent on it
    (which a client would then have to send again) would show up in `late`."""
    first = {"done": False}

    def respond(req: Seen) -> Answer:
        if not first["done"]:
            first["done"] = True
            return Answer(http(200, echo_json(req)), then=how)  # kept by HTTP/1.1 rules
        return keep_alive_echo(req)

    server = raw_server(respond)
    client = lean(server.base_url, timeout=5.0)
    assert ask(client, "one")["choices"][0]["text"] == echo("one")
    server.wait_for(lambda: 0 in server.ended)
    _wait_for_client_side_eof(client)

    assert ask(client, "two")["choices"][0]["text"] == echo("two")
    assert [(s.conn, s.prompt) for s in server.seen] == [(0, "one"), (1, "two")]
    assert server.accepted == 2
    if how == "half-close":
        server.wait_for(lambda: 0 in server.hung_up or server.late)
        assert server.late == []
    assert ask(client, "three")["choices"][0]["text"] == echo("three")
    assert server.accepted == 2  # the new connection is kept in turn


# -- 5. bodies ------------------------------------------------------------------------------

def _framed(kind: str, req: Seen) -> Answer:
    body = echo_json(req)
    if kind == "content-length":
        return Answer(http(200, body))
    if kind == "chunked":
        return Answer(http(200, chunked(body, 7), headers=[("Transfer-Encoding", "chunked")],
                           length=False))
    if kind == "gzip":
        return Answer(http(200, gzip.compress(body), headers=[("Content-Encoding", "gzip")]))
    if kind == "gzip-chunked":
        return Answer(http(200, chunked(gzip.compress(body), 5), length=False,
                           headers=[("Content-Encoding", "gzip"), ("Transfer-Encoding", "chunked")]))
    if kind == "100-continue":
        interim = (b"HTTP/1.1 100 Continue\r\n\r\n"
                   b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
        return Answer(interim + http(200, body))
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["content-length", "chunked", "gzip", "gzip-chunked",
                                  "100-continue"])
def test_framed_bodies_decode_and_keep_the_connection(raw_server, lean, kind: str):
    """Content-Length, chunked (with extensions and a trailer, split inside UTF-8
    characters), gzip (decoded by httpx from the stream), and interim 1xx answers before the
    real one: the JSON arrives whole, and each answer is read exactly to its end, so the next
    request on the same connection is answered right too."""
    server = raw_server(lambda req: _framed(kind, req))
    client = lean(server.base_url)
    for prompt in ("Ünïcödé → 北京 🐍 first", "second"):
        assert ask(client, prompt) == completion(echo(prompt))
    out = client.completions.create(model=MODEL, prompt="typed")
    assert out.choices[0].text == echo("typed")
    assert server.accepted == 1


@pytest.mark.parametrize("version", ["HTTP/1.1", "HTTP/1.0"])
def test_body_without_length_ends_at_close(raw_server, lean, version: str):
    """An answer with neither Content-Length nor chunks is read up to the server's close,
    and that connection is never used again."""
    server = raw_server(lambda req: Answer(http(200, echo_json(req), version=version,
                                                length=False), then="close"))
    client = lean(server.base_url)
    for prompt in ("a", "b", "c"):
        assert ask(client, prompt) == completion(echo(prompt))
    assert server.accepted == 3
    assert [s.conn for s in server.seen] == [0, 1, 2]


def test_204_answer_has_no_body(raw_server, lean):
    """A 204 with no length is complete at its headers (not read up to a close that never
    comes): the SDK gets it at once and the connection stays usable."""
    def respond(req: Seen) -> Answer:
        if req.path.endswith("/empty"):
            return Answer(b"HTTP/1.1 204 No Content\r\n\r\n")
        return keep_alive_echo(req)

    server = raw_server(respond)
    client = lean(server.base_url, timeout=5.0)
    resp = client.post("/empty", body={}, cast_to=httpx2.Response)
    assert resp.status_code == 204 and resp.content == b""
    assert ask(client, "after")["choices"][0]["text"] == echo("after")
    assert server.accepted == 1


# -- 6. errors --------------------------------------------------------------------------------

def test_connection_refused_is_a_connection_error(lean):
    """Nothing listening: APIConnectionError, and not a timeout."""
    client = lean(f"http://127.0.0.1:{closed_port()}/v1")
    with pytest.raises(openai.APIConnectionError) as info:
        ask(client, "p")
    assert not isinstance(info.value, openai.APITimeoutError)


def test_server_that_never_answers_times_out(raw_server, lean):
    """A server that reads the request and never answers: APITimeoutError at the client's
    timeout; the client hangs up, and the next request gets a fresh connection."""
    calls = {"n": 0}

    def respond(req: Seen) -> Answer:
        calls["n"] += 1
        return Answer(then="linger") if calls["n"] == 1 else keep_alive_echo(req)

    server = raw_server(respond)
    client = lean(server.base_url, timeout=0.3)
    with pytest.raises(openai.APITimeoutError):
        ask(client, "slow")
    server.wait_for(lambda: 0 in server.hung_up)
    assert ask(client, "next")["choices"][0]["text"] == echo("next")
    assert server.accepted == 2 and server.late == []


@pytest.mark.parametrize("data, then", [
    (b"garbage that is not HTTP\r\n\r\n", "linger"),
    (b"SSH-2.0-OpenSSH_9.6\r\n", "close"),
    (b"HTTP/1.1 abc Broken\r\n\r\n", "linger"),
    (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "linger"),
    (b"", "close"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n" + b'{"choices": [', "close"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: nope\r\n\r\n", "linger"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n" + b'{"choices"', "close"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "linger"),
    (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n", "close"),
], ids=["garbage", "not-http", "bad-status", "bad-header", "closed-silently", "cut-short",
        "bad-length", "chunk-cut-short", "bad-chunk-size", "headers-cut-short"])
def test_broken_answers_are_connection_errors(raw_server, lean, data: bytes, then: str):
    """Garbage, an answer cut short, or a close without an answer: APIConnectionError (not a
    timeout, even when the server keeps the connection open afterwards), and the broken
    connection is dropped: the next request is answered on a new one."""
    calls = {"n": 0}

    def respond(req: Seen) -> Answer:
        calls["n"] += 1
        return Answer(data, then=then) if calls["n"] == 1 else keep_alive_echo(req)

    server = raw_server(respond)
    client = lean(server.base_url, timeout=5.0)
    with pytest.raises(openai.APIConnectionError) as info:
        ask(client, "p")
    assert not isinstance(info.value, openai.APITimeoutError)
    assert ask(client, "again")["choices"][0]["text"] == echo("again")
    assert server.accepted == 2 and [s.conn for s in server.seen] == [0, 1]
    assert server.late == []


@pytest.mark.parametrize("status, error", [
    (429, openai.RateLimitError), (500, openai.InternalServerError),
    (503, openai.InternalServerError), (400, openai.BadRequestError),
])
def test_error_statuses_map_to_sdk_errors(raw_server, lean, status: int, error: type):
    """HTTP error answers with OpenAI error JSON become the SDK's status errors, with the
    status code, message and headers; the error body is read to its end, so the
    connection is kept and the next request is answered right on it."""
    calls = {"n": 0}

    def respond(req: Seen) -> Answer:
        calls["n"] += 1
        if calls["n"] == 1:
            return Answer(http(status, error_json(status, f"scripted {status}"), reason="Err",
                               headers=[("Retry-After", "7")]))
        return keep_alive_echo(req)

    server = raw_server(respond)
    client = lean(server.base_url)
    with pytest.raises(error) as info:
        ask(client, "p")
    assert info.value.status_code == status
    assert info.value.body["message"] == f"scripted {status}"
    assert info.value.response.headers["retry-after"] == "7"
    assert ask(client, "after")["choices"][0]["text"] == echo("after")
    assert server.accepted == 1


def _model_client(base_url: str, timeout_s: float) -> ModelClient:
    config = AgentConfig(model=MODEL, base_url=base_url, max_retries=0, timeout_s=timeout_s)
    client = ModelClient(config, api_key=KEY, backoff_base_s=0.001)
    assert isinstance(client._client._client._transport, PlainHTTPTransport)
    return client


def test_model_client_records_a_timeout(raw_server):
    """Through ModelClient: a server that never answers is recorded as 'request timed out',
    after exactly one attempt that the server saw once."""
    server = raw_server(lambda req: Answer(then="linger"))
    with pytest.raises(ModelError) as info:
        _model_client(server.base_url, 0.3).complete("p", [])
    call = info.value.call
    assert call.error.startswith("request timed out after 0.3s")
    assert call.attempts == 1 and len(server.seen) == 1


@pytest.mark.parametrize("broken", ["refused", "garbage", "cut-short"])
def test_model_client_records_an_unreachable_server(raw_server, broken: str):
    """Through ModelClient: a refused connection, garbage, or a body cut short is recorded as
    'cannot reach the model server', naming the endpoint and the cause, never the key."""
    if broken == "refused":
        url = f"http://127.0.0.1:{closed_port()}/v1"
    else:
        data = (b"<<garbage>>\r\n\r\n" if broken == "garbage"
                else b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n{")
        url = raw_server(lambda req: Answer(data, then="close")).base_url
    with pytest.raises(ModelError) as info:
        _model_client(url, 5.0).complete("p", [])
    call = info.value.call
    assert call.error.startswith(f"cannot reach the model server at {url}: ")
    assert "timed out" not in call.error and KEY not in call.error
    assert call.attempts == 1


def test_model_client_completes_over_keep_alive(raw_server):
    """Through ModelClient: completions come back and reuse one connection."""
    server = raw_server(keep_alive_echo)
    client = _model_client(server.base_url, 5.0)
    texts = [client.complete(f"p{i}", [])[0] for i in range(3)]
    assert texts == [echo(f"p{i}") for i in range(3)]
    assert server.accepted == 1


# -- 7. threads -------------------------------------------------------------------------------

def test_threads_share_a_client_each_on_its_own_connection(raw_server, lean):
    """8 threads x 20 requests at once through ONE openai client: every answer is the one
    asked for, every request reached the server once, and each thread kept its own single
    connection (a connection carries one thread's requests only)."""
    threads_n, per_thread = 8, 20
    server = raw_server(keep_alive_echo)
    client = lean(server.base_url)
    start = threading.Barrier(threads_n)
    wrong: list[tuple[str, Any]] = []
    failures: list[BaseException] = []

    def work(t: int) -> None:
        try:
            start.wait(WAIT_S)
            for i in range(per_thread):
                prompt = f"t{t}-r{i}"
                text = ask(client, prompt)["choices"][0]["text"]
                if text != echo(prompt):
                    wrong.append((prompt, text))
        except BaseException as exc:  # reported below, in the test thread
            failures.append(exc)

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads_n)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert not any(w.is_alive() for w in workers)
    assert failures == [] and wrong == []

    prompts = sorted(s.prompt for s in server.seen)
    assert prompts == sorted(f"t{t}-r{i}" for t in range(threads_n) for i in range(per_thread))
    by_conn: dict[int, list[str]] = defaultdict(list)
    for s in server.seen:
        by_conn[s.conn].append(s.prompt)
    assert server.accepted == threads_n
    owners = {conn: {p.split("-")[0] for p in ps} for conn, ps in by_conn.items()}
    assert all(len(o) == 1 for o in owners.values()), owners
    assert sorted(o.pop() for o in owners.values()) == sorted(f"t{t}" for t in range(threads_n))
    for conn, ps in by_conn.items():  # each thread's requests in its own order
        assert ps == sorted(ps, key=lambda p: int(p.split("-r")[1]))


def test_close_closes_every_threads_connection(raw_server, lean):
    """Closing the openai client closes the kept connections of all threads, this one's
    included: the server sees each one hung up."""
    server = raw_server(keep_alive_echo)
    client = lean(server.base_url)
    ask(client, "main thread")

    def one(t: int) -> None:
        ask(client, f"c{t}")

    workers = [threading.Thread(target=one, args=(t,)) for t in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
    assert server.accepted == 4 and 0 not in server.hung_up  # (ended threads' ones may be closed already)
    client.close()
    server.wait_for(lambda: server.hung_up == {0, 1, 2, 3})


def test_a_streamed_request_body_goes_out_with_its_length(raw_server):
    """A body of unknown length (an iterator) is sent whole with a Content-Length, never as a
    bare body under a copied `Transfer-Encoding: chunked` header the server would misread."""
    import httpx2

    server = raw_server(keep_alive_echo)
    client = httpx2.Client(transport=plain_http.PlainHTTPTransport())
    try:
        client.post(server.base_url + "/completions", content=iter([b'{"prompt":', b' "s1"}']))
    finally:
        client.close()
    req = server.seen[-1]
    assert req.body == b'{"prompt": "s1"}'
    assert req.headers.get("content-length") == str(len(req.body))
    assert "transfer-encoding" not in req.headers


def test_a_thread_that_ended_leaves_no_connection_behind(raw_server, lean):
    """Each short-lived thread (the app runs a step job in one) gets its own connection; once
    such a thread has ended, its connection is closed the next time a connection is opened,
    so a long-lived app does not pile up sockets."""
    server = raw_server(keep_alive_echo)
    client = lean(server.base_url)
    for i in range(3):
        t = threading.Thread(target=ask, args=(client, f"t{i}"))
        t.start()
        t.join()
    assert server.accepted == 3
    server.wait_for(lambda: server.hung_up == {0, 1})  # the third is the newest: its thread's turn comes next
    assert ask(client, "main")["choices"][0]["text"] == echo("main")
    server.wait_for(lambda: server.hung_up == {0, 1, 2})
