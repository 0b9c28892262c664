"""Numbers with error bars: trial intervals, verdicts against a baseline, change points.

The one domain module that imports numpy and scipy (an import-linter contract keeps them
here, so the runner and the CLI parsers never load them). They are pure computation: no
I/O, deterministic for a fixed seed, as testable on fixed samples as the rest of domain/.
The methods, their sources and why they were chosen are in docs/statistics.md.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray
from scipy import stats as sps

from tidb_bench_operator.domain.api.results import StepKey
from tidb_bench_operator.domain.api.verdicts import (
    NOISY_CV_PERCENT,
    ChangePoint,
    Metric,
    RunComparison,
    StepVerdict,
    TrialSummary,
    Verdict,
)

#: Confidence of every interval this module computes.
CONFIDENCE = 0.95
#: Significance level of the regression verdict, after the Benjamini–Hochberg correction.
ALPHA = 0.05
#: Bootstrap resamples for the effect's interval.
BOOTSTRAP_RESAMPLES = 4000
#: Fixed seed: the same trials always give the same interval and the same change points, so
#: a controller that restarts and compares again reaches the same verdict.
SEED = 20260601
#: A change point is kept when its permutation p-value is at most this.
CHANGE_POINT_ALPHA = 0.01
#: Permutations per change-point candidate; the smallest p-value possible is 1/(n+1).
CHANGE_POINT_PERMUTATIONS = 199
#: Fewest points on either side of a change point.
MIN_SEGMENT = 3


# --------------------------------------------------------------------------- trials


def summarize_trials(
    values: Sequence[float], noisy_cv_percent: float = NOISY_CV_PERCENT
) -> TrialSummary:
    """Median, mean, Student-t 95% interval of the mean, CV and the noisy flag of `values`."""
    if not values:
        raise ValueError("summarize_trials needs at least one trial")
    n = len(values)
    mean = statistics.fmean(values)
    median = statistics.median(values)
    if n < 2:
        return TrialSummary(
            n=n, median=median, mean=mean, ci_low=None, ci_high=None, cv_percent=None, noisy=False
        )
    sd = statistics.stdev(values)
    half = float(sps.t.ppf((1 + CONFIDENCE) / 2, df=n - 1)) * sd / math.sqrt(n)
    cv = sd / mean * 100 if mean else None
    return TrialSummary(
        n=n,
        median=median,
        mean=mean,
        ci_low=mean - half,
        ci_high=mean + half,
        cv_percent=cv,
        noisy=cv is not None and cv > noisy_cv_percent,
    )


# --------------------------------------------------------------------------- verdicts


def smallest_p_value(n1: int, n2: int) -> float:
    """The smallest two-sided exact Mann–Whitney p-value possible for sample sizes n1, n2.

    Reached when the samples do not overlap at all: 2 / C(n1+n2, n1). When it is above the
    significance level, no outcome of the test can be significant.
    """
    if n1 < 1 or n2 < 1:
        return 1.0
    return min(1.0, 2 / math.comb(n1 + n2, n1))


def effect_interval(
    current: Sequence[float], baseline: Sequence[float]
) -> tuple[float, float] | None:
    """95% percentile-bootstrap interval of median(current)/median(baseline) - 1, in percent.

    None when either sample has fewer than 2 values (nothing to resample).
    """
    if len(current) < 2 or len(baseline) < 2:
        return None

    def ratio(x: NDArray[np.float64], y: NDArray[np.float64], axis: int) -> NDArray[np.float64]:
        result: NDArray[np.float64] = np.median(x, axis=axis) / np.median(y, axis=axis) - 1
        return result

    res = sps.bootstrap(
        (np.asarray(current, dtype=float), np.asarray(baseline, dtype=float)),
        ratio,
        vectorized=True,
        paired=False,
        confidence_level=CONFIDENCE,
        method="percentile",
        n_resamples=BOOTSTRAP_RESAMPLES,
        rng=np.random.default_rng(SEED),
    )
    low, high = res.confidence_interval
    return float(low) * 100, float(high) * 100


def compare_runs(
    current: Mapping[StepKey, Sequence[float]],
    baseline: Sequence[Mapping[StepKey, Sequence[float]]],
    min_effect_percent: float,
    alpha: float = ALPHA,
    excluded_invalid: int = 0,
    metric: Metric = "qps",
) -> RunComparison:
    """Verdicts for every step of `current` against the pooled trials of the `baseline` runs.

    `metric` says what the trials are: QPS (a drop regresses) or server CPU milliseconds
    per query (a rise regresses: the efficiency verdict); the statistics are the same.

    Per step: a two-sided Mann–Whitney U test, Benjamini–Hochberg over the steps that can
    reach significance, and the effect (ratio of medians) with its bootstrap interval.
    Regressed/Improved need a corrected p below `alpha` AND an effect of at least
    `min_effect_percent`; NoChange needs either a significant effect smaller than that, or an
    interval inside ±min_effect_percent; anything else is Inconclusive (too few trials, or an
    interval wide enough to hold a change that matters).
    """
    keys = list(current)
    for run in baseline:
        keys.extend(k for k in run if k not in keys)
    raw: dict[StepKey, tuple[list[float], list[float], int]] = {}
    for key in keys:
        mine = [float(v) for v in current.get(key, ())]
        runs = [run[key] for run in baseline if run.get(key)]
        raw[key] = (mine, [float(v) for r in runs for v in r], len(runs))
    testable = [
        k for k, (x, y, _) in raw.items() if x and y and smallest_p_value(len(x), len(y)) < alpha
    ]
    p_values = {
        k: float(sps.mannwhitneyu(raw[k][0], raw[k][1], alternative="two-sided").pvalue)
        for k in testable
    }
    adjusted = dict(
        zip(
            testable,
            (float(p) for p in sps.false_discovery_control([p_values[k] for k in testable])),
            strict=True,
        )
        if testable
        else ()
    )
    steps = [
        _step_verdict(
            key,
            *raw[key],
            p_values.get(key),
            adjusted.get(key),
            min_effect_percent,
            alpha,
            metric,
        )
        for key in keys
    ]
    verdict = _run_verdict([s.verdict for s in steps])
    return RunComparison(
        verdict=verdict,
        min_effect_percent=min_effect_percent,
        alpha=alpha,
        baseline_runs=len(baseline),
        excluded_invalid=excluded_invalid,
        steps=steps,
        message=_run_message(
            verdict, steps, len(baseline), min_effect_percent, excluded_invalid, metric
        ),
        metric=metric,
    )


def _step_verdict(
    key: StepKey,
    current: list[float],
    pooled: list[float],
    runs: int,
    p: float | None,
    p_adj: float | None,
    min_effect: float,
    alpha: float,
    metric: Metric = "qps",
) -> StepVerdict:
    workload, threads = key
    med = statistics.median(current) if current else None
    base = statistics.median(pooled) if pooled else None
    effect = (med / base - 1) * 100 if med is not None and base else None
    interval = effect_interval(current, pooled) if effect is not None else None
    verdict: Verdict
    if not pooled:
        verdict, reason = "Inconclusive", "no baseline trial of this step"
    elif not current:
        verdict, reason = "Inconclusive", "this run has no valid trial of this step"
    elif p is None or p_adj is None:
        verdict = "Inconclusive"
        reason = (
            f"{len(current)} trial(s) against {len(pooled)} cannot reach p < {alpha:g} "
            f"(smallest possible p {smallest_p_value(len(current), len(pooled)):.3g}); "
            "measure more trials (spec.repeats >= 3) or keep more baseline runs"
        )
    elif p_adj < alpha and effect is not None and abs(effect) >= min_effect:
        worse = effect > 0 if metric == "cpuMsPerQuery" else effect < 0
        verdict = "Regressed" if worse else "Improved"
        reason = f"significant (p {p_adj:.3g} < {alpha:g}) and beyond ±{min_effect:g}%"
    elif p_adj < alpha:
        verdict = "NoChange"
        reason = f"significant but smaller than ±{min_effect:g}%"
    elif interval is not None and -min_effect < interval[0] and interval[1] < min_effect:
        verdict = "NoChange"
        reason = f"not significant and the interval lies within ±{min_effect:g}%"
    else:
        verdict = "Inconclusive"
        reason = f"not significant, but the interval reaches beyond ±{min_effect:g}%"
    return StepVerdict(
        workload=workload,
        threads=threads,
        verdict=verdict,
        effect_percent=_round(effect),
        interval_low_percent=_round(interval[0]) if interval else None,
        interval_high_percent=_round(interval[1]) if interval else None,
        p_value=_round(p, 6),
        p_adjusted=_round(p_adj, 6),
        trials=len(current),
        baseline_trials=len(pooled),
        baseline_runs=runs,
        median_qps=_round(med, _DIGITS[metric]),
        baseline_median_qps=_round(base, _DIGITS[metric]),
        reason=reason,
    )


def _run_verdict(verdicts: Sequence[Verdict]) -> Verdict:
    if "Regressed" in verdicts:
        return "Regressed"
    if "Improved" in verdicts:
        return "Improved"
    if verdicts and all(v == "NoChange" for v in verdicts):
        return "NoChange"
    return "Inconclusive"


#: Decimals a step verdict keeps of its medians: QPS in the thousands, CPU ms per query
#: around 0.1.
_DIGITS: dict[Metric, int] = {"qps": 2, "cpuMsPerQuery": 4}


def _medians(step: StepVerdict, metric: Metric) -> str:
    """`41,200 vs 40,950 QPS`, or `0.160 vs 0.114 CPU ms/query`."""
    if metric == "cpuMsPerQuery":
        return f"{step.median_qps:.3g} vs {step.baseline_median_qps:.3g} CPU ms/query"
    return f"{step.median_qps:,.0f} vs {step.baseline_median_qps:,.0f} QPS"


def describe_step(step: StepVerdict, metric: Metric = "qps") -> str:
    """`oltp_point_select at 4 threads: -31.2% (95% CI -35.0% … -27.1%), p 0.009, 3 vs 9 trials`."""
    if step.effect_percent is None:
        return f"{step.workload} at {step.threads} threads: {step.reason}"
    ci = (
        f" (95% CI {step.interval_low_percent:+.1f}% … {step.interval_high_percent:+.1f}%)"
        if step.interval_low_percent is not None
        else ""
    )
    p = (
        f", p {step.p_value:.3g} (corrected {step.p_adjusted:.3g})"
        if step.p_value is not None
        else ""
    )
    return (
        f"{step.workload} at {step.threads} threads: {_medians(step, metric)}, "
        f"{step.effect_percent:+.1f}%{ci}{p}, "
        f"{step.trials} vs {step.baseline_trials} trials from {step.baseline_runs} run(s)"
    )


def _run_message(
    verdict: Verdict,
    steps: Sequence[StepVerdict],
    runs: int,
    min_effect: float,
    excluded: int,
    metric: Metric = "qps",
) -> str:
    if not runs:
        return "Inconclusive: no earlier successful run to compare with"
    counts = ", ".join(
        f"{sum(s.verdict == v for s in steps)} {v}"
        for v in ("Regressed", "Improved", "NoChange", "Inconclusive")
        if any(s.verdict == v for s in steps)
    )
    picked = [s for s in steps if s.verdict == verdict] or list(steps)
    with_effect = [s for s in picked if s.effect_percent is not None]
    sign = 1.0 if metric == "cpuMsPerQuery" else -1.0  # which way is worse

    def badness(s: StepVerdict) -> float:
        return sign * (s.effect_percent or 0.0)

    worst = (
        (max(with_effect, key=badness) if verdict != "Improved" else min(with_effect, key=badness))
        if with_effect
        else (picked[0] if picked else None)
    )
    head = f"{verdict}: {counts} of {len(steps)} step(s) against {runs} baseline run(s)"
    tail = f"; minimum effect ±{min_effect:g}%"
    if excluded:
        tail += f"; {excluded} invalid trial(s) excluded"
    return head + (f"; {describe_step(worst, metric)}" if worst else "") + tail


# --------------------------------------------------------------------------- change points


def _split_scores(segments: NDArray[np.float64], min_segment: int) -> NDArray[np.float64]:
    """E-Divisive's q̂(τ) for every split τ of every row of `segments` (rows × splits).

    q̂(τ, κ) = m·k/(m+k) · Ê(X=z[:τ], Y=z[τ:κ]) with m = τ, k = κ−τ; a split scores the
    best κ (Matteson & James 2014 search κ too, so a dip in the middle of a segment is found
    at its start). τ runs over [min_segment, n−min_segment], κ over [τ+min_segment, n]. All
    sums come from 2-D prefix sums of the pairwise distances, so one row costs O(n²).
    """
    rows, n = segments.shape
    dist = np.abs(segments[:, :, None] - segments[:, None, :])
    prefix = np.zeros((rows, n + 1, n + 1))
    prefix[:, 1:, 1:] = dist.cumsum(axis=1).cumsum(axis=2)
    tau = np.arange(min_segment, n - min_segment + 1)[:, None]
    kappa = np.arange(2 * min_segment, n + 1)[None, :]
    tau, kappa = np.broadcast_arrays(tau, kappa)
    valid = kappa - tau >= min_segment
    kappa = np.where(valid, kappa, n)  # placeholders, masked below
    m = tau.astype(float)
    k = np.maximum(kappa - tau, 2).astype(float)
    zero = np.zeros_like(tau)

    def block(
        r0: NDArray[np.int_], r1: NDArray[np.int_], c0: NDArray[np.int_], c1: NDArray[np.int_]
    ) -> NDArray[np.float64]:
        """Sum of dist[r0:r1, c0:c1] per row, for every (τ, κ) at once."""
        result: NDArray[np.float64] = (
            prefix[:, r1, c1] - prefix[:, r0, c1] - prefix[:, r1, c0] + prefix[:, r0, c0]
        )
        return result

    cross = block(zero, tau, tau, kappa)
    within_x = block(zero, tau, zero, tau)
    within_y = block(tau, kappa, tau, kappa)
    energy = 2 * cross / (m * k) - within_x / (m * (m - 1)) - within_y / (k * (k - 1))
    scores = np.where(valid, m * k / (m + k) * energy, -np.inf)
    result: NDArray[np.float64] = scores.max(axis=2)
    return result


def _best_split(
    series: NDArray[np.float64],
    bounds: Sequence[tuple[int, int]],
    min_segment: int,
    shuffles: NDArray[np.float64] | None = None,
) -> tuple[float, int] | NDArray[np.float64]:
    """Without shuffles: (q̂, τ) of the best split over all segments; with: the best q̂ per row."""
    best_q = -np.inf if shuffles is None else np.full(len(shuffles), -np.inf)
    best_tau = -1
    for start, end in bounds:
        if end - start < 2 * min_segment:
            continue
        rows = series[None, start:end] if shuffles is None else shuffles[:, start:end]
        scores = _split_scores(rows, min_segment)
        if shuffles is None:
            i = int(np.argmax(scores[0]))
            if scores[0, i] > best_q:
                best_q, best_tau = float(scores[0, i]), start + min_segment + i
        else:
            best_q = np.maximum(best_q, scores.max(axis=1))
    if shuffles is None:
        return float(best_q), best_tau
    return np.asarray(best_q)


def find_change_points(
    series: Sequence[float],
    alpha: float = CHANGE_POINT_ALPHA,
    permutations: int = CHANGE_POINT_PERMUTATIONS,
    min_segment: int = MIN_SEGMENT,
    seed: int = SEED,
) -> list[ChangePoint]:
    """E-Divisive means change points of `series`, earliest first.

    Binary segmentation by the energy statistic (Matteson & James 2014, the method of
    MongoDB's signal-processing-algorithms and Apache Otava): take the split that maximises
    q̂ over all current segments, keep it when a permutation test (points shuffled within
    their segments) gives p <= alpha, and repeat; stop at the first split that is not
    significant.
    """
    data = np.asarray(series, dtype=float)
    rng = np.random.default_rng(seed)
    cuts: list[int] = []
    found: dict[int, float] = {}
    while True:
        bounds = list(zip([0, *cuts], [*cuts, len(data)], strict=True))
        best = _best_split(data, bounds, min_segment)
        assert isinstance(best, tuple)
        q, tau = best
        if tau < 0:
            break
        shuffled = np.tile(data, (permutations, 1))
        for start, end in bounds:
            shuffled[:, start:end] = rng.permuted(shuffled[:, start:end], axis=1)
        null = _best_split(data, bounds, min_segment, shuffles=shuffled)
        assert isinstance(null, np.ndarray)
        p = (int(np.sum(null >= q - 1e-12)) + 1) / (permutations + 1)
        if p > alpha:
            break
        found[tau] = p
        cuts = sorted([*cuts, tau])
    points = []
    edges = [0, *cuts, len(data)]
    for i, tau in enumerate(cuts, start=1):
        before = float(np.median(data[edges[i - 1] : tau]))
        after = float(np.median(data[tau : edges[i + 1]]))
        points.append(
            ChangePoint(
                index=tau,
                p_value=round(found[tau], 6),
                before_median=round(before, 2),
                after_median=round(after, 2),
                change_percent=round((after / before - 1) * 100, 2) if before else 0.0,
            )
        )
    return points


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)
