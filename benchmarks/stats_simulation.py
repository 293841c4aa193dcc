"""Benchmark: size and coverage of every interval and test the product reports (issue 27).

Size = P(p < 0.05) when there is no effect (must be <= 0.055); coverage = P(the 95% interval
contains the true difference) (must be >= 0.94). Each reported interval inverts its test,
so under no effect coverage = 1 - size; coverage is also measured under effects.

- paired tasks (`experiment compare`), n = 20, 50, 200, 500: computed exactly by summing
  over the multinomial table (no Monte Carlo error). Size: the worst over the share of
  discordant pairs psi = 0.02 ... 1; coverage: the worst over (p10, p01) with
  psi in {0.05, 0.1, 0.3, 0.6} and theta = p10 / psi in {0.5, 0.7, 0.9, 1}.
  Reported: exact McNemar + its inverted interval; shown for the record: mid-p McNemar.
- paired tasks with errors, n = 50 and 200: no true difference but 20% of B's failures end as
  errors; the size of the exact McNemar test when errors count as failures (the default) and
  when they are left out (`--errors exclude`), Monte Carlo (--reps draws).
- rollouts (`whatif`), 3, 5 and 10 per arm: exact over all tables. Size: worst over the
  common rate 0.01 ... 0.99; coverage: worst over (p1, p2) on a 0.05 grid. Reported:
  Miettinen-Nurminen score interval and test with continuity correction; shown: without.
- pooled what-if (`whatif --experiment`), episodes x rollouts 1x3, 2x5, 3x4, 10x10, 20x5,
  30x1, per-episode base rates uniform (Beta(1, 1)) or U-shaped (Beta(0.5, 0.5)): Monte
  Carlo (--reps; Monte Carlo SE of a size near 0.05 is 0.002 at the default 4 x 3000
  draws, of a coverage near 0.95 0.004). Size: no effect in any episode; coverage: +0.2 in every episode (control
  0.8 u, treatment 0.8 u + 0.2). 1 episode is refused (not pooled).

Prints a Markdown table, then one JSON object.

    python benchmarks/stats_simulation.py [--reps 3000] [--seed 1] [--parts paired rollouts pooled]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time

from _root import ROOT  # noqa: F401  (repo root on sys.path; see _root.py)

from trajectory.stats import mcnemar_exact, mcnemar_midp, mn_stratified, mn_stratified_p, paired_test

ALPHA = 0.05


def _pmf(k: int, n: int, p: float) -> float:
    if p <= 0 or p >= 1:
        return float(k == (0 if p <= 0 else n))
    return math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                    + k * math.log(p) + (n - k) * math.log1p(-p))


def _support(n: int, p: float, cut: float = 1e-9) -> list[tuple[int, float]]:
    return [(k, w) for k in range(n + 1) if (w := _pmf(k, n, p)) > cut]


# ------------------------------------------------------------------- paired tasks


def paired_size(n: int, test) -> float:
    """Worst P(p < 0.05) over psi: given m discordant pairs, the split is Binomial(m, 1/2)."""
    reject = []
    for m in range(n + 1):
        reject.append(sum(_pmf(b, m, 0.5) for b in range(m + 1) if test(b, m - b) < ALPHA))
    psis = [i / 100 for i in range(2, 101, 2)]
    return max(sum(w * reject[m] for m, w in _support(n, psi)) for psi in psis)


def paired_coverage(n: int, mid: bool) -> float:
    worst = 1.0
    for psi in (0.05, 0.1, 0.3, 0.6):
        for theta in (0.5, 0.7, 0.9, 1.0):
            truth, cover = psi * (2 * theta - 1), 0.0
            for m, wm in _support(n, psi, 1e-8):
                for b, wb in _support(m, theta, 1e-8 / max(wm, 1e-300)):
                    lo, hi = paired_test(b, m - b, n, mid=mid).ci95
                    cover += wm * wb * (lo <= truth <= hi)
            worst = min(worst, cover)
    return worst


def errors_size(n: int, reps: int, rng: random.Random, rule: str) -> float:
    """No true difference (both solve a task with probability 1/2, independently), but 20% of
    B's failures end as errors: P(exact McNemar p < 0.05) when errors are failures or left out."""
    rejected = 0
    for _ in range(reps):
        b = c = 0
        for _ in range(n):
            xa, xb = rng.random() < 0.5, rng.random() < 0.5
            if not xb and rng.random() < 0.2 and rule == "exclude":
                continue
            b, c = b + (xa and not xb), c + (xb and not xa)
        rejected += mcnemar_exact(b, c) < ALPHA
    return rejected / reps


# ------------------------------------------------------------------- rollouts


