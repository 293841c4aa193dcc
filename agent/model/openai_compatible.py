"""The OpenAI-compatible provider: one attempt of a request through the official client's public
API (`client.completions` / `client.chat.completions` `.with_streaming_response.create(...)`),
streamed (`stream=True`, usage asked for with `stream_options` where the server takes it) or
not, read within the wire's bound; and its errors classified for the retry policy.

The `messages` and `tools` styles send their pinned request JSON (messages, tools, one tool
call per step) to the chat API and return the assistant message as compact JSON: its content,
its `reasoning_content` (an extra field servers add to the message or the delta: vLLM's
reasoning parsers, DeepSeek; `reasoning` is read too) and its tool calls, assembled from the
streamed deltas by their index. The message and each delta are read as the SDK's public types
(`openai.types.chat.ChatCompletionMessage`, `ChoiceDelta`): attributes, and the reasoning from
their `model_extra`."""

from __future__ import annotations

import json
import threading
from typing import Any, Callable

from agent.model.api import UNREACHABLE, Cancelled, Malformed, Refused, Request, one_line
from agent.model.retries import RETRYABLE_STATUS, retry_after_s
from agent.model.wire import MAX_BODY_BYTES, http_modules, sdk, too_large
from trajectory.records import Usage

NO_USAGE_OPTION: set[str] = set()  # endpoints that refused `stream_options` (they stream without usage)


class StreamError(Exception):
    """The server sent an error in the middle of a streamed answer."""


class OpenAICompatible:
    """The provider of one endpoint: `client()` gives the shared `openai.OpenAI` (built on first
    use), `scrub` takes the key out of any text that could echo it."""

    def __init__(
        self,
        client: Callable[[], Any],
        public_url: str,
        timeout_s: Callable[[], float],
        scrub: Callable[[str], str],
        retry_after_max_s: float,
    ):
        self.client, self.public_url, self.timeout_s, self.scrub = client, public_url, timeout_s, scrub
        self.retry_after_max_s = retry_after_max_s  # a server's Retry-After is honoured up to this

    def send(
        self, request: Request, cancel: threading.Event | None, on_text: Callable[[str], None] | None
    ) -> tuple[str, Usage]:
        """(text, usage) of one attempt through the official SDK. Raises Cancelled when `cancel` was
        set while it was in flight, Refused or Malformed for an answer the wire refuses, and the
        SDK's own errors (for `classify`)."""
        from agent.model.cancel import Watched

        try:
            with Watched(cancel):
                return self._send(request, cancel, on_text)
        except Cancelled:
            raise
        except Exception:
            if cancel is not None and cancel.is_set():  # the connection Stop shut down, or the stream it closed
                raise Cancelled("cancelled while the request was in flight") from None
            raise

    def _send(
        self, request: Request, cancel: threading.Event | None, on_text: Callable[[str], None] | None
    ) -> tuple[str, Usage]:
        cfg = request.config
        conv = request.conversation
        chat = cfg.api_style != "completions"  # (a one-shot prompt of the conversation styles: one user message)
        args: dict[str, Any] = {
            "model": cfg.model,
            "temperature": cfg.temperature,
            "top_p": cfg.top_p,
            "max_tokens": cfg.max_tokens,
        }
        if request.stop:
            args["stop"] = request.stop
        if conv:  # the pinned request: messages (and tools, tool_choice, parallel_tool_calls)
            body = json.loads(request.text)
            args.update(
                {k: v for k, v in body.items() if k in ("messages", "tools", "tool_choice", "parallel_tool_calls")}
            )
            if request.chat_extra:
                args["extra_body"] = request.chat_extra
        elif chat:
            args["messages"] = [{"role": "user", "content": request.text}]
            if request.chat_extra:
                args["extra_body"] = request.chat_extra
        else:
            args["prompt"] = request.text
        if request.stream:
            args["stream"] = True
            if self.public_url not in NO_USAGE_OPTION:
                args["stream_options"] = {"include_usage": True}
        client = self.client()
        api = (client.chat.completions if chat else client.completions).with_streaming_response
        try:
            return self._read(api.create(**args), request, chat, cancel, on_text, conv)
        except sdk().BadRequestError as exc:  # a server that does not take `stream_options`: once more without
            if "stream_options" not in args or "stream_options" not in f"{exc.body} {exc.message}":
                raise
            NO_USAGE_OPTION.add(self.public_url)
            del args["stream_options"]
        return self._read(api.create(**args), request, chat, cancel, on_text, conv)

    @staticmethod
    def _read(
        response: Any,
        request: Request,
        chat: bool,
        cancel: threading.Event | None,
        on_text: Callable[[str], None] | None,
        conv: bool = False,
    ) -> tuple[str, Usage]:
        """Open the response (the request is sent here) and read it: streamed, or in one piece."""
        with response as resp:
            if request.stream and resp.headers.get("content-type", "").startswith("text/event-stream"):
                got = _read_events(resp, chat, cancel, on_text, conv)
            else:
                got = _read_json(resp, chat, conv)  # (a server that does not stream answers in one piece)
        if cancel is not None and cancel.is_set():  # (Stop's shutdown can look like the end of the body)
            raise Cancelled("cancelled while the request was in flight")
        return got

    def classify(self, exc: Exception) -> tuple[str, bool, float | None, bool]:
        """(scrubbed one-line reason, retryable?, server-requested delay or None, rate limited?)."""
        openai = sdk()
        refused = _refused(exc)
        if refused is not None:
            return self.scrub(str(refused)), False, None, False
        if isinstance(exc, Malformed):
            return self.scrub(f"malformed response from the model server: {exc}"), True, None, False
        if isinstance(exc, StreamError):
            return self.scrub(f"model server error in the streamed answer: {exc}"), True, None, False
        if isinstance(exc, openai.APITimeoutError):
            return f"request timed out after {self.timeout_s():g}s", True, None, False
        if isinstance(exc, openai.APIConnectionError):
            return self.scrub(f"{UNREACHABLE} at {self.public_url}: {_cause(exc)}"), True, None, False
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            retry = status in RETRYABLE_STATUS or status >= 500
            what = {
                401: "authentication failed (check OPENAI_API_KEY)",
                403: "permission denied",
                404: "not found (check the model name and base URL)",
                429: "rate limited",
            }.get(status, "model server error")
            delay = (
                retry_after_s(getattr(exc.response, "headers", None) or {}, self.retry_after_max_s) if retry else None
            )
            return self.scrub(f"{what} (HTTP {status}): {_error_message(exc)}"), retry, delay, status == 429
        hx = http_modules()[0]  # (an error while the answer's body is read comes from httpx itself)
        if isinstance(exc, hx.TimeoutException):
            return f"request timed out after {self.timeout_s():g}s", True, None, False
        if isinstance(exc, (hx.TransportError, ConnectionError, OSError)):
            return (
                self.scrub(f"{UNREACHABLE} at {self.public_url}: {one_line(f'{type(exc).__name__}: {exc}')}"),
                True,
                None,
                False,
            )
        return self.scrub(f"model call failed: {type(exc).__name__}: {exc}"), False, None, False


