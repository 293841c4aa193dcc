"""A scripted OpenAI-compatible HTTP server on 127.0.0.1: the only stand-in for a model.

The real `openai` client talks to it over real HTTP. Replies come from a script (a queue),
from a callable responder, or from a default; faults (429, 5xx, timeouts, garbage bodies)
are scripted the same way. Stop sequences are applied like a real server, so the engine's
stop handling is exercised for real. Every request is recorded for assertions.

    llm = ScriptedLLM().start()
    llm.push("Thought: go\\nAction: look", Reply(status=429, retry_after=0.1), "x")
    client = OpenAI(base_url=llm.base_url, api_key="k"); ...; llm.stop()
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.scripted_conversation import check_conversation, tool_call  # noqa: F401 - re-exported
from tests.scripted_replies import Reply, ScriptItem, as_reply  # noqa: F401 - re-exported (tests import them here)
from tests.scripted_text import Responder, apply_stop, prompt_text, table_responder  # noqa: F401

DEFAULT_MODEL = "scripted-model"


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any  # parsed JSON, or None
    raw: bytes
    received_at: float  # time.monotonic()

    @property
    def prompt(self) -> str:
        return prompt_text(self.body if isinstance(self.body, dict) else None)

    @property
    def stop(self) -> Any:
        return self.body.get("stop") if isinstance(self.body, dict) else None


class ScriptedLLM:
    """The server object: a script queue, a responder, a default, and the requests seen."""

    EXHAUSTED = "script exhausted: no scripted reply left for this request"

    def __init__(
        self,
        *,
        default: ScriptItem | None = None,
        models: list[str] | None = None,
        streams: bool = True,
        stream_options: bool = True,
        require_tools: bool = False,
    ):
        self.streams, self.stream_options = streams, stream_options
        self.require_tools = require_tools
        self._lock = threading.Lock()
        self._queue: list[ScriptItem] = []
        self.default: ScriptItem | None = default
        self.responder: Responder | None = None
        self.models = models or [DEFAULT_MODEL]
        self.requests: list[RecordedRequest] = []
        self._cancel = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- script API -------------------------------------------------------------------
    def push(self, *items: ScriptItem) -> "ScriptedLLM":
        """Append replies: strings, Reply objects, dicts of Reply fields, or callables."""
        for it in items:
            if not callable(it):
                as_reply(it)  # validate now, fail in the test, not in the server thread
        with self._lock:
            self._queue.extend(items)
        return self

    def set_default(self, item: ScriptItem | None) -> None:
        """Answer with this when the queue is empty (None: HTTP 500 "script exhausted")."""
        self.default = item

    def set_responder(self, fn: Responder | None) -> None:
        """Answer from `fn(request_json)` when the queue is empty (before the default)."""
        self.responder = fn

    def reset(self) -> None:
        """Forget the script, responder, default and recorded requests; cut pending delays."""
        self._cancel.set()
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.default = None
            self.responder = None
        self._cancel = threading.Event()

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def completion_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.method == "POST"]

    @property
    def last_request(self) -> RecordedRequest:
        return self.completion_requests[-1]

    # -- lifecycle --------------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "ScriptedLLM":
        if self._httpd is not None:
            return self
        handler = type("Handler", (_Handler,), {"llm": self})
        self._httpd = _Server(("127.0.0.1", 0), handler)
        # stop() waits for the serve loop's next poll: a short interval keeps each test's
        # teardown short (an idle poll is one select call)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.005},
            daemon=True,
            name=f"scripted-llm-{self.port}",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._cancel.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "ScriptedLLM":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- answering (server thread) ----------------------------------------------------
    def _next_item(self, body: Any) -> Reply:
        with self._lock:
            item = self._queue.pop(0) if self._queue else None
        if item is None and self.responder is not None:
            item = self.responder
        if item is None:
            item = self.default
        if item is None:
            return Reply(status=500, message=self.EXHAUSTED)
        if callable(item) and not isinstance(item, Reply):
            item = item(body if isinstance(body, dict) else {})
        return as_reply(item)

    def _record(self, req: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(req)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out and hung up is expected; stay quiet.
        pass


class _Handler(BaseHTTPRequestHandler):
    llm: ScriptedLLM
    protocol_version = "HTTP/1.0"
    server_version = "ScriptedLLM/1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        pass

    def _read(self) -> tuple[bytes, Any]:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return raw, json.loads(raw) if raw else None
        except ValueError:
            return raw, None

    def _record(self, raw: bytes, body: Any) -> None:
        self.llm._record(
            RecordedRequest(
                method=self.command,
                path=self.path.split("?")[0],
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
                raw=raw,
                received_at=time.monotonic(),
            )
        )

    def _send(
        self,
        status: int,
        payload: Any,
        *,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        data = (
            payload
            if isinstance(payload, bytes)
            else (payload.encode() if isinstance(payload, str) else json.dumps(payload).encode())
        )
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        kind = {429: "rate_limit_exceeded", 404: "not_found"}.get(status, "server_error")
        self._send(status, {"error": {"message": message, "type": kind, "param": None, "code": kind}}, headers=headers)

    def do_GET(self) -> None:
        self._record(b"", None)
        path = self.path.split("?")[0].rstrip("/")
        if path == "/v1/models":
            self._send(
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": m, "object": "model", "created": 0, "owned_by": "scripted"} for m in self.llm.models
                    ],
                },
            )
        else:
            self._error(404, f"no route GET {path}")

    def do_POST(self) -> None:
        raw, body = self._read()
        self._record(raw, body)
        path = self.path.split("?")[0].rstrip("/")
        if "://" in path:  # asked as a proxy (absolute form): the server answers itself
            path = "/" + path.split("://", 1)[1].split("/", 1)[-1]
        if path not in ("/v1/completions", "/v1/chat/completions"):
            return self._error(404, f"no route POST {path}")
        if not isinstance(body, dict):
            return self._error(400, "request body is not a JSON object")
        if path == "/v1/chat/completions":
            broken = check_conversation(body, require_tools=self.llm.require_tools)
            if broken is not None:
                return self._error(400, broken)
        try:
            reply = self.llm._next_item(body)
        except Exception as exc:  # a broken responder must show up in the test
            return self._error(500, f"scripted responder failed: {exc!r}")
        if reply.hang:  # never answers: held until stop/reset, then hung up
            self.llm._cancel.wait()
            return
        if reply.delay_s and self.llm._cancel.wait(reply.delay_s):
            return  # reset/stop while sleeping: just hang up
        if reply.hang_up:
            self.close_connection = True
            return
        if reply.endless or reply.huge_bytes:
            return self._flood(reply)
        headers = dict(reply.headers)
        if reply.location is not None:
            headers["Location"] = reply.location
            return self._send(reply.status, b"", headers=headers)
        if reply.retry_after is not None:
            headers["Retry-After"] = str(reply.retry_after)
        if reply.body is not None:
            return self._send(reply.status, reply.body, content_type=reply.content_type, headers=headers)
        if reply.json is not None:
            return self._send(reply.status, reply.json, headers=headers)
        if reply.status != 200:
            return self._error(reply.status, reply.message or f"scripted HTTP {reply.status}", headers)
        if body.get("stream") and self.llm.streams:
            if body.get("stream_options") is not None and not self.llm.stream_options:
                return self._error(400, "Unrecognized request argument supplied: stream_options")
            return self._stream(path, body, reply, headers)
        self._send(200, _completion_json(path, body, reply), headers=headers)

    def _flood(self, reply: Reply) -> None:
        """A body that never ends (or is `huge_bytes` long), without a Content-Length."""
        block = b" " * 65536
        sent = 0
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream" if self.llm.streams else "application/json")
            self.end_headers()
            while reply.endless or sent < reply.huge_bytes:
                self.wfile.write(block)
                sent += len(block)
                if self.llm._cancel.is_set():
                    return
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass

    def _stream(self, path: str, body: dict[str, Any], reply: Reply, headers: dict[str, str]) -> None:
        """The answer as server-sent events, one chunk per word (the OpenAI stream format)."""
        whole = _completion_json(path, body, reply)
        chat = path != "/v1/completions"
        choice = whole["choices"][0]
        text = (choice["message"]["content"] or "") if chat else choice["text"]
        pieces = [p for p in text.replace(" ", "\x00 ").split("\x00") if p] or [""]
        deltas: list[dict[str, Any]] = [{"content": p} for p in pieces]
        if chat and reply.reasoning:  # the reasoning channel streams first
            deltas[:0] = [{"reasoning_content": p} for p in reply.reasoning.replace(" ", "\x00 ").split("\x00") if p]
        for i, c in enumerate(choice["message"].get("tool_calls") or [] if chat else []):
            args = c["function"]["arguments"]
            deltas.append(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": c["id"],
                            "type": "function",
                            "function": {"name": c["function"]["name"], "arguments": ""},
                        }
                    ]
                }
            )
            deltas += [
                {"tool_calls": [{"index": i, "function": {"arguments": args[j : j + 7]}}]}
                for j in range(0, len(args), 7)
            ]
        self._chunked = self.protocol_version == "HTTP/1.1"  # (keep-alive: chunked, as vLLM/SGLang stream)
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            if self._chunked:
                self.send_header("Transfer-Encoding", "chunked")
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            for i, piece in enumerate(deltas):
                if i and reply.chunk_delay_s and self.llm._cancel.wait(reply.chunk_delay_s):
                    return
                delta = {"index": 0, "finish_reason": None, "logprobs": None}
                delta.update({"delta": piece} if chat else {"text": piece["content"]})
                self._event(
                    {
                        "id": whole["id"],
                        "object": "chat.completion.chunk" if chat else "text_completion",
                        "created": whole["created"],
                        "model": whole["model"],
                        "choices": [delta],
                    }
                )
            last = {"index": 0, "finish_reason": choice["finish_reason"], "logprobs": None}
            last.update({"delta": {}} if chat else {"text": ""})
            self._event(
                {
                    "id": whole["id"],
                    "object": "chat.completion.chunk" if chat else "text_completion",
                    "created": whole["created"],
                    "model": whole["model"],
                    "choices": [last],
                }
            )
            if (body.get("stream_options") or {}).get("include_usage") and "usage" in whole:
                self._event(
                    {
                        "id": whole["id"],
                        "object": "chat.completion.chunk" if chat else "text_completion",
                        "created": whole["created"],
                        "model": whole["model"],
                        "choices": [],
                        "usage": whole["usage"],
                    }
                )
            self._write(b"data: [DONE]\n\n")
            if self._chunked:
                self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _event(self, data: dict[str, Any]) -> None:
        self._write(b"data: " + json.dumps(data).encode() + b"\n\n")

    def _write(self, data: bytes) -> None:
        if self._chunked:
            data = b"%x\r\n%s\r\n" % (len(data), data)
        self.wfile.write(data)
        self.wfile.flush()


def _completion_json(path: str, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    text = reply.text
    if not reply.ignore_stop:
        text, _ = apply_stop(text, body.get("stop"))
    finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    model = body.get("model") or DEFAULT_MODEL
    created = int(time.time())
    if path == "/v1/completions":
        out: dict[str, Any] = {
            "id": f"cmpl-{uuid.uuid4().hex[:12]}",
            "object": "text_completion",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}],
        }
    else:
        out = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": finish,
                    "logprobs": None,
                    "message": {"role": "assistant", "content": text},
                }
            ],
        }
        message = out["choices"][0]["message"]
        if reply.reasoning is not None:
            message["reasoning_content"] = reply.reasoning
        if reply.tool_calls:
            message["tool_calls"] = reply.tool_calls
            message["content"] = text or None
    if reply.usage:
        pt = reply.prompt_tokens if reply.prompt_tokens is not None else len(prompt_text(body).split())
        ct = reply.completion_tokens if reply.completion_tokens is not None else len(text.split())
        usage: dict[str, Any] = {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}
        if reply.cached_tokens is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": reply.cached_tokens}
        out["usage"] = usage
    return out
