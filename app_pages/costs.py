"""What a version's model calls cost: tokens summed once per call (cached calls free), dollars
at each model's price, and the cost cell. Pure, no Streamlit."""

from __future__ import annotations

from typing import Any, Iterable


def usage_totals(call_ids: Iterable[int], calls_by_id: dict[int, Any]) -> tuple[int, int]:
    """(prompt, completion) tokens of the given calls (cached calls cost no tokens; a call
    of steps carried over to another branch counts once)."""
    p = c = 0
    for cid in set(call_ids):
        call = calls_by_id.get(cid)
        if call is None or call.cached:
            continue
        p += call.usage.prompt_tokens or 0
        c += call.usage.completion_tokens or 0
    return p, c


def cost(prompt_tokens: int, completion_tokens: int, price: dict | None) -> float | None:
    """Dollars, from a price entry {"prompt": $/1M tokens, "completion": $/1M tokens}."""
    if not price:
        return None
    return (prompt_tokens * float(price.get("prompt", 0)) + completion_tokens * float(price.get("completion", 0))) / 1e6


def calls_cost(call_ids: Iterable[int], calls_by_id: dict[int, Any], prices: dict[str, dict]) -> float | None:
    """Dollars of the given calls, each at the price of the model it was sent to (a
    version may mix models); None when a counted call's model has no price."""
    total = 0.0
    for cid in set(call_ids):
        call = calls_by_id.get(cid)
        if call is None or call.cached:
            continue
        usage = call.usage
        dollars = cost(usage.prompt_tokens or 0, usage.completion_tokens or 0, prices.get(call.model))
        if dollars is None:
            return None
        total += dollars
    return total


def money(dollars: float | None) -> str:
    """A cost cell: "$0.0123", or nothing when no price is known."""
    return "" if dollars is None else f"${dollars:.4f}"
