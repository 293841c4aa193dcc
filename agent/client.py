"""The model client: one call = one recorded `ModelCall`, on the official `openai` package.

Retries are our own loop (the openai client runs with max_retries=0) so `attempts` is exact.
Every request runs in its caller's thread on the official sync `openai.OpenAI` (one per
endpoint, shared by the threads) whose httpx client sends the bytes through libcurl
(`agent.transport`; `REACT_EDITOR_HTTP=sdk`, or a proxy in the environment, keeps the SDK's own
transport), without the SDK's telemetry headers, through its own request path (`OpenAI.request`)
with a JSON body we encode and an answer whose JSON we read (`_Sender`): about 0.45x the bare
client's CPU per call, and as many requests at once as threads. Stop means stop: a watcher thread
shuts down the socket of a request whose Stop is set, so it ends at once and its connection is
closed, instead of the call running on to its answer or its timeout.
The API key is only ever handed to the openai client: it is never recorded, and any text
that could echo it (error bodies) is scrubbed before it leaves this module.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import email.utils
import hashlib
import json
import math
import os
import random
import socket
import threading
import time
from datetime import timezone
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from agent import local_model
from agent.ratelimit import PauseGate, gate_for
from trajectory.records import MAX_TEXT, AgentConfig, ModelCall, Usage, without_credentials

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_CHAT_INSTRUCTION = (
    "Continue the transcript above. Reply with exactly the next step and nothing else."
)
NO_KEY_PLACEHOLDER = "not-needed"  # vLLM / Ollama / llama.cpp accept any key
# the app's guard (agent.endpoint_keys.EndpointKeys): which key each endpoint may get; None in the CLI
ENDPOINT_KEYS = None
MAX_STOP_SEQUENCES = 4  # OpenAI rejects more; the rest are applied client-side
BACKOFF_BASE_S = 1.0  # first retry waits ~this, doubling each time (plus jitter)
BACKOFF_MAX_S = 30.0
RETRY_AFTER_MAX_S = 60.0  # a server's Retry-After is honoured up to this bound
MALFORMED_RETRIES = 1  # a garbage response is retried at most once
RETRYABLE_STATUS = frozenset({408, 409, 429})
_BUILD_LOCK = threading.Lock()  # openai/httpx import lazily on first use: not thread-safe
RATE_LIMIT_RETRIES = 20  # 429s pause the endpoint's whole batch; they do not use up max_retries
UNREACHABLE = "cannot reach the model server"  # how an unreachable endpoint's error begins
CANCEL_POLL_S = 0.05  # how often the requests in flight have their Stop looked at
HTTP_VARIABLE = "REACT_EDITOR_HTTP"  # "sdk": the SDK's own transport instead of libcurl (README)
# The SDK's telemetry headers (its OS, runtime, retry count, ...): no server needs them, and each
# costs CPU at every request on both transports; left out of every request.
TELEMETRY_HEADERS = ("X-Stainless-Lang", "X-Stainless-Package-Version", "X-Stainless-OS", "X-Stainless-Arch",
                     "X-Stainless-Runtime", "X-Stainless-Runtime-Version", "X-Stainless-Async")
REQUEST_TELEMETRY = ("x-stainless-retry-count", "x-stainless-read-timeout")  # (added per request: left out there)


_IMPORT_LOCK = threading.Lock()


class _Deferred:
    """Stands for the `openai` module until it is first used, then imports it (and httpx)
    once, under a lock (a first import racing in worker threads fails), and puts the module
    in its place: importing both costs about half a second that a process which never calls
    a model (restoring a version, listing, exporting) need not pay."""

    def __getattr__(self, name: str):
        global openai
        with _IMPORT_LOCK:
            if openai is self:
                import httpx  # noqa: F401
                import openai as module

                openai = module
        return getattr(openai, name)


openai: Any = _Deferred()


class ModelError(Exception):
    """A model call failed for good (after retries). `.call` holds the recorded ModelCall."""

    def __init__(self, call: ModelCall):
        super().__init__(call.error or "model call failed")
        self.call = call


@dataclass
class CallWatch:
    """Lets the caller of one call follow and stop it: `on_retry(attempt, reason)` hears of
    each retry, and a set `cancel` ends the call (the UI's Stop): the request in flight is
    cancelled and its connection closed, and no further attempt is made."""

    cancel: threading.Event
    on_retry: Callable[[int, str], None] | None = None


class ResponseCache(Protocol):
    """Answers identical temperature-0 requests; recording a call is what fills it."""

    def get(self, key: str) -> tuple[str, Usage] | None: ...


class _Malformed(Exception):
    """The server answered 200 with something that is not a completion."""


class _Cancelled(Exception):
    """Stop came while the request was in flight: it was cancelled."""


_OPENAI: "OrderedDict[tuple[str | None, str, float], openai.OpenAI]" = OrderedDict()
MAX_SHARED_CLIENTS = 32
_OPENAI_PID: list[int] = []  # the process whose connections _OPENAI holds (they do not cross a fork)


def shared_openai(api_key: str | None, base_url: str, timeout_s: float) -> openai.OpenAI:
    """One official sync `openai.OpenAI` per (key, endpoint, timeout) in the process, shared by
    its threads (the sync client is thread-safe), on libcurl or the SDK's own transport
    (`_http_client`), whose sockets Stop can reach either way; without the SDK's telemetry headers."""
    key = (api_key, base_url, timeout_s)
    with _BUILD_LOCK:
        if _OPENAI_PID != [os.getpid()]:
            _OPENAI.clear()
            _OPENAI_PID[:] = [os.getpid()]
        client = _OPENAI.get(key)
        if client is None:
            http = _http_client()
            client = openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0,
                                   http_client=http,
                                   default_headers=dict.fromkeys(TELEMETRY_HEADERS, openai._types.Omit()))
            _OPENAI[key] = client
            while len(_OPENAI) > MAX_SHARED_CLIENTS:  # (an old one is left to the GC: it may be in use)
                _OPENAI.popitem(last=False)
        _OPENAI.move_to_end(key)
        return client


