"""How every statistic is printed, by the CLI and the app alike: p-values that never cross a
threshold by rounding ("p = 0.0499", "p < 0.001"), interval bounds rounded outward and never
printed as 0 when the interval excludes 0. JSON carries the unrounded values."""

from __future__ import annotations

import math

THRESHOLDS = (0.05, 0.025, 0.01, 0.001)


def p_text(p: float | None) -> str:
    """'p = 0.041', 'p = 0.0499' (0.049991: rounding would read 0.05), 'p < 0.001', 'p = n/a'."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "p = n/a"
    if p < 0.001:
        return "p < 0.001"
    digits, floor = 2, False
    while True:
        scale = 10 ** (digits - 1 - math.floor(math.log10(p)))
        shown = (math.floor(p * scale) if floor else round(p * scale)) / scale
        if shown > 0 and not any(p < t <= shown for t in THRESHOLDS):
            break
        digits, floor = digits + 1, True  # below a threshold: one more digit, never rounded up onto it
    return f"p = {shown:.{max(0, digits - 1 - math.floor(math.log10(p)))}f}"


def _outward(x: float, decimals: int, up: bool) -> float:
    f: int = 10**decimals
    return (math.ceil(x * f - 1e-9) if up else math.floor(x * f + 1e-9)) / f


def bound_texts(lo: float, hi: float, *, scale: float = 100.0, decimals: int = 0) -> tuple[str, str, int]:
    """The bounds (times `scale`) rounded outward, with more decimals when a bound that is
    not 0 would print as 0 (an interval that excludes 0 never shows 0). Returns the decimals
    used, so the estimate can be printed alike."""
    a, b = lo * scale, hi * scale
    d = decimals
    while d < 8:
        ra, rb = _outward(a, d, False), _outward(b, d, True)
        if not ((a > 0 and ra <= 0) or (b < 0 and rb >= 0)):
            break
        d += 1
    ra, rb = _outward(a, d, False), _outward(b, d, True)
    return f"{ra:+.{d}f}", f"{rb:+.{d}f}", d


def effect_text(
    effect: float | None,
    ci: tuple[float, float] | list[float] | None,
    p: float | None,
    *,
    unit: str = "points",
    scale: float = 100.0,
    decimals: int = 0,
    sep: str = ", ",
    ci_label: str = "",
) -> str:
    """The one format of an effect, its 95% interval and its p-value:
    '+42 points [+0.4, +75], p = 0.0499' (with `ci_label` '95% CI': '+42 points, 95% CI [+0.4,
    +75], p = 0.0499'; p None: no p part). Bounds are rounded outward; the estimate gets the
    bounds' decimals."""
    if effect is None or ci is None:
        return f"n/a{sep}{p_text(p)}" if p is not None else "n/a"  # p = None: no p-value part
    lo, hi, d = bound_texts(ci[0], ci[1], scale=scale, decimals=decimals)
    e = round(effect * scale, d)
    est = f"{e:+.{d}f}"
    if effect != 0 and float(est) == 0:  # an estimate of 0.04 points is not "+0"
        est = f"{effect * scale:+.2g}"
    tail = f"{sep}{p_text(p)}" if p is not None else ""
    label = f", {ci_label} " if ci_label else " "
    return f"{est}{' ' + unit if unit else ''}{label}[{lo}, {hi}]{tail}"
