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

Issue 40 adds (`--parts whatif suggest timings`):

- whatif: the procedure the what-if reports now (`exact2x2.two_arm`: Boschloo's exact
  unconditional test and the interval that inverts it), at 3, 5, 10, 20, 50 per arm and 5 vs
  20: size (worst over the common rate 0.01 ... 0.99), coverage (worst over (p1, p2) on a 0.1
  grid, 0.05 with --full) and power for 10% -> 60% and 20% -> 50%, exact over all tables.
- suggest: the adjusted rule. Family-wise error per failure at K = 1, 3, 5 candidates sharing
  one control, none better (Holm: exact, worst over the rate); false discovery rate over 20
  failures with 0-5 real fixes (one candidate of a failure at 60% against 10%, the others at
  10%; Benjamini-Hochberg over the 60 candidates, a failure counts as proven when its best
  candidate is; Monte Carlo, --reps draws), with the share of real fixes found.
- timings: each exact function at 10^6 (and 10^5 strata), best of 3.

Prints Markdown tables, then one JSON object. The default run takes a few minutes on a shared
core; `--full` uses 3000 draws and the fine grids.

    python benchmarks/stats_simulation.py [--full] [--reps N] [--seed 1] [--parts paired rollouts pooled whatif suggest timings]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time

from _root import ROOT  # noqa: F401  (repo root on sys.path; see _root.py)

from trajectory.score_intervals import mn_stratified, mn_stratified_p
from trajectory.stats import mcnemar_exact, mcnemar_midp, paired_test

ALPHA = 0.05


def _pmf(k: int, n: int, p: float) -> float:
    if p <= 0 or p >= 1:
        return float(k == (0 if p <= 0 else n))
    return math.exp(
        math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * math.log(p) + (n - k) * math.log1p(-p)
    )


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
    return {
        (x, y): ((r := mn_stratified([(x, n, y, n)], correct=correct)).p_value, r.ci95)
        for x in range(n + 1)
        for y in range(n + 1)
    }


def rollout_rows(n: int, correct: bool) -> tuple[float, float]:
    res = _tables(n, correct)
    size = max(
        sum(_pmf(x, n, p) * _pmf(y, n, p) for (x, y), (pv, _) in res.items() if pv < ALPHA)
        for p in (i / 100 for i in range(1, 100))
    )
    grid = [i / 20 for i in range(1, 20)]
    cov = min(
        sum(_pmf(x, n, p1) * _pmf(y, n, p2) for (x, y), (_, ci) in res.items() if ci[0] <= p1 - p2 <= ci[1])
        for p1 in grid
        for p2 in grid
    )
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


# ------------------------------------------------------------------- issue 40


def whatif_row(n1: int, n2: int, step: float) -> dict:
    """Size, coverage and power of the reported what-if procedure, exact over all tables
    (treatment n1, control n2)."""
    import numpy as np

    from trajectory import exact2x2

    at0 = exact2x2.tables_two_sided(n1, n2, 0.0)
    better = exact2x2._tables_p(n1, n2, 0.0, True)

    def prob(p1: float, p2: float, mask) -> float:
        return float(exact2x2._pmf(n1, [p1])[0] @ mask.astype(float) @ exact2x2._pmf(n2, [p2])[0])

    size = max(prob(q, q, at0 < ALPHA) for q in np.linspace(0.01, 0.99, 99))
    grid = [round(x, 10) for x in np.arange(step, 1.0 - 1e-9, step)]
    covered: dict[float, np.ndarray] = {}
    cov = 1.0
    for p1 in grid:
        for p2 in grid:
            d = round(p1 - p2, 10)
            if d not in covered:
                covered[d] = exact2x2.tables_two_sided(n1, n2, d) >= ALPHA
            cov = min(cov, prob(p1, p2, covered[d]))
    proven = better < ALPHA / 2  # one-sided, the lower end of the 95% interval
    return {
        "n": f"{n1} vs {n2}" if n1 != n2 else f"{n1} per arm",
        "size": size,
        "coverage": cov,
        "power_10_60": prob(0.6, 0.1, proven),
        "power_20_50": prob(0.5, 0.2, proven),
    }


def _two_arm_tables(n: int) -> dict:
    """The reported procedure at every table of n vs n: (one-sided p better, lower bound)."""
    from trajectory.exact2x2 import two_arm

    return {(x, y): ((r := two_arm(x, n, y, n)).p_better, r.ci95[0]) for x in range(n + 1) for y in range(n + 1)}


def fwer_row(k: int, n: int, tables: dict) -> float:
    """Worst P(some candidate of a failure proven) when none is better: Holm proves one only
    if the smallest one-sided p is below 0.025 / K, so with a shared control
    P = sum_c P(c) [1 - (1 - q_c)^K], q_c = P(a treatment's p < 0.025 / K | control c)."""
    worst = 0.0
    for q in (i / 50 for i in range(1, 50)):
        total = 0.0
        for c in range(n + 1):
            qc = sum(_pmf(t, n, q) for t in range(n + 1) if tables[(t, c)][0] < ALPHA / 2 / k)
            total += _pmf(c, n, q) * (1 - (1 - qc) ** k)
        worst = max(worst, total)
    return worst


