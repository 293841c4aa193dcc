"""Benchmark: does the paired interval tell the same story as the exact McNemar test?

For every paired 2x2 table (a both succeed, b only A, c only B, d neither) with n = 20 and
n = 50 pairs, the verdict of an interval ("the 95% interval excludes 0") is compared with the
exact McNemar test's ("p < 0.05"). Counted per interval: Newcombe's paired score interval
(method 10), the same with continuity-corrected Wilson intervals (method 11), Tango's
score interval, and the interval `compare` reports (the inversion of the exact McNemar test,
`stats.paired_test`: it agrees by construction). Every table counts once (C(n+3, 3) tables: 1,771 and 23,426).

- agreement: the share of tables where both verdicts are the same;
- interval_only: the interval excludes 0 but exact p >= 0.05 (it claims more than the test);
- test_only: exact p < 0.05 but the interval includes 0.

Prints, last, one JSON object: {"n=20": {method: {...}}, "n=50": {...}, "best": ...}.

    python benchmarks/paired_ci_agreement.py [--n 20 50]
"""

from __future__ import annotations

import argparse
import json

from _root import ROOT  # noqa: F401  (repo root on sys.path; see _root.py)

from trajectory.stats import mcnemar_exact, newcombe_paired_cc_diff, newcombe_paired_diff, paired_test, tango_diff

METHODS = {
    "exact_mcnemar_inverted": lambda a, b, c, d: paired_test(b, c, a + b + c + d).ci95,  # used by compare
    "newcombe_method10": lambda a, b, c, d: newcombe_paired_diff(a, b, c, d),
    "newcombe_method11": lambda a, b, c, d: newcombe_paired_cc_diff(a, b, c, d),
    "tango": lambda a, b, c, d: tango_diff(b, c, a + b + c + d),
}


def tables(n: int):
    for a in range(n + 1):
        for b in range(n + 1 - a):
            for c in range(n + 1 - a - b):
                yield a, b, c, n - a - b - c


def agreement(n: int) -> dict[str, dict[str, float | int]]:
    counts = {m: {"agree": 0, "interval_only": 0, "test_only": 0} for m in METHODS}
    total = 0
    significant: dict[tuple[int, int], bool] = {}
    for a, b, c, d in tables(n):
        total += 1
        if (b, c) not in significant:
            significant[(b, c)] = mcnemar_exact(b, c) < 0.05
        test = significant[(b, c)]
        for name, interval in METHODS.items():
            lo, hi = interval(a, b, c, d)
            excludes = lo > 0 or hi < 0
            if excludes == test:
                counts[name]["agree"] += 1
            elif excludes:
                counts[name]["interval_only"] += 1
            else:
                counts[name]["test_only"] += 1
    return {
        name: {
            "agreement": round(k["agree"] / total, 4),
            "tables": total,
            "interval_only": k["interval_only"],
            "test_only": k["test_only"],
        }
        for name, k in counts.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[20, 50])
    args = parser.parse_args()
    out: dict[str, object] = {f"n={n}": agreement(n) for n in args.n}
    scores = {m: sum(out[f"n={n}"][m]["agreement"] for n in args.n) for m in METHODS}  # type: ignore[index]
    out["best"] = max(scores, key=scores.get)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