def transport_choice() -> str:
    """Which transport a new client gets: "curl" (libcurl, `agent.transport`, the default) or
    "sdk" (the SDK's own: `REACT_EDITOR_HTTP=sdk`, pycurl missing, or a proxy in the
    environment, which only the SDK's transport honours)."""
    from agent import transport

    if os.environ.get(HTTP_VARIABLE, "curl").strip().lower() == "sdk":
        return "sdk"
    return "curl" if transport.available() and not transport.proxies_in_environment() else "sdk"


def _http_client() -> Any:
    """The httpx client of a new `openai.OpenAI`: the SDK's defaults (`DefaultHttpxClient`: httpx
    or httpx2, by SDK version), on libcurl unless `transport_choice()` says "sdk"; either way
    Stop can reach a request's sockets."""
    if transport_choice() == "sdk":
        http = openai.DefaultHttpxClient()
        _watch_sockets(http)
        return http
    from agent import transport

    module = _httpx_module(openai.DefaultHttpxClient)
    return openai.DefaultHttpxClient(transport=transport.transport_for(module, _curl_started, _curl_ended))


def _httpx_module(cls: type) -> Any:
    """httpx or httpx2: the package the SDK's client class comes from."""
    import sys

    for base in cls.__mro__:
        top = base.__module__.split(".")[0]
        if top in ("httpx", "httpx2"):
            return sys.modules[top]
    raise RuntimeError(f"not an httpx client: {cls}")


def _curl_started(stop: Any) -> None:
    """A request of the curl transport starts in this thread: Stop may shut its sockets down."""
    _READING[_get_ident()] = stop


def _curl_ended() -> None:
    with _WATCH_LOCK:  # (not shut down once this thread has left it: its handle goes back to the pool)
        _READING.pop(_get_ident(), None)


def _watch_sockets(http: Any) -> None:
    """Wrap the network backend of the client's connection pools (its transport's, and those of
    proxies from the environment) so that Stop can reach a request's socket. httpx keeps the
    pool in `transport._pool` and httpcore its backend in `_network_backend` (httpx 0.27-0.28 and
    httpx2, httpcore 1.x and httpcore2); elsewhere Stop would end the call at its answer
    (tests/agent/test_stop_in_flight.py tells)."""
    for transport in (getattr(http, "_transport", None), *getattr(http, "_mounts", {}).values()):
        pool = getattr(transport, "_pool", None)
        inner = getattr(pool, "_network_backend", None)
        if inner is not None and not isinstance(inner, _Backend):
            pool._network_backend = _Backend(inner)


_READING: dict[int, "_Stream"] = {}  # thread -> the connection it is blocked on (sending or waiting)
_WATCHED: dict[int, threading.Event] = {}  # thread -> the Stop of its request in flight
_WATCH_LOCK = threading.Lock()
_WATCH_WAKE = threading.Condition(_WATCH_LOCK)  # the watcher sleeps on it while no request is watched
_WATCH_IDLE = [False, 0]  # [the watcher sleeps until woken, requests watched since its last look]
_WATCHER: list[int] = []  # the pid whose watcher thread runs
_get_ident = threading.get_ident


