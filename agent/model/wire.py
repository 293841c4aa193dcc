"""The wire under the official `openai` client, given to it through its documented
`http_client=` parameter: an httpx client (httpx, or httpx2 for the SDK releases built on it)
that follows no redirect (one is refused with one line), sends no SDK telemetry header, bounds
every response body (`MAX_BODY_BYTES`: past it the answer is abandoned with one line), and
opens its connections through `cancel.WatchedBackend` so that Stop reaches a request's socket.
One `openai.OpenAI` per (key, endpoint, timeout) in the process, shared by its threads."""

from __future__ import annotations

import os
import sys
import threading
import urllib.request
from collections import OrderedDict
from typing import Any

from agent.model.api import Refused, one_line, public_url
from agent.model.cancel import WatchedBackend

MAX_BODY_BYTES = 4 * 1024 * 1024  # a completion is cut at 20,000 characters anyway
MAX_SHARED_CLIENTS = 32
_IMPORT_LOCK = threading.Lock()
_BUILD_LOCK = threading.Lock()
_SDK: list[Any] = []
_CLIENTS: "OrderedDict[tuple[str | None, str, float], Any]" = OrderedDict()
_CLIENTS_PID: list[int] = []  # the process whose connections _CLIENTS holds (they do not cross a fork)


def sdk() -> Any:
    """The `openai` module, imported on first use (once, under a lock: a first import racing in
    worker threads fails): a process that never calls a model does not pay for it."""
    if not _SDK:
        with _IMPORT_LOCK:
            if not _SDK:
                import openai

                _SDK.append(openai)
    return _SDK[0]


def http_modules() -> tuple[Any, Any]:
    """(httpx module, httpcore module) the SDK's public `DefaultHttpxClient` is built on:
    httpx/httpcore, or httpx2/httpcore2 for SDK releases on httpx2.
    Raises RuntimeError when the SDK's client is built on neither."""
    for base in sdk().DefaultHttpxClient.__mro__:
        top = base.__module__.split(".")[0]
        if top in ("httpx", "httpx2"):
            __import__(top.replace("httpx", "httpcore"))
            return sys.modules[top], sys.modules[top.replace("httpx", "httpcore")]
    raise RuntimeError("the openai client is not built on httpx")


def shared_openai(api_key: str | None, base_url: str, timeout_s: float) -> Any:
    """The process's `openai.OpenAI` for (key, endpoint, timeout): built on first use (a cache
    hit never needs one; building one costs a TLS context), its retries off (ours count)."""
    key = (api_key, base_url, timeout_s)
    with _BUILD_LOCK:
        if _CLIENTS_PID != [os.getpid()]:
            _CLIENTS.clear()
            _CLIENTS_PID[:] = [os.getpid()]
        client = _CLIENTS.get(key)
        if client is None:
            client = sdk().OpenAI(
                api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0, http_client=http_client(base_url)
            )
            _CLIENTS[key] = client
            while len(_CLIENTS) > MAX_SHARED_CLIENTS:  # (an old one is left to the GC: it may be in use)
                _CLIENTS.popitem(last=False)
        _CLIENTS.move_to_end(key)
        return client


def http_client(base_url: str) -> Any:
    """The httpx client of a new `openai.OpenAI` for `base_url`: redirects refused, bodies
    bounded, Stop-able connections; through the proxy the environment names for it, if any
    (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, with `NO_PROXY`, as httpx reads them)."""
    hx, hc = http_modules()
    transport = kind(hx.BaseTransport, Transport)(hx, hc, proxy_for(base_url))
    return hx.Client(
        transport=transport,
        follow_redirects=False,
        event_hooks={"response": [_refuse_redirect]},
        timeout=hx.Timeout(60.0),
    )


def proxy_for(url: str) -> str | None:
    """The proxy the environment names for `url` (None: none, or NO_PROXY leaves it out)."""
    from urllib.parse import urlsplit

    proxies = urllib.request.getproxies()
    proxy = proxies.get(urlsplit(url).scheme) or proxies.get("all")
    if not proxy:
        return None
    try:
        if urllib.request.proxy_bypass(urlsplit(url).hostname or ""):
            return None
    except Exception:  # (an unreadable NO_PROXY: the proxy is used)
        pass
    return proxy


_KINDS: dict[tuple[type, type], type] = {}


def kind(base: type, impl: type) -> type:
    """`impl` as a subclass of `base` (httpx's or httpx2's transport or byte stream class: httpx
    checks what a transport returns is one), made once per pair."""
    made = _KINDS.get((base, impl))
    if made is None:
        made = _KINDS[(base, impl)] = type(impl.__name__, (impl, base), {})
    return made