def fdr_row(
    real: int, n: int, tables: dict, reps: int, rng: random.Random, failures: int = 20, k: int = 3
) -> tuple[float, float]:
    """(FDR, share of real fixes proven): `failures` failures of K candidates, `real` of them
    with one real fix (60% vs 10%); BH over every candidate; a failure is proven when its
    best candidate (highest lower bound) is, falsely when that one is not a real fix."""
    from trajectory.multiplicity import benjamini_hochberg

    fdp = found = 0.0
    for _ in range(reps):
        cands = []  # (failure, is_real, p_better, lower)
        for f in range(failures):
            c = _binomial(rng, n, 0.1)
            for j in range(k):
                is_real = f < real and j == 0
                t = _binomial(rng, n, 0.6 if is_real else 0.1)
                p, lower = tables[(t, c)]
                cands.append((f, is_real, p, lower))
        adj = benjamini_hochberg([x[2] for x in cands])
        false = true = 0
        for f in range(failures):
            mine = [(x, a) for x, a in zip(cands, adj) if x[0] == f]
            (best, a) = max(mine, key=lambda xa: xa[0][3])
            if a < ALPHA / 2 and best[3] > 0:
                true, false = true + best[1], false + (not best[1])
        fdp += false / max(1, true + false)
        found += true / real if real else 0.0
    return fdp / reps, found / reps


def timings() -> list[tuple[str, float]]:
    from trajectory import score_intervals, stats

    rng = random.Random(5)
    strata = [
        (rng.randint(0, a), a, rng.randint(0, b), b)
        for a, b in ((rng.randint(1, 1000), rng.randint(1, 1000)) for _ in range(100_000))
    ]
    cases = [
        ("mcnemar_exact, 10^6 discordant pairs", lambda: stats.mcnemar_exact(501_000, 499_000)),
        ("mcnemar_midp, 10^6 discordant pairs", lambda: stats.mcnemar_midp(501_000, 499_000)),
        ("paired_test (exact), n = 2x10^6, 10^6 discordant", lambda: stats.paired_test(501_000, 499_000, 2_000_000)),
        ("paired_test (mid-p), n = 2x10^6", lambda: stats.paired_test(501_000, 499_000, 2_000_000, mid=True)),
        ("binomial_ci mid-p, n = 10^6", lambda: stats.binomial_ci(400_000, 1_000_000, True)),
        ("fisher_exact, n = 10^6", lambda: stats.fisher_exact(250_000, 250_000, 249_000, 251_000)),
        ("tango_diff, n = 2x10^6", lambda: stats.tango_diff(501_000, 499_000, 2_000_000)),
        ("mn_diff, 10^6 per arm", lambda: score_intervals.mn_diff(500_500, 1_000_000, 499_500, 1_000_000)),
        ("mn_stratified, 10^5 distinct strata", lambda: score_intervals.mn_stratified(strata)),
        ("mn_stratified_p, 10^5 distinct strata", lambda: score_intervals.mn_stratified_p(strata)),
        ("cmh, 10^5 strata", lambda: stats.cmh(strata)),
        ("two_arm (exact), 50 per arm", lambda: exact2x2.two_arm(25, 50, 15, 50)),
        ("two_arm (exact), 10 per arm", lambda: exact2x2.two_arm(6, 10, 1, 10)),
    ]
    from trajectory import exact2x2

    caches = (stats.binomial_ci, exact2x2.two_arm, exact2x2.boschloo, exact2x2._order, exact2x2._rank)
    out = []
    for name, f in cases:
        best = math.inf
        for _ in range(3):
            for c in caches:  # every call from cold: no cached interval or ordering
                c.cache_clear()
            t = time.perf_counter()
            f()
            best = min(best, time.perf_counter() - t)
        out.append((name, best))
    return out