def _refused(exc: BaseException) -> Refused | None:
    """The wire's refusal behind `exc` (the SDK wraps what its http client raised)."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, Refused):
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def _read_json(resp: Any, chat: bool, conv: bool = False) -> tuple[str, Usage]:
    """A whole (non-streamed) answer: its JSON, decoded text bounded too."""
    body = bytearray()
    for part in resp.iter_bytes():
        body += part
        if len(body) > MAX_BODY_BYTES:
            raise Refused(too_large())
    try:
        data = json.loads(bytes(body))
    except ValueError as exc:  # a 200 whose body is not JSON
        raise Malformed(f"body is not valid JSON ({one_line(str(exc), 120)})") from exc
    choices = data.get("choices") if isinstance(data, dict) else None
    if not choices or not isinstance(choices, list):
        raise Malformed(f"response has no choices: {one_line(repr(data))}")
    first = choices[0]
    if chat:
        message = _field(first, "message")
        if message is None:
            raise Malformed(f"chat choice has no message: {one_line(repr(data))}")
        if conv:  # read as the SDK's message type: its attributes, the reasoning from its model_extra
            m = _sdk(lambda types: types.ChatCompletionMessage.model_validate(message), data)
            fns = [(c.id, getattr(c, "function", None)) for c in m.tool_calls or []]  # (a custom tool: no function)
            got = [(cid, fn.name if fn else "", fn.arguments if fn else "") for cid, fn in fns]
            return message_text(m.content, _reasoning(m, data), got), usage_of(data.get("usage"))
        text = _field(message, "content")
    else:
        text = _field(first, "text")
    if text is not None and not isinstance(text, str):
        raise Malformed(f"completion text is not a string: {one_line(repr(data))}")
    return text or "", usage_of(data.get("usage"))


def _read_events(
    resp: Any, chat: bool, cancel: threading.Event | None, on_text: Callable[[str], None] | None, conv: bool = False
) -> tuple[str, Usage]:
    """A streamed answer (server-sent events): the text of its chunks, told to `on_text` as it
    grows, and the usage of its last chunk that has one. Stop closes the response. `conv`: the
    deltas' reasoning and tool calls are assembled too, and the answer is the message's JSON."""
    parts: list[str] = []
    thinking: list[str] = []
    calls: dict[int, list] = {}  # index -> [id, name, argument pieces]
    usage: Any = None
    seen = 0
    pending = b""
    done = False
    for block in resp.iter_bytes():
        seen += len(block)
        if seen > MAX_BODY_BYTES:
            raise Refused(too_large())
        if done:  # (read to its end: a connection whose answer was read whole is kept for the next request)
            continue
        if cancel is not None and cancel.is_set():
            resp.close()  # the public door: the stream ends here, its connection closed
            raise Cancelled("cancelled while the answer was streaming")
        lines = (pending + block).split(b"\n")
        pending = lines.pop()
        grew = False
        for line in lines:
            if not line.startswith(b"data:"):
                continue  # (blank lines, `event:`, `id:`, comments)
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                break
            chunk = _chunk(data)
            if chunk.get("usage") is not None:
                usage = chunk["usage"]
            choices = chunk.get("choices")
            if isinstance(choices, list) and choices:
                first = choices[0]
                piece = _field(_field(first, "delta"), "content") if chat else _field(first, "text")
                if piece is not None and not isinstance(piece, str):
                    raise Malformed(f"streamed text is not a string: {one_line(repr(chunk))}")
                if piece:
                    parts.append(piece)
                    grew = True
                if conv:
                    _delta_extras(_field(first, "delta"), chunk, thinking, calls)
        if grew and on_text is not None:
            on_text("".join(parts))
    if conv:
        got = [(c[0], c[1], "".join(c[2])) for _, c in sorted(calls.items())]
        return message_text("".join(parts) or None, "".join(thinking) or None, got), usage_of(usage)
    return "".join(parts), usage_of(usage)


def _delta_extras(delta: Any, chunk: Any, thinking: list[str], calls: dict[int, list]) -> None:
    """A delta's reasoning piece and tool-call pieces, read as the SDK's delta type (a call's id
    and name come in its first piece, its arguments in pieces, all under its `index`)."""
    if not isinstance(delta, dict):
        return
    d = _sdk(lambda types: types.chat_completion_chunk.ChoiceDelta.model_validate(delta), chunk)
    r = _reasoning(d, chunk)
    if r:
        thinking.append(r)
    for n, piece in enumerate(d.tool_calls or []):
        slot = calls.setdefault(piece.index if piece.index is not None else n, [None, None, []])
        if piece.id:
            slot[0] = piece.id
        fn = piece.function
        if fn is not None and fn.name and slot[1] is None:  # (some servers repeat it in every piece)
            slot[1] = fn.name
        if fn is not None and fn.arguments is not None:
            slot[2].append(fn.arguments)


def _sdk(make: Callable[[Any], Any], data: Any) -> Any:
    """An answer's part as the `openai` SDK's public type (`openai.types.chat`); one that does
    not fit it is malformed."""
    import openai.types.chat as types
    from pydantic import ValidationError

    try:
        return make(types)
    except ValidationError as exc:
        raise Malformed(
            f"not a chat message the SDK reads ({one_line(str(exc), 160)}): {one_line(repr(data))}"
        ) from None


def _reasoning(obj: Any, data: Any) -> str | None:
    """The reasoning channel a server adds to a message or delta as an extra field (the SDK's
    `model_extra`): `reasoning_content`, or `reasoning` as newer vLLM names it."""
    extra = obj.model_extra or {}
    value = extra.get("reasoning_content")
    if value is None:
        value = extra.get("reasoning")
    if value is not None and not isinstance(value, str):
        raise Malformed(f"reasoning_content is not a string: {one_line(repr(data))}")
    return value


def message_text(content: str | None, reasoning: str | None, calls: list[tuple[Any, Any, Any]]) -> str:
    """The assistant message as the call's completion (compact JSON): role, content,
    `reasoning_content` when there is one, `tool_calls` (arguments as the server sent them)."""
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning:
        msg["reasoning_content"] = reasoning
    if calls:
        msg["tool_calls"] = [
            {
                "id": cid if isinstance(cid, str) else "",
                "type": "function",
                "function": {
                    "name": name if isinstance(name, str) else "",
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
            for cid, name, args in calls
        ]
    return json.dumps(msg, ensure_ascii=False, separators=(",", ":"))


def _chunk(data: bytes) -> dict[str, Any]:
    try:
        chunk = json.loads(data)
    except ValueError as exc:
        raise Malformed(f"a streamed chunk is not valid JSON ({one_line(str(exc), 120)})") from exc
    if not isinstance(chunk, dict):
        raise Malformed(f"a streamed chunk is not a JSON object: {one_line(repr(chunk))}")
    if chunk.get("error") is not None:
        err = chunk["error"]
        raise StreamError(one_line(str(err.get("message") if isinstance(err, dict) else err)))
    return chunk


def _field(obj: Any, name: str) -> Any:
    """A field of a JSON object, else None."""
    return obj.get(name) if isinstance(obj, dict) else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage_of(u: Any) -> Usage:
    """A response's `usage` object as Usage (missing or malformed counts: None)."""
    if not isinstance(u, dict):
        return Usage()
    details = u.get("prompt_tokens_details")
    return Usage(
        prompt_tokens=_count(u.get("prompt_tokens")),
        completion_tokens=_count(u.get("completion_tokens")),
        cached_prompt_tokens=_count(_field(details, "cached_tokens")),
    )


def _error_message(exc: Any) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        msg = err.get("message") if isinstance(err, dict) else err
        if msg:
            return one_line(str(msg))
    try:
        return one_line(exc.response.text) or "(empty body)"
    except Exception:
        return "(no body)"


def _cause(exc: BaseException) -> str:
    root = exc.__cause__ or exc.__context__ or exc
    return one_line(f"{type(root).__name__}: {root}")
