"""What the scripted server reads of a request: its prompt text (the prompt, or the messages'
contents), stop sequences applied as a server applies them, and a responder keyed by a table."""

from __future__ import annotations

from typing import Any, Callable

Responder = Callable[[dict[str, Any]], Any]


def apply_stop(text: str, stop: Any) -> tuple[str, bool]:
    """Cut `text` at the earliest occurrence of any stop string (the stop removed)."""
    if stop is None:
        return text, False
    stops = [stop] if isinstance(stop, str) else [s for s in stop if s]
    cut = min((i for i in (text.find(s) for s in stops) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


def prompt_text(body: dict[str, Any] | None) -> str:
    """The text a request asks about: `prompt` for completions, the messages for chat."""
    if not body:
        return ""
    if "prompt" in body:
        p = body["prompt"]
        return p if isinstance(p, str) else "".join(map(str, p))
    parts = []
    for m in body.get("messages") or []:
        c = m.get("content")
        if isinstance(c, list):
            c = "".join(part.get("text", "") for part in c if isinstance(part, dict))
        parts.append(c or "")
    return "\n".join(parts)


def table_responder(table: dict[str, Any], default: Any = None) -> Responder:
    """A responder that answers from `table`, keyed by text near the end of the prompt.

    The key whose last occurrence in the prompt ends latest wins (ties: the longer key),
    so a table keyed by each step's last prompt line plays an agent deterministically.
    With no match it returns `default`, or an HTTP 500 naming the prompt's tail."""

    def respond(body: dict[str, Any]) -> Any:
        prompt = prompt_text(body)
        best, best_rank = None, None
        for key in table:
            pos = prompt.rfind(key)
            if pos >= 0:
                rank = (pos + len(key), len(key))
                if best_rank is None or rank > best_rank:
                    best, best_rank = key, rank
        if best is not None:
            return table[best]
        if default is not None:
            return default
        return {
            "status": 500,
            "message": f"no scripted reply for prompt ending {prompt[-120:]!r}",
        }  # (a Reply's fields)

    return respond
