"""What benchmarks/runner.py reports of its runs: each round's runner runs set against the bare
runs around them, the ranges and medians over the rounds per level, whether calls/s rises with
concurrency, and the runner's CPU per call in parts. Imported before _root, as _runner_clocks."""

from __future__ import annotations

import statistics
from typing import Any


def span(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:g}" if lo == hi else f"{lo:g}-{hi:g}"


def median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def round_summary(level: dict) -> dict:
    """One round at one level: runner runs r1..rK between bare runs b0..bK; each runner run is
    set against the mean of the two bare runs around it (a load that drifts through the round
    moves both sides alike: neither is favoured). `cpu_ratio`, `rate_ratio`: the runner's sum
    over the sum of those means; `pair_ratios`: each run's own CPU ratio."""
    runs, bares = level["runner"], level["bare"]
    around = [{k: (a[k] + b[k]) / 2 for k in ("cpu_ms_per_call", "calls_per_s")} for a, b in zip(bares, bares[1:])]

    def total(xs: list[dict], key: str) -> float:
        return sum(x[key] for x in xs)

    def mean(xs: list[dict], key: str) -> float:
        return round(total(xs, key) / len(xs), 3)

    return {
        "runner_cpu": mean(runs, "cpu_ms_per_call"),
        "bare_cpu": mean(bares, "cpu_ms_per_call"),
        "cpu_ratio": round(total(runs, "cpu_ms_per_call") / total(around, "cpu_ms_per_call"), 2),
        "pair_ratios": [round(r["cpu_ms_per_call"] / a["cpu_ms_per_call"], 2) for r, a in zip(runs, around)],
        "runner_rate": mean(runs, "calls_per_s"),
        "bare_rate": mean(bares, "calls_per_s"),
        "rate_ratio": round(total(runs, "calls_per_s") / total(around, "calls_per_s"), 2),
        "env": mean(runs, "env_ms_per_call"),
    }


def table(rounds: list[dict], levels: list[int]) -> dict:
    """Per level: the ranges over the rounds of the runner's and the bare client's figures,
    and of their ratios (each round's runner runs over the bare runs around them), with the
    medians over the rounds."""
    out = {}
    for c in levels:
        ss = [round_summary(r[str(c)]) for r in rounds]
        out[str(c)] = {
            "runner_cpu_ms_per_call": span([x["runner_cpu"] for x in ss]),
            "bare_cpu_ms_per_call": span([x["bare_cpu"] for x in ss]),
            "cpu_ratio": span([x["cpu_ratio"] for x in ss]),
            "runner_calls_per_s": span([x["runner_rate"] for x in ss]),
            "bare_calls_per_s": span([x["bare_rate"] for x in ss]),
            "rate_ratio": span([x["rate_ratio"] for x in ss]),
            "env_ms_per_call": span([x["env"] for x in ss]),
            "cpu_ratio_median": median([x["cpu_ratio"] for x in ss]),
            "cpu_ratio_per_run": span([q for x in ss for q in x["pair_ratios"]]),
            "rate_ratio_median": median([x["rate_ratio"] for x in ss]),
            "runner_calls_per_s_median": median([x["runner_rate"] for x in ss]),
            "bare_calls_per_s_median": median([x["bare_rate"] for x in ss]),
        }
    return out


def rising(rounds: list[dict], levels: list[int]) -> dict:
    """`rising` (the runner's calls/s never falls by more than 5% from a level to the next, in
    any round) and, when 8 and 32 are both levels, `rising_8_to_32` per side (calls/s at 32 at
    least 1.25x that at 8 in every round: four times the threads, a rise well above the noise)
    with `growth_8_to_32` (those factors' range)."""
    ss = [{c: round_summary(r[str(c)]) for c in levels} for r in rounds]
    out: dict[str, Any] = {
        "rising": all(
            min(s[b]["runner_rate"] / s[a]["runner_rate"] for s in ss) >= 0.95 for a, b in zip(levels, levels[1:])
        )
    }
    if 8 in levels and 32 in levels:
        growth = {
            side: [round(s[32][f"{side}_rate"] / s[8][f"{side}_rate"], 2) for s in ss] for side in ("runner", "bare")
        }
        out["rising_8_to_32"] = {side: min(g) >= 1.25 for side, g in growth.items()}
        out["growth_8_to_32"] = {side: span(g) for side, g in growth.items()}
    return out


def cpu_parts(rounds: list[dict], level: int, store_run: dict) -> dict:
    """The runner's CPU per call at `level` in parts; `engine` is what the others leave."""
    ss = [round_summary(r[str(level)]) for r in rounds]
    total, env = [x["runner_cpu"] for x in ss], [x["env"] for x in ss]
    store, ours = store_run["store_ms_per_call"], store_run["client_ms_per_call"]
    return {
        "level": level,
        "total": span(total),
        "bare_client": span([x["bare_cpu"] for x in ss]),
        "client": ours,
        "environment": span(env),
        "store": store,
        "engine": span([round(t - ours - e - store, 3) for t, e in zip(total, env)]),
    }