def issue40(args, rng: random.Random) -> dict:
    out: dict = {}
    step = 0.05 if args.full else 0.1
    if "whatif" in args.parts:
        out["whatif"] = [whatif_row(a, b, step) for a, b in ((3, 3), (5, 5), (10, 10), (20, 20), (50, 50), (5, 20))]
    if "suggest" in args.parts:
        tables = _two_arm_tables(10)
        out["fwer"] = [{"K": k, "fwer": fwer_row(k, 10, tables)} for k in (1, 3, 5)]
        fdr_rng = random.Random(args.seed + 2)
        out["fdr"] = [
            dict(zip(("real_fixes", "fdr", "power"), (r, *fdr_row(r, 10, tables, args.reps // 5, fdr_rng))))
            for r in range(6)
        ]
    if "timings" in args.parts:
        out["timings"] = [{"function": n, "seconds": s} for n, s in timings()]
    return out


def print_issue40(out: dict) -> None:
    if "whatif" in out:
        print(
            "\n| what-if (Boschloo + inverted interval) | size at 0.05 | coverage of 95% CI | power 10%->60% | power 20%->50% |"
        )
        print("|---|---|---|---|---|")
        for r in out["whatif"]:
            print(
                f"| {r['n']} | {r['size']:.4f} | {r['coverage']:.4f} | {r['power_10_60']:.3f} | {r['power_20_50']:.3f} |"
            )
    if "fwer" in out:
        print("\n| suggest, 10 per arm, none better | family-wise error per failure (Holm) |")
        print("|---|---|")
        for r in out["fwer"]:
            print(f"| K = {r['K']} candidates sharing a control | {r['fwer']:.4f} |")
        print("\n| suggest, 20 failures x 3 candidates, 10 per arm | false discovery rate (BH) | real fixes proven |")
        print("|---|---|---|")
        for r in out["fdr"]:
            print(f"| {r['real_fixes']} real fixes (60% vs 10%) | {r['fdr']:.4f} | {r['power']:.3f} |")
    if "timings" in out:
        print("\n| function | seconds (best of 3, from cold) |")
        print("|---|---|")
        for r in out["timings"]:
            print(f"| {r['function']} | {r['seconds']:.4f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--parts",
        nargs="+",
        choices=("paired", "rollouts", "pooled", "whatif", "suggest", "timings"),
        default=["paired", "rollouts", "pooled", "whatif", "suggest", "timings"],
    )
    ap.add_argument(
        "--reps",
        type=int,
        default=None,
        help="Monte Carlo draws per pooled scenario for the coverage (4x that for the size; the FDR "
        "uses reps / 5 per row); default 1000, 3000 with --full",
    )
    ap.add_argument("--full", action="store_true", help="3000 draws and the 0.05 coverage grid (slower)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--paired-n",
        type=int,
        nargs="+",
        default=[20, 50, 200, 500],
        help="pairs of the exact paired scenarios (a smoke run: 20)",
    )
    args = ap.parse_args()
    if args.reps is None:
        args.reps = 3000 if args.full else 1000
    rng, t0, rows = random.Random(args.seed), time.time(), []
    for n in args.paired_n if "paired" in args.parts else ():
        rows.append(
            (
                "paired",
                f"n = {n}",
                "exact McNemar + inverted interval (reported)",
                paired_size(n, mcnemar_exact),
                paired_coverage(n, False),
            )
        )
        rows.append(
            (
                "paired",
                f"n = {n}",
                "mid-p McNemar + inverted interval (not used)",
                paired_size(n, mcnemar_midp),
                paired_coverage(n, True),
            )
        )
    err_rng = random.Random(args.seed + 1)  # its own stream: the pooled draws stay as they were
    for n in (50, 200) if "paired" in args.parts else ():
        for rule in ("failure", "exclude"):
            label = (
                "errors counted as failures (default)" if rule == "failure" else "errors left out (--errors exclude)"
            )
            rows.append(
                (
                    "paired, 20% of B's failures are errors",
                    f"n = {n}",
                    label,
                    errors_size(n, args.reps, err_rng, rule),
                    None,
                )
            )
    for n in (3, 5, 10) if "rollouts" in args.parts else ():
        rows.append(
            (
                "rollouts",
                f"{n} per arm",
                "MN score, continuity-corrected (reported beyond 50 per arm)",
                *rollout_rows(n, True),
            )
        )
        rows.append(("rollouts", f"{n} per arm", "MN score, uncorrected (not used)", *rollout_rows(n, False)))
    for k, r in POOLED if "pooled" in args.parts else ():
        for shape, label in ((1.0, "uniform"), (0.5, "U-shaped")):
            if k < 2:
                rows.append(("pooled", f"{k}x{r} {label}", "refused: fewer than 2 episodes", None, None))
                continue
            rows.append(
                (
                    "pooled",
                    f"{k}x{r} {label}",
                    "stratified MN + CMH test (reported)",
                    *pooled_row(k, r, shape, args.reps, rng),
                )
            )
    print("| comparison | scenario | procedure | size at 0.05 | coverage of 95% CI |")
    print("|---|---|---|---|---|")
    for kind, scen, proc, size, cov in rows:
        s = "-" if size is None else f"{size:.4f}"
        c = "-" if cov is None else f"{cov:.4f}"
        print(f"| {kind} | {scen} | {proc} | {s} | {c} |")
    extra = issue40(args, random.Random(args.seed + 3))
    print_issue40(extra)
    print(
        json.dumps(
            {
                "rows": [dict(zip(("kind", "scenario", "procedure", "size", "coverage"), row)) for row in rows],
                **extra,
                "reps": args.reps,
                "seconds": round(time.time() - t0, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