def _refuse_redirect(response: Any) -> None:
    """A response hook: a redirect is never followed (the prompt would go where the endpoint
    did not say); refused with one line naming where it pointed."""
    if response.is_redirect:
        response.close()
        target = response.headers.get("location", "")
        try:
            where = one_line(public_url(str(response.request.url.join(target))), 200)
        except Exception:
            where = "an unreadable location"
        here = response.request.url
        same = where.startswith(f"{here.scheme}://{here.netloc.decode('ascii', 'replace')}/")
        raise Refused(
            f"the model server redirected (HTTP {response.status_code}) to {where}"
            + ("" if same else ", off the configured endpoint's origin")
            + ": refused, nothing sent there (set the base URL to the address that answers)"
        )


TELEMETRY = frozenset(
    {
        b"x-stainless-lang",
        b"x-stainless-package-version",
        b"x-stainless-os",
        b"x-stainless-arch",
        b"x-stainless-runtime",
        b"x-stainless-runtime-version",
        b"x-stainless-async",
        b"x-stainless-retry-count",
        b"x-stainless-read-timeout",
        b"x-stainless-timeout",
        b"x-stainless-raw-response",
    }
)


class Transport:
    """An httpx transport (the SDK's `http_client=` door) on an httpcore connection pool whose
    connections Stop can reach (`WatchedBackend`), sending no SDK telemetry header, every
    response body bounded."""

    def __init__(self, hx: Any, hc: Any, proxy: str | None = None):
        self.hx, self.hc = hx, hc
        pool = dict(
            ssl_context=hx.create_ssl_context(),
            max_connections=1000,
            max_keepalive_connections=100,
            keepalive_expiry=5.0,
            network_backend=WatchedBackend(hc.SyncBackend()),
        )
        self.pool = hc.HTTPProxy(proxy_url=proxy, **pool) if proxy else hc.ConnectionPool(**pool)

    def handle_request(self, request: Any) -> Any:
        """The httpx response of one request sent through the pool. Raises the wire's refusal
        (`mapped`) for what httpcore raised."""
        hc = self.hc
        url = request.url
        req = hc.Request(
            method=request.method,
            url=hc.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path),
            headers=[(k, v) for k, v in request.headers.raw if k.lower() not in TELEMETRY],
            content=request.stream,
            extensions=request.extensions,
        )
        try:
            resp = self.pool.handle_request(req)
        except Exception as exc:
            raise self.mapped(exc) from exc
        return _response(
            self.hx, resp.status, resp.headers, kind(self.hx.SyncByteStream, Body)(self, resp.stream), resp.extensions
        )

    def mapped(self, exc: BaseException) -> BaseException:
        """An httpcore error as the httpx error of its name (what the SDK classifies)."""
        if not isinstance(exc, Exception) or type(exc).__module__.split(".")[0] not in ("httpcore", "httpcore2"):
            return exc
        for kind in type(exc).__mro__:
            found = getattr(self.hx, kind.__name__, None)
            if isinstance(found, type) and issubclass(found, self.hx.TransportError):
                return found(str(exc))
        return self.hx.TransportError(str(exc))

    def close(self) -> None:
        """Close the pool's connections."""
        self.pool.close()

    def __enter__(self) -> "Transport":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _response(hx: Any, status: int, headers: Any, stream: Any, extensions: Any) -> Any:
    """The httpx response; a declared length past the bound is refused before any of it is read."""
    response = hx.Response(status, headers=headers, stream=stream, extensions=extensions)
    length = response.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_BODY_BYTES:
        stream.close()
        raise Refused(too_large())
    return response


def too_large() -> str:
    """The one line said when an answer passes MAX_BODY_BYTES."""
    return f"the model server's answer is larger than {MAX_BODY_BYTES // (1024 * 1024)} MB: abandoned"


class Body:
    """A response body read through: httpcore errors become httpx's, and past MAX_BODY_BYTES
    (compressed or not: the decoded text is bounded where it is read) it is abandoned."""

    def __init__(self, transport: Any, inner: Any):
        self.transport, self.inner, self.seen = transport, inner, 0

    def __iter__(self) -> Any:
        try:
            for part in self.inner:
                self.seen += len(part)
                if self.seen > MAX_BODY_BYTES:
                    raise Refused(too_large())
                yield part
        except Refused:
            self.close()
            raise
        except Exception as exc:
            raise self.transport.mapped(exc) from exc

    def close(self) -> None:
        """Close the response stream (a stream without `close` needs none)."""
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()