def _tables(n: int, correct: bool) -> dict[tuple[int, int], tuple[float, tuple[float, float]]]:
    return {(x, y): ((r := mn_stratified([(x, n, y, n)], correct=correct)).p_value, r.ci95)
            for x in range(n + 1) for y in range(n + 1)}


def rollout_rows(n: int, correct: bool) -> tuple[float, float]:
    res = _tables(n, correct)
    size = max(sum(_pmf(x, n, p) * _pmf(y, n, p) for (x, y), (pv, _) in res.items() if pv < ALPHA)
               for p in (i / 100 for i in range(1, 100)))
    grid = [i / 20 for i in range(1, 20)]
    cov = min(sum(_pmf(x, n, p1) * _pmf(y, n, p2) for (x, y), (_, ci) in res.items() if ci[0] <= p1 - p2 <= ci[1])
              for p1 in grid for p2 in grid)
    return size, cov


# ------------------------------------------------------------------- pooled what-if


def _binomial(rng: random.Random, n: int, p: float) -> int:
    return sum(rng.random() < p for _ in range(n))


def pooled_row(k: int, r: int, shape: float, reps: int, rng: random.Random) -> tuple[float, float]:
    """(size, coverage at +0.2) of the stratified score test and interval: 4 x `reps` draws
    for the size (only a p-value each), `reps` for the coverage (an interval each)."""
    rejected = covered = 0
    for _ in range(4 * reps):
        base = [rng.betavariate(shape, shape) for _ in range(k)]
        null = [(_binomial(rng, r, p), r, _binomial(rng, r, p), r) for p in base]
        rejected += mn_stratified_p(null) < ALPHA
    for _ in range(reps):
        base = [rng.betavariate(shape, shape) for _ in range(k)]
        alt = [(_binomial(rng, r, 0.8 * p + 0.2), r, _binomial(rng, r, 0.8 * p), r) for p in base]
        lo, hi = mn_stratified(alt).ci95
        covered += lo <= 0.2 <= hi
    return rejected / (4 * reps), covered / reps


POOLED = [(1, 3), (2, 5), (3, 4), (10, 10), (20, 5), (30, 1)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", nargs="+", choices=("paired", "rollouts", "pooled"),
                    default=["paired", "rollouts", "pooled"])
    ap.add_argument("--reps", type=int, default=3000,
                    help="Monte Carlo draws per pooled scenario for the coverage (4x that for the size)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--paired-n", type=int, nargs="+", default=[20, 50, 200, 500],
                    help="pairs of the exact paired scenarios (a smoke run: 20)")
    args = ap.parse_args()
    rng, t0, rows = random.Random(args.seed), time.time(), []
    for n in args.paired_n if "paired" in args.parts else ():
        rows.append(("paired", f"n = {n}", "exact McNemar + inverted interval (reported)",
                     paired_size(n, mcnemar_exact), paired_coverage(n, False)))
        rows.append(("paired", f"n = {n}", "mid-p McNemar + inverted interval (not used)",
                     paired_size(n, mcnemar_midp), paired_coverage(n, True)))
    err_rng = random.Random(args.seed + 1)  # its own stream: the pooled draws stay as they were
    for n in (50, 200) if "paired" in args.parts else ():
        for rule in ("failure", "exclude"):
            label = "errors counted as failures (default)" if rule == "failure" else "errors left out (--errors exclude)"
            rows.append(("paired, 20% of B's failures are errors", f"n = {n}", label,
                         errors_size(n, args.reps, err_rng, rule), None))
    for n in (3, 5, 10) if "rollouts" in args.parts else ():
        rows.append(("rollouts", f"{n} per arm", "MN score, continuity-corrected (reported)", *rollout_rows(n, True)))
        rows.append(("rollouts", f"{n} per arm", "MN score, uncorrected (not used)", *rollout_rows(n, False)))
    for k, r in POOLED if "pooled" in args.parts else ():
        for shape, label in ((1.0, "uniform"), (0.5, "U-shaped")):
            if k < 2:
                rows.append(("pooled", f"{k}x{r} {label}", "refused: fewer than 2 episodes", None, None))
                continue
            rows.append(("pooled", f"{k}x{r} {label}", "stratified MN + CMH test (reported)",
                         *pooled_row(k, r, shape, args.reps, rng)))
    print("| comparison | scenario | procedure | size at 0.05 | coverage of 95% CI |")
    print("|---|---|---|---|---|")
    for kind, scen, proc, size, cov in rows:
        s = "-" if size is None else f"{size:.4f}"
        c = "-" if cov is None else f"{cov:.4f}"
        print(f"| {kind} | {scen} | {proc} | {s} | {c} |")
    print(json.dumps({"rows": [dict(zip(("kind", "scenario", "procedure", "size", "coverage"), row)) for row in rows],
                      "reps": args.reps, "seconds": round(time.time() - t0, 1)}))


if __name__ == "__main__":
    main()