class _Stream:
    """A connection of the SDK's transport (an httpcore network stream), noting which thread is
    blocked on it: Stop shuts that socket down (`shutdown` wakes a blocked recv, `close` does
    not); the transport then sees the server hang up and closes the connection. Only a read or
    a write (a thread blocked on the socket) is noted; what the pool asks of every idle
    connection at each request (`get_extra_info`) and `close` go straight to the stream."""

    __slots__ = ("_inner", "get_extra_info", "close")

    def __init__(self, inner: Any):
        self._inner = inner
        self.get_extra_info = inner.get_extra_info  # (asked O(connections) times a request)
        self.close = inner.close

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        me = _get_ident()
        _READING[me] = self
        try:
            return self._inner.read(max_bytes, timeout)
        finally:
            with _WATCH_LOCK:  # not shut down once this thread has left it (another may take it)
                del _READING[me]

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        me = _get_ident()
        _READING[me] = self
        try:
            return self._inner.write(buffer, timeout)
        finally:
            with _WATCH_LOCK:
                del _READING[me]

    def start_tls(self, *args: Any, **kwargs: Any) -> "_Stream":
        return _Stream(self._inner.start_tls(*args, **kwargs))

    def abort(self) -> None:
        sock = self._inner.get_extra_info("socket")
        try:
            socket.socket.shutdown(sock, socket.SHUT_RDWR)  # (the plain socket's, also under TLS)
        except (OSError, TypeError):  # already closed, or not a socket
            pass


