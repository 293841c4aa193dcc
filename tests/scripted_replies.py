"""What the scripted server answers (`tests.scripted_server`): a `Reply` - a completion, an error
status, a delay, a hang-up, a raw body, tool calls, ... - and how a script item becomes one (`as_reply`)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable, Union


@dataclass
class Reply:
    """One scripted answer. With only `text` set it is a normal completion.

    status      HTTP status to answer with instead (429, 500, ...), OpenAI error JSON body.
    retry_after value of the Retry-After header (seconds) sent with an error status.
    message     error message for an error status.
    delay_s     sleep this long before answering (longer than the client timeout = timeout).
    body        raw response body (str/bytes) sent as-is with `content_type` (garbage).
    json        raw JSON object sent as the body (e.g. a completion missing `choices`).
    ignore_stop do not apply the request's stop sequences (a server that ignores `stop`).
    prompt_tokens / completion_tokens / cached_tokens override the usage numbers;
    usage=False omits `usage`; cached_tokens=None omits `prompt_tokens_details`.
    hang_up     close the connection without answering (a server that hangs up).
    hang        never answer: hold the request until the server stops or is reset (a server
                that never answers, whatever the client's timeout).
    chunk_delay_s  (streamed answers) sleep this long before each chunk after the first.
    endless     send body bytes forever (a hostile server): streamed or not.
    huge_bytes  send a body of this many bytes (no Content-Length) instead of a completion.
    location    answer `status` (a 307/308) with this Location header (a redirect).
    tool_calls  (chat) the assistant's tool calls: `tool_call(name, arguments)` items (arguments
                a dict, or a string sent as it is: malformed JSON); several = parallel calls.
    reasoning   (chat) the message's `reasoning_content` (streamed first, as reasoning servers do).

    A request with `stream: true` gets server-sent events (one chunk per word, then a usage
    chunk when `stream_options.include_usage` asks for it, then `[DONE]`) unless the server
    was made with `streams=False` (it answers in one piece, as servers that do not stream do);
    made with `stream_options=False`, it refuses a request that has `stream_options` (HTTP 400).

    Chat requests are checked as a real server would (`check_conversation`): roles in order,
    every `role: "tool"` message naming the preceding assistant's next unanswered call, every
    call answered, calls only to declared `tools`, arguments as JSON strings, and one call per
    step (`parallel_tool_calls: false`) when tools are sent; a request that breaks a rule gets
    HTTP 400 saying which. `require_tools=True` also refuses a chat request without `tools`.
    """

    text: str = ""
    status: int = 200
    retry_after: float | str | None = None
    message: str | None = None
    delay_s: float = 0.0
    body: str | bytes | None = None
    content_type: str = "application/json"
    json: Any = None
    ignore_stop: bool = False
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = 0
    usage: bool = True
    headers: dict[str, str] = field(default_factory=dict)
    hang_up: bool = False
    hang: bool = False
    chunk_delay_s: float = 0.0
    endless: bool = False
    huge_bytes: int = 0
    location: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    reasoning: str | None = None

    def __post_init__(self) -> None:
        # a responder that wraps a Reply in a Reply made the server hang up in silence, and the
        # client retry after a backoff: a test waited for seconds and still passed
        if not isinstance(self.text, str):
            raise TypeError(f"Reply.text must be a string, not {type(self.text).__name__}")


ScriptItem = Union[str, dict, Reply, Callable[[dict[str, Any]], Any]]


def as_reply(item: Any) -> Reply:
    """Normalise a script item (string, dict of Reply fields, or Reply) to a Reply."""
    if isinstance(item, Reply):
        return item
    if isinstance(item, str):
        return Reply(text=item)
    if isinstance(item, dict):
        known = {f.name for f in fields(Reply)}
        unknown = set(item) - known
        if unknown:
            raise ValueError(f"unknown reply fields: {sorted(unknown)}")
        return Reply(**item)
    raise TypeError(f"cannot script a reply from {type(item).__name__}")
