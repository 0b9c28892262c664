"""False alarms and detection of the statistics (domain/stats.py) on synthetic nightly series.

Change points: 30 nights of a step's median QPS. Pure noise (uniform ±5%, and the harsher
Gaussian with a 5% standard deviation) must show a change point in at most
CHANGE_POINT_BOUND of the series; a 10% level drop from night 20 on must be found, at night 20.

Verdicts: a run of 4 steps × 3 trials against 5 baseline runs × 3 trials, minimum effect
10%. On pure ±5% trial noise at most VERDICT_BOUND of the runs may come out Regressed;
planted drops of 10%, 15% and 20% on every step show the power.

Prints one table; exits 1 when a false-alarm rate is above its bound. No test bed needed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

import numpy as np

from tidb_bench_operator.domain.stats.inference import compare_runs, find_change_points

CHANGE_POINT_BOUND = 0.02
VERDICT_BOUND = 0.05
NIGHTS = 30
SHIFT_AT = 20
STEPS = [("oltp_point_select", t) for t in (1, 2, 4, 8)]

Noise = Callable[[np.random.Generator, int], np.ndarray]


def uniform(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.uniform(-0.05, 0.05, n)


def gaussian(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.normal(0.0, 0.05, n)


def change_points(series_count: int, noise: Noise, shift: float, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    alarms = exact = near = 0
    started = time.perf_counter()
    for _ in range(series_count):
        level = np.where(np.arange(NIGHTS) >= SHIFT_AT, 1 - shift, 1.0)
        found = [
            p.index for p in find_change_points(list(100_000 * level * (1 + noise(rng, NIGHTS))))
        ]
        alarms += bool(found)
        exact += SHIFT_AT in found
        near += any(abs(i - SHIFT_AT) <= 1 for i in found)
    return {
        "any": alarms / series_count,
        "exact": exact / series_count,
        "near": near / series_count,
        "ms": (time.perf_counter() - started) / series_count * 1000,
    }


def verdicts(runs: int, drop: float, seed: int, nightly: bool = False) -> dict[str, float]:
    """Verdict shares; `nightly`: each night has its own level (uniform ±5%) and its trials
    vary ±2% around it, so trials within a night are closer than nights are."""
    rng = np.random.default_rng(seed)
    counts = {"Regressed": 0, "Improved": 0, "NoChange": 0, "Inconclusive": 0}
    started = time.perf_counter()

    def night(level: float) -> dict[tuple[str, int], list[float]]:
        if nightly:
            level *= 1 + float(uniform(rng, 1)[0])
            return {key: list(level * (1 + uniform(rng, 3) * 0.4)) for key in STEPS}
        return {key: list(level * (1 + uniform(rng, 3))) for key in STEPS}

    for _ in range(runs):
        baseline = [night(100_000) for _ in range(5)]
        current = night(100_000 * (1 - drop))
        counts[compare_runs(current, baseline, 10).verdict] += 1
    result = {k: v / runs for k, v in counts.items()}
    result["ms"] = (time.perf_counter() - started) / runs * 1000
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=4000, help="change-point series per case")
    parser.add_argument("--runs", type=int, default=1000, help="verdict runs per case")
    args = parser.parse_args()
    n = args.series
    failed = False
    print(
        f"change points, {NIGHTS} nights, E-Divisive (alpha 0.01, 199 permutations), "
        f"{n} series each"
    )
    print("| series | any change point | found at night 20 | within ±1 night | ms/series |")
    print("|---|---:|---:|---:|---:|")
    for label, noise, shift, seed in (
        ("pure noise, uniform ±5%", uniform, 0.0, 1),
        ("pure noise, Gaussian sd 5%", gaussian, 0.0, 2),
        ("10% drop at night 20, uniform ±5%", uniform, 0.10, 3),
        ("10% drop at night 20, Gaussian sd 5%", gaussian, 0.10, 4),
    ):
        r = change_points(n, noise, shift, seed)
        bad = shift == 0.0 and r["any"] > CHANGE_POINT_BOUND
        failed |= bad
        print(
            f"| {label} | {r['any']:.1%}{' (ABOVE BOUND)' if bad else ''} | {r['exact']:.1%} "
            f"| {r['near']:.1%} | {r['ms']:.1f} |"
        )
    print(f"\nfalse-alarm bound for change points: {CHANGE_POINT_BOUND:.0%} of pure-noise series")
    print(
        f"\nverdicts, 4 steps x 3 trials vs 5 baseline runs x 3 trials, uniform ±5% trial noise, "
        f"minimum effect 10%, {args.runs} runs each"
    )
    print("| planted drop | Regressed | NoChange | Inconclusive | Improved | ms/run |")
    print("|---|---:|---:|---:|---:|---:|")
    for drop, seed in ((0.0, 5), (0.10, 6), (0.15, 7), (0.20, 8)):
        r = verdicts(args.runs, drop, seed)
        bad = drop == 0.0 and r["Regressed"] > VERDICT_BOUND
        failed |= bad
        print(
            f"| {drop:.0%} | {r['Regressed']:.1%}{' (ABOVE BOUND)' if bad else ''} "
            f"| {r['NoChange']:.1%} | {r['Inconclusive']:.1%} | {r['Improved']:.1%} "
            f"| {r['ms']:.1f} |"
        )
    for drop, seed in ((0.0, 9), (0.10, 10)):
        r = verdicts(args.runs, drop, seed, nightly=True)
        bad = drop == 0.0 and r["Regressed"] > VERDICT_BOUND
        failed |= bad
        print(
            f"| {drop:.0%}; nights ±5%, trials ±2% within a night | {r['Regressed']:.1%}"
            f"{' (ABOVE BOUND)' if bad else ''} | {r['NoChange']:.1%} | {r['Inconclusive']:.1%} "
            f"| {r['Improved']:.1%} | {r['ms']:.1f} |"
        )
    print(f"\nfalse-alarm bound for verdicts: {VERDICT_BOUND:.0%} of undisturbed runs Regressed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