class _Backend:
    """The transport's network backend (httpcore's), with every connection it opens a `_Stream`."""

    def __init__(self, inner: Any):
        self._inner = inner

    def connect_tcp(self, *args: Any, **kwargs: Any) -> _Stream:
        return _Stream(_connect(self._inner.connect_tcp, *args, **kwargs))

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> _Stream:
        return _Stream(_connect(self._inner.connect_unix_socket, *args, **kwargs))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _connect(connect: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Open a connection; for a request with a Stop, in a thread of its own, so that Stop also
    ends a wait for DNS or a TCP handshake (neither can be interrupted): the request is
    given up at once, and the connection, should it still come, is closed."""
    cancel = _WATCHED.get(threading.get_ident())
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
    raise _Cancelled("cancelled while the request was in flight")  # (the SDK may wrap it: run_cancellable)


def _watch_stops() -> None:
    """One thread of the process looks at the Stop of every request in flight (rather than a
    poll in each waiting thread) and shuts down the connection of each one whose Stop is set.
    After a look with no request watched nor started since the last one, it sleeps until a
    request wakes it (no wake-up for nothing; a busy runner never needs to wake it)."""
    with _WATCH_LOCK:
        while True:
            if not _WATCHED and not _WATCH_IDLE[1]:
                _WATCH_IDLE[0] = True
                while _WATCH_IDLE[0]:
                    _WATCH_WAKE.wait()
            _WATCH_IDLE[1] = 0
            _WATCH_WAKE.wait(CANCEL_POLL_S)  # (the lock is free meanwhile)
            for thread, cancel in _WATCHED.items():
                stream = _READING.get(thread) if cancel.is_set() else None
                if stream is not None:
                    stream.abort()


def run_cancellable(send: Callable[[], Any], cancel: threading.Event | None) -> Any:
    """Call `send()` (a request of a `shared_openai` client) in this thread; a set `cancel`
    shuts its connection down, so the request ends at once and `_Cancelled` is raised."""
    if cancel is None:
        return send()
    me = threading.get_ident()
    with _WATCH_LOCK:
        _WATCH_IDLE[1] += 1
        if _WATCH_IDLE[0]:
            _WATCH_IDLE[0] = False
            _WATCH_WAKE.notify()
        _WATCHED[me] = cancel
        if _WATCHER != [os.getpid()]:
            _WATCHER[:] = [os.getpid()]
            threading.Thread(target=_watch_stops, daemon=True, name="model-call-stops").start()
    try:
        if cancel.is_set():
            raise _Cancelled("cancelled before the request was sent")
        return send()
    except openai.APIConnectionError:
        if cancel.is_set():
            raise _Cancelled("cancelled while the request was in flight") from None
        raise
    finally:
        with _WATCH_LOCK:
            _WATCHED.pop(me, None)


def resolve_base_url(config: AgentConfig) -> str:
    if local_model.wanted(config):  # the built-in model: its URL is known once it is started
        return local_model.Local().identity
    return config.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL


def public_url(url: str) -> str:
    """The endpoint without credentials (userinfo, query, fragment, a key in the path): safe
    to record."""
    try:
        return without_credentials(url)
    except ValueError:
        return "<invalid url>"


def model_available(config: AgentConfig) -> tuple[bool, str]:
    """Is a model configured? (ok, one-line message for the UI banner)."""
    if local_model.wanted(config):
        return local_model.availability()
    base = config.base_url or os.environ.get("OPENAI_BASE_URL")
    if base:
        return True, f"Model {config.model} at {public_url(base)}."
    if os.environ.get("OPENAI_API_KEY"):
        return True, f"Model {config.model} via the OpenAI API (key from OPENAI_API_KEY)."
    return False, (
        "No model configured. Set OPENAI_API_KEY, or OPENAI_BASE_URL for vLLM / Ollama / "
        "llama.cpp (or a base URL in the agent config), then reload."
    )


def stop_cut(text: str, stop: list[str]) -> str:
    """Cut at the earliest stop string (removed), as a server would; for servers that
    ignore `stop` and for the stops beyond the first four."""
    cuts = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return text[: min(cuts)] if cuts else text


def chat_message(prompt: str, instruction: str | None) -> str:
    return f"{prompt}\n\n{instruction or DEFAULT_CHAT_INSTRUCTION}"


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ModelClient:
    """Sends prompts to one configured model; every call returns its `ModelCall`."""

    def __init__(
        self,
        config: AgentConfig,
        *,
        api_key: str | None = None,
        cache: ResponseCache | None = None,
        on_retry: Callable[[int, str], None] | None = None,
        backoff_base_s: float | None = None,
        retry_after_max_s: float | None = None,
        chat_extra: dict[str, Any] | None = None,
    ):
        self.config = config
        self.chat_extra = chat_extra  # more body fields for chat requests (the critic's JSON mode)
        self.cache = cache
        self.on_retry = on_retry
        self.backoff_base_s = BACKOFF_BASE_S if backoff_base_s is None else backoff_base_s
        self.retry_after_max_s = (
            RETRY_AFTER_MAX_S if retry_after_max_s is None else retry_after_max_s
        )
        self.local = local_model.for_config(config)  # the built-in model: started on the first request
        self.base_url = resolve_base_url(config)
        self.public_url = self.local.identity if self.local else public_url(self.base_url)  # (in every call's record)
        self.gate: PauseGate = gate_for(self.public_url)
        key = api_key or os.environ.get("OPENAI_API_KEY") or NO_KEY_PLACEHOLDER
        self._secrets = [key] if key != NO_KEY_PLACEHOLDER and len(key) >= 4 else []
        self._key = key
        self._openai: openai.OpenAI | None = None
        self._sent_key: str | None = None
        self._sender_of: _Sender | None = None
        self._shapes: tuple[Any, Any, dict[tuple, tuple[bytes, bytes]]] = (None, None, {})  # `_body_parts`

    # -- public -----------------------------------------------------------------------
    def complete(
        self,
        prompt: str,
        stop: list[str],
        *,
        purpose: str = "step",
        chat_instruction: str | None = None,
        watch: CallWatch | None = None,
        fixed: str | None = None,
    ) -> tuple[str, ModelCall]:
        """Return the completion (cut at `stop`) and its record; raise ModelError when
        the call fails for good or is cancelled through `watch` (the error is in `.call.error`).
        `fixed`: the part the prompt starts with that repeats from call to call (the examples
        and the task): its hash and JSON are worked out once, not at every call."""
        stop = list(stop or [])
        fixed = fixed if fixed and prompt.startswith(fixed) else None
        call = self._new_call(prompt, stop, purpose, chat_instruction, fixed)
        started = time.perf_counter()
        key = self._cache_key(prompt, chat_instruction, stop) if self._cacheable() else None
        call.cache_key = key
        if key is not None:
            hit = self.cache.get(key)  # type: ignore[union-attr]
            if hit is not None:
                text, usage = hit
                call.completion, call.usage, call.cached = text, usage, True
                call.latency_ms = (time.perf_counter() - started) * 1000
                return text, call
        return self._with_retries(call, prompt, stop, chat_instruction, watch, started, fixed)

    def kept_answer(self, kept: list[ModelCall], prompt: str, stop: list[str], *, purpose: str = "step",
                    chat_instruction: str | None = None) -> tuple[str, ModelCall] | None:
        """The answer a blocked write kept for exactly this request (same prompt, model and
        parameters), taken out of `kept` and returned as a cached call; None if there is none.
        Used whatever the cache setting: it is this request's own paid answer."""
        want = self._new_call(prompt, list(stop or []), purpose, chat_instruction)
        for i, old in enumerate(kept):
            if (old.prompt_hash, old.model, old.api_style, old.params) == (
                    want.prompt_hash, want.model, want.api_style, want.params) and old.completion is not None:
                del kept[i]
                want.completion, want.usage, want.cached, want.latency_ms = old.completion, old.usage, True, 0.0
                want.cache_key, want.cut_from = old.cache_key, old.cut_from
                return old.completion, want
        return None

    def _new_call(self, prompt: str, stop: list[str], purpose: str, chat_instruction: str | None,
                  fixed: str | None = None) -> ModelCall:
        """The call's record before it is made: what was asked, hashed (the prompt is not kept;
        `fixed`, a part it starts with, was hashed once)."""
        cfg = self.config
        hashed = chat_message(prompt, chat_instruction) if cfg.api_style == "chat" else prompt
        params: dict[str, Any] = {
            "temperature": cfg.temperature,
            "top_p": cfg.top_p,
            "max_tokens": cfg.max_tokens,
            "stop": stop,
            "base_url": self._scrub(self.public_url) if self._secrets else self.public_url,
        }
        return ModelCall(
            model=cfg.model, api_style=cfg.api_style, params=params, purpose=purpose,
            prompt_hash=_digest(hashed, fixed), prompt_chars=len(hashed), attempts=0,
        )

    def _with_retries(self, call: ModelCall, prompt: str, stop: list[str], chat_instruction: str | None,
                      watch: CallWatch | None, started: float, fixed: str | None = None) -> tuple[str, ModelCall]:
        """Ask until an answer, a failure for good, or Stop; every attempt counts in `call`."""
        cfg = self.config
        malformed = rate_limited = 0
        hooks = [f for f in ((watch.on_retry if watch else None), self.on_retry) if f is not None]

        def on_retry(attempt: int, reason: str) -> None:  # the caller's watch and the client's own
            for f in hooks:
                f(attempt, reason)

        while True:
            self.gate.wait(watch.cancel if watch else None)  # Stop ends the wait
            if watch is not None and watch.cancel.is_set():
                return self._failed(call, "cancelled before the request was sent", started)
            call.attempts += 1
            try:
                text, usage = self._request(prompt, stop, chat_instruction, watch.cancel if watch else None, fixed)
                text = stop_cut(text, stop)
                if not text.strip():  # an empty step would only use up the budget
                    raise _Malformed("empty completion")
            except _Cancelled as exc:
                return self._failed(call, str(exc), started)
            except Exception as exc:  # classified below; nothing escapes unrecorded
                reason, retryable, delay = self._classify(exc)
                if isinstance(exc, _Malformed):
                    malformed += 1
                    retryable = malformed <= MALFORMED_RETRIES
                limited = isinstance(exc, openai.RateLimitError)
                rate_limited += limited
                budget_left = rate_limited <= RATE_LIMIT_RETRIES if limited else (
                    call.attempts - rate_limited <= cfg.max_retries)
                if retryable and budget_left:
                    if delay is None:
                        delay = self._backoff(call.attempts)
                    on_retry(call.attempts, reason)
                    if limited:  # every request to this endpoint waits, not just this one
                        self.gate.pause(delay)
                        if watch is None or not watch.cancel.is_set():
                            continue
                        reason = f"cancelled: {reason}"
                    elif watch is None:
                        time.sleep(delay)
                        continue
                    elif not watch.cancel.wait(delay):
                        continue
                    else:
                        reason = f"cancelled: {reason}"
                return self._failed(call, reason, started)
            if len(text) > MAX_TEXT:  # kept text is re-sent in every later prompt
                call.cut_from, text = len(text), text[:MAX_TEXT]
            call.completion, call.usage = text, usage
            call.latency_ms = (time.perf_counter() - started) * 1000
            return text, call

    def _failed(self, call: ModelCall, reason: str, started: float) -> Any:
        """Record the call as failed for good (or cancelled) and raise its ModelError."""
        n = call.attempts
        call.error = f"{reason} (after {n} attempt{'s' if n != 1 else ''})"
        call.latency_ms = (time.perf_counter() - started) * 1000
        raise ModelError(call) from None

    # -- internals --------------------------------------------------------------------
    @property
    def _client(self) -> openai.OpenAI:
        """Built on first use (a cache hit never needs an HTTP client), and shared by every
        ModelClient of the process with the same endpoint, key and timeout: building one
        costs ~0.3-1 s of CPU (TLS context), and its connection pool keeps connections alive."""
        key = self._key
        if self.local is not None:  # the built-in model's own server and key (started or found now)
            self.base_url, key = self.local.endpoint()
        elif ENDPOINT_KEYS is not None:  # the app: the launch key only where allowed, else one typed for it
            key = ENDPOINT_KEYS.key_for(self.base_url, "" if key == NO_KEY_PLACEHOLDER else key) or NO_KEY_PLACEHOLDER
            if key != NO_KEY_PLACEHOLDER and key not in self._secrets:
                self._secrets.append(key)
        if self._openai is None or key != self._sent_key:
            self._openai = shared_openai(key, self.base_url, self.config.timeout_s)
            self._sent_key = key
            self._sender_of = None
        return self._openai

    @property
    def _sender(self) -> "_Sender":
        """The request path of `_client` (made once per client it is)."""
        client = self._client
        sender = self._sender_of
        if sender is None or sender.client is not client:
            sender = self._sender_of = _Sender(client)
        return sender

    def _cacheable(self) -> bool:
        return bool(self.cache is not None and self.config.cache and self.config.temperature == 0)

    def _cache_key(self, prompt: str, instruction: str | None, stop: list[str]) -> str:
        cfg = self.config
        chat = cfg.api_style == "chat"
        blob = json.dumps(
            {
                "base_url": self.public_url,
                "model": cfg.model,
                "api_style": cfg.api_style,
                "prompt": prompt,
                "chat_instruction": (instruction or DEFAULT_CHAT_INSTRUCTION) if chat else None,
                "stop": stop,
                "max_tokens": cfg.max_tokens,
                "top_p": cfg.top_p,
            },
            sort_keys=True, ensure_ascii=False, separators=(",", ":"),
        )
        return sha256(blob)

    def _request(
        self, prompt: str, stop: list[str], instruction: str | None, cancel: threading.Event | None = None,
        fixed: str | None = None,
    ) -> tuple[str, Usage]:
        cfg = self.config
        chat = cfg.api_style == "chat"
        text = chat_message(prompt, instruction) if chat else prompt
        content = None
        if fixed:  # the JSON the SDK would send, its fixed part encoded once
            content = _json_body(self._body_parts(stop), text, fixed)
        if content is None:
            content = _sdk_json(self._body(text, stop))
        send = self._sender
        with self.local.turn(cancel) if self.local else contextlib.nullcontext():  # one request at a time there
            resp = run_cancellable(lambda: send("/chat/completions" if chat else "/completions", content), cancel)
        try:
            data = json.loads(resp.content)
        except ValueError as exc:  # a 200 whose body is not JSON
            raise _Malformed(f"body is not valid JSON ({_one_line(str(exc), 120)})") from exc
        choices = data.get("choices") if isinstance(data, dict) else None
        if not choices or not isinstance(choices, list):
            raise _Malformed(f"response has no choices: {_snippet(data)}")
        first = choices[0]
        if chat:
            message = _field(first, "message")
            if message is None:
                raise _Malformed(f"chat choice has no message: {_snippet(data)}")
            text = _field(message, "content")
        else:
            text = _field(first, "text")
        if text is not None and not isinstance(text, str):
            raise _Malformed(f"completion text is not a string: {_snippet(data)}")
        return text or "", _usage(data.get("usage"))

    def _body(self, text: str, stop: list[str]) -> dict[str, Any]:
        """The request body (what the typed `.create()` would send, without its parameter
        transforms): the official client's own request path sends it as it is."""
        cfg = self.config
        common: dict[str, Any] = {
            "model": cfg.model,
            "temperature": cfg.temperature,
            "top_p": cfg.top_p,
            "max_tokens": cfg.max_tokens,
        }
        if stop:
            common["stop"] = stop[:MAX_STOP_SEQUENCES]
        if cfg.api_style == "chat":
            return {"messages": [{"role": "user", "content": text}], **common, **(self.chat_extra or {})}
        return {"prompt": text, **common}

    def _body_parts(self, stop: list[str]) -> tuple[bytes, bytes] | None:
        """`_body_parts` of a body with these stops, made once per stops: the rest of a body is
        this client's config (and chat fields), the same for every call while they are the
        same objects."""
        made = self._shapes
        if made[0] is not self.config or made[1] is not self.chat_extra:
            made = self._shapes = (self.config, self.chat_extra, {})
        key = tuple(stop)
        parts = made[2].get(key)
        if parts is None:
            parts = _body_parts(self._body(_TEXT, stop))
            if parts is not None and len(made[2]) < MAX_SHAPES:
                made[2][key] = parts
        return parts

    def _classify(self, exc: Exception) -> tuple[str, bool, float | None]:
        """(scrubbed one-line reason, retryable?, server-requested delay or None)."""
        if isinstance(exc, local_model.LocalModelError):  # the built-in model cannot answer: what to do
            return str(exc), False, None
        if isinstance(exc, _Malformed):
            return self._scrub(f"malformed response from the model server: {exc}"), True, None
        if isinstance(exc, openai.APITimeoutError):
            return f"request timed out after {self.config.timeout_s:g}s", True, None
        if isinstance(exc, openai.APIConnectionError):
            return self._scrub(
                f"{UNREACHABLE} at {self.public_url}: "
                f"{_cause(exc)}"), True, None
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            msg = _error_message(exc)
            retry = status in RETRYABLE_STATUS or status >= 500
            what = {401: "authentication failed (check OPENAI_API_KEY)",
                    403: "permission denied", 404: "not found (check the model name and base URL)",
                    429: "rate limited"}.get(status, "model server error")
            delay = self._retry_after(exc.response) if retry else None  # (never raises)
            return self._scrub(f"{what} (HTTP {status}): {msg}"), retry, delay
        return self._scrub(f"model call failed: {type(exc).__name__}: {exc}"), False, None

    def _retry_after(self, response: Any) -> float | None:
        return retry_after_s(getattr(response, "headers", None) or {}, self.retry_after_max_s)

    def _backoff(self, attempt: int) -> float:
        base = min(self.backoff_base_s * (2 ** (attempt - 1)), BACKOFF_MAX_S)
        return base * (0.75 + random.random() * 0.5)

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


def retry_after_s(headers: Any, max_s: float, now: float | None = None) -> float | None:
    """The wait a server asked for (`retry-after-ms`, else `Retry-After` in seconds or as an
    HTTP date), bounded to [0, max_s]; None (our own backoff) when it is absent, unreadable
    (`soon`, `nan`), negative or already past. Never raises: any header value is safe."""
    delay: float | None = None
    try:
        ms = _seconds(headers.get("retry-after-ms"))
        raw = headers.get("retry-after")
    except Exception:  # headers of an unexpected shape: no server delay
        return None
    if ms is not None:
        delay = ms / 1000
    elif raw:
        delay = _seconds(raw)
        if delay is None:
            delay = _http_date_delay(str(raw), time.time() if now is None else now)
    if delay is None or delay < 0:
        return None
    return min(delay, max_s)


def _seconds(value: Any) -> float | None:
    """A header value as a finite number of seconds, else None (`nan`, `inf`, `soon`)."""
    if value is None:
        return None
    try:
        number = float(str(value).strip())
    except (TypeError, ValueError):
        return None
    if math.isnan(number):
        return None
    if math.isinf(number):  # +inf: "a very long wait", bounded by the caller; -inf: none
        return math.inf if number > 0 else None
    return number


def _http_date_delay(raw: str, now: float) -> float | None:
    """Seconds until an HTTP-date Retry-After (a date without a zone is UTC, as HTTP dates are)."""
    try:
        when = email.utils.parsedate_to_datetime(raw)
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        return when.timestamp() - now
    except (TypeError, ValueError, OverflowError, IndexError, OSError):
        return None


_TEXT = "\ue000prompt\ue000"  # where the prompt goes in a request body whose JSON is built by `_json_body`
_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode  # the SDK's JSON
_TEXT_JSON = _JSON(_TEXT)[1:-1]
_FIXED: dict[str, tuple[bytes, Any]] = {}  # a fixed prompt part -> (its JSON string body, UTF-8; sha256 after it)
MAX_FIXED = 256  # fixed parts (each task's examples + task text) remembered
MAX_SHAPES = 64  # request bodies (by stops) whose JSON around the prompt a client remembers


def _fixed(fixed: str) -> tuple[bytes, Any]:
    """(the JSON string body of `fixed`, UTF-8; the sha256 state after its UTF-8), made once
    per fixed part, i.e. once per task."""
    found = _FIXED.get(fixed)
    if found is None:
        found = (json.encoder.encode_basestring(fixed)[1:-1].encode("utf-8"),
                 hashlib.sha256(fixed.encode("utf-8")))
        if len(_FIXED) >= MAX_FIXED:
            _FIXED.clear()
        _FIXED[fixed] = found
    return found


def _digest(text: str, fixed: str | None) -> str:
    """sha256 of `text`; `fixed` (a part it starts with) is hashed once, not at every call."""
    if not fixed or not text.startswith(fixed):
        return sha256(text)
    h = _fixed(fixed)[1].copy()
    h.update(text[len(fixed):].encode("utf-8"))
    return h.hexdigest()


def _json_body(parts: tuple[bytes, bytes] | None, text: str, fixed: str | None) -> bytes | None:
    """The request body as the SDK would send it (its JSON, UTF-8): `parts` (`_body_parts`: the
    body's JSON before and after its prompt) around `text`, the `fixed` part it starts with
    encoded once (JSON escapes each character on its own, so the escaped text is the escaped
    fixed part followed by the escaped rest); None when that does not apply (the SDK encodes
    the body itself then)."""
    if parts is None or not fixed or not text.startswith(fixed):
        return None
    tail = json.encoder.encode_basestring(text[len(fixed):])[1:-1]
    return b"".join((parts[0], _fixed(fixed)[0], tail.encode("utf-8"), parts[1]))


def _body_parts(body: dict[str, Any]) -> tuple[bytes, bytes] | None:
    """The JSON of `body` before and after the `_TEXT` it holds (UTF-8); None when `_TEXT` is
    not there exactly once or the SDK's encoder refuses the body."""
    try:
        head, sep, rest = _JSON(body).partition(_TEXT_JSON)
    except (TypeError, ValueError):  # (what the SDK's encoder refuses: it says so itself)
        return None
    if not sep or _TEXT_JSON in rest:
        return None
    return head.encode("utf-8"), rest.encode("utf-8")


def _sdk_json(body: dict[str, Any]) -> bytes:
    """`body` as the SDK encodes a JSON body (`openai._utils._json.openapi_dumps`), UTF-8."""
    return _JSON(body).encode("utf-8")


class _Sender:
    """The official client's own request path (`OpenAI.request`: auth, headers, timeouts,
    status errors) for a JSON body already encoded, without what `post` would redo at every
    call for a body it does not need to read: its request options are a copy of ones made
    once (not built from defaults), its URL is made once per path (the SDK's own merge with
    the base URL, which it would parse three times), and the answer comes back as the HTTP
    response (`cast_to` the httpx client's `Response`: no `APIResponse` around it), whose
    JSON `_request` reads itself. Per request, the SDK's telemetry headers left out (a new
    mapping each time: the SDK must never share one request's headers with another's)."""

    def __init__(self, client: Any):
        self.client = client
        self.response = _httpx_module(type(client._client)).Response
        self._urls: dict[str, str] = {}
        options = openai._models.FinalRequestOptions
        self._content = "content" in getattr(options, "model_fields", {})  # (older SDKs: JSON data only)
        self._template = options.construct(method="post", url="", **({"content": b""} if self._content else {}))

    def __call__(self, path: str, content: bytes) -> Any:
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = str(self.client._prepare_url(path))
        update: dict[str, Any] = {"url": url, "headers": dict.fromkeys(REQUEST_TELEMETRY, openai._types.Omit())}
        if self._content:
            update["content"] = content
        else:
            update["json_data"] = json.loads(content)
        return self.client.request(self.response, self._template.model_copy(update=update))


def _field(obj: Any, name: str) -> Any:
    """A field of a JSON object (the response is plain JSON: `cast_to=object`), else None."""
    return obj.get(name) if isinstance(obj, dict) else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(u: Any) -> Usage:
    if not isinstance(u, dict):
        return Usage()
    details = u.get("prompt_tokens_details")
    return Usage(
        prompt_tokens=_count(u.get("prompt_tokens")),
        completion_tokens=_count(u.get("completion_tokens")),
        cached_prompt_tokens=_count(_field(details, "cached_tokens")),
    )


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        msg = err.get("message") if isinstance(err, dict) else err
        if msg:
            return _one_line(str(msg))
    try:
        return _one_line(exc.response.text) or "(empty body)"
    except Exception:
        return "(no body)"


def _cause(exc: BaseException) -> str:
    root = exc.__cause__ or exc.__context__ or exc
    return _one_line(f"{type(root).__name__}: {root}")


def _snippet(obj: Any) -> str:
    return _one_line(obj if isinstance(obj, str) else repr(obj))


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
