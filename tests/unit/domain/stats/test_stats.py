"""Trial intervals, regression verdicts and change points against scipy and published tables."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest
from scipy import stats as sps

from tidb_bench_operator.domain.stats import inference as stats
from tidb_bench_operator.domain.stats.inference import (
    compare_runs,
    effect_interval,
    find_change_points,
    smallest_p_value,
    summarize_trials,
)

PS = "oltp_point_select"


def energy_statistic(x: Sequence[float], y: Sequence[float], unbiased: bool = True) -> float:
    """The energy statistic written out from its definition, to check the vectorised one.

    2·E|X−Y| − E|X−X'| − E|Y−Y'|. `unbiased` averages the within-sample terms over distinct
    pairs (the U-statistic E-Divisive uses); otherwise over all n² pairs, which is the
    square of scipy.stats.energy_distance.
    """
    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    cross = float(np.abs(a[:, None] - b[None, :]).mean())
    within_a = float(np.abs(a[:, None] - a[None, :]).sum())
    within_b = float(np.abs(b[:, None] - b[None, :]).sum())
    m, k = len(a), len(b)
    if unbiased:
        return 2 * cross - within_a / (m * (m - 1)) - within_b / (k * (k - 1))
    return 2 * cross - within_a / m**2 - within_b / k**2


# --------------------------------------------------------------------------- trials


def test_the_interval_of_three_trials_uses_the_published_t_quantile() -> None:
    # Student t, 2 degrees of freedom, two-sided 95%: 4.303 in every printed t table.
    summary = summarize_trials([100.0, 104.0, 98.0])
    mean = 302 / 3
    sd = math.sqrt(((100 - mean) ** 2 + (104 - mean) ** 2 + (98 - mean) ** 2) / 2)
    half = 4.303 * sd / math.sqrt(3)
    assert summary.median == 100.0
    assert summary.ci_low == pytest.approx(mean - half, abs=0.01)
    assert summary.ci_high == pytest.approx(mean + half, abs=0.01)
    assert summary.cv_percent == pytest.approx(sd / mean * 100)
    assert summary.noisy is False


def test_the_interval_matches_scipy_for_five_trials() -> None:
    values = [81_200.0, 79_950.0, 83_010.0, 80_400.0, 78_800.0]
    low, high = sps.t.interval(0.95, df=4, loc=np.mean(values), scale=sps.sem(values))
    summary = summarize_trials(values)
    assert (summary.ci_low, summary.ci_high) == pytest.approx((low, high))


def test_trials_that_disagree_beyond_the_bound_are_noisy() -> None:
    assert summarize_trials([100.0, 130.0, 80.0]).noisy is True
    assert summarize_trials([100.0, 130.0, 80.0], noisy_cv_percent=50).noisy is False


def test_one_trial_has_a_median_but_no_interval_and_is_never_noisy() -> None:
    summary = summarize_trials([1234.5])
    assert (summary.median, summary.ci_low, summary.cv_percent, summary.noisy) == (
        1234.5,
        None,
        None,
        False,
    )
    with pytest.raises(ValueError, match="at least one trial"):
        summarize_trials([])


# --------------------------------------------------------------------------- verdicts


@pytest.mark.parametrize(("n1", "n2"), [(3, 3), (3, 6), (3, 9), (5, 15), (1, 5)])
def test_the_smallest_p_value_is_what_scipy_gives_for_samples_that_do_not_overlap(
    n1: int, n2: int
) -> None:
    low = [float(i) for i in range(n1)]
    high = [float(100 + i) for i in range(n2)]
    exact = sps.mannwhitneyu(low, high, alternative="two-sided", method="exact").pvalue
    assert smallest_p_value(n1, n2) == pytest.approx(exact)


def test_the_smallest_p_value_for_three_against_nine_is_the_tabled_2_over_220() -> None:
    assert smallest_p_value(3, 9) == pytest.approx(2 / 220)


def _trials(center: float, spread: list[float]) -> list[float]:
    return [center * (1 + s) for s in spread]


NOISE_A = [-0.02, 0.01, 0.03]
NOISE_B = [0.02, -0.01, -0.03, 0.0, 0.015, -0.015, 0.025, -0.005, 0.005]


def _baseline(center: float) -> list[dict[tuple[str, int], list[float]]]:
    return [{(PS, 4): _trials(center, NOISE_B[i * 3 : i * 3 + 3])} for i in range(3)]


def test_a_thirty_percent_slowdown_is_regressed_with_p_value_and_interval() -> None:
    verdict = compare_runs({(PS, 4): _trials(70_000, NOISE_A)}, _baseline(100_000), 10)
    (step,) = verdict.steps
    assert verdict.verdict == step.verdict == "Regressed"
    expected = sps.mannwhitneyu(
        _trials(70_000, NOISE_A),
        [v for run in _baseline(100_000) for v in run[(PS, 4)]],
        alternative="two-sided",
    ).pvalue
    assert step.p_value == pytest.approx(expected, abs=1e-6)
    assert step.p_value == pytest.approx(2 / 220, abs=1e-6)  # the samples do not overlap
    assert step.effect_percent == pytest.approx(-30, abs=1.5)
    assert step.interval_low_percent is not None and step.interval_high_percent is not None
    assert step.interval_low_percent <= step.effect_percent <= step.interval_high_percent
    assert step.interval_high_percent < -10
    assert (step.trials, step.baseline_trials, step.baseline_runs) == (3, 9, 3)
    assert "-29.3%" in verdict.message and "p 0.00909" in verdict.message


def test_a_faster_run_is_improved() -> None:
    verdict = compare_runs({(PS, 4): _trials(130_000, NOISE_A)}, _baseline(100_000), 10)
    assert verdict.verdict == "Improved"
    assert verdict.steps[0].effect_percent == pytest.approx(30, abs=1.5)


def test_an_undisturbed_night_is_no_change() -> None:
    verdict = compare_runs({(PS, 4): _trials(100_000, NOISE_A)}, _baseline(100_000), 10)
    step = verdict.steps[0]
    assert verdict.verdict == step.verdict == "NoChange"
    assert step.p_value is not None and step.p_value > 0.05
    assert step.interval_low_percent is not None and step.interval_low_percent > -10


def test_a_significant_drop_smaller_than_the_minimum_effect_is_no_change() -> None:
    verdict = compare_runs({(PS, 4): _trials(95_000, [-0.002, 0.0, 0.002])}, _baseline(100_000), 10)
    step = verdict.steps[0]
    assert step.p_adjusted is not None and step.p_adjusted < 0.05
    assert step.verdict == "NoChange" and "smaller than" in step.reason


def test_one_trial_per_run_cannot_be_significant_and_says_what_to_do() -> None:
    baseline = [{(PS, 4): [100_000.0 + i]} for i in range(5)]
    verdict = compare_runs({(PS, 4): [50_000.0]}, baseline, 10)
    step = verdict.steps[0]
    assert verdict.verdict == step.verdict == "Inconclusive"
    assert step.p_value is None and "spec.repeats >= 3" in step.reason
    assert step.effect_percent == pytest.approx(-50, abs=0.1)


def test_no_baseline_is_inconclusive() -> None:
    verdict = compare_runs({(PS, 4): [1.0, 2.0, 3.0]}, [], 10)
    assert verdict.verdict == "Inconclusive"
    assert "no earlier successful run" in verdict.message


def test_a_step_missing_from_this_run_is_inconclusive_not_regressed() -> None:
    baseline = [{**run, (PS, 8): [1.0, 2.0, 3.0]} for run in _baseline(100_000)]
    verdict = compare_runs({(PS, 4): _trials(100_000, NOISE_A)}, baseline, 10)
    missing = next(s for s in verdict.steps if s.threads == 8)
    assert missing.verdict == "Inconclusive" and "no valid trial" in missing.reason


def test_p_values_are_corrected_with_benjamini_hochberg_over_the_steps() -> None:
    current = {
        (PS, 1): _trials(70_000, NOISE_A),
        (PS, 2): _trials(100_000, NOISE_A),
        (PS, 4): _trials(99_000, [0.03, -0.03, 0.0]),
    }
    baseline = [
        {key: _trials(100_000, NOISE_B[i * 3 : i * 3 + 3]) for key in current} for i in range(3)
    ]
    verdict = compare_runs(current, baseline, 10)
    raw = [s.p_value for s in verdict.steps]
    expected = sps.false_discovery_control(raw, method="bh")
    assert [s.p_adjusted for s in verdict.steps] == pytest.approx(list(expected), abs=1e-6)
    # BH by hand for three p-values: p_(i) * m / i, made monotone from the top.
    ordered = sorted(raw)  # type: ignore[type-var]
    by_hand = [min(1.0, min(ordered[j] * 3 / (j + 1) for j in range(i, 3))) for i in range(3)]
    assert sorted(s.p_adjusted for s in verdict.steps) == pytest.approx(by_hand, abs=1e-6)  # type: ignore[type-var]
    assert verdict.verdict == "Regressed"
    assert verdict.steps[0].verdict == "Regressed"


def test_the_effect_interval_is_deterministic_and_brackets_the_ratio_of_medians() -> None:
    current, base = [70.0, 72.0, 71.0, 69.0], [100.0, 101.0, 99.0, 98.0, 103.0]
    first = effect_interval(current, base)
    assert first == effect_interval(current, base)
    assert first is not None
    low, high = first
    # every resampled median of `current` lies in [69, 72] and of `base` in [98, 103]
    assert 69 / 103 * 100 - 100 <= low <= (70.5 / 100.0 - 1) * 100 <= high <= 72 / 98 * 100 - 100
    assert effect_interval([70.0], base) is None


# --------------------------------------------------------------------------- change points


def test_the_energy_statistic_is_the_square_of_scipys_energy_distance() -> None:
    x, y = [1.0, 4.0, 2.5, 3.0], [7.0, 6.5, 9.0]
    assert energy_statistic(x, y, unbiased=False) == pytest.approx(sps.energy_distance(x, y) ** 2)


def test_the_split_scores_are_the_best_energy_statistic_over_every_segment_end() -> None:
    rng = np.random.default_rng(3)
    series = rng.normal(100, 5, 14)
    scores = stats._split_scores(series[None, :], 3)[0]
    for i, tau in enumerate(range(3, 12)):
        direct = max(
            tau
            * (kappa - tau)
            / kappa
            * energy_statistic(list(series[:tau]), list(series[tau:kappa]))
            for kappa in range(tau + 3, 15)
        )
        assert scores[i] == pytest.approx(direct)


def _nightly(seed: int, nights: int = 30, shift_at: int | None = None) -> list[float]:
    """Uniform ±5% noise around 100,000 QPS; 10% lower from `shift_at` on."""
    rng = np.random.default_rng(seed)
    noise = rng.uniform(-0.05, 0.05, nights)
    return [
        100_000 * (1 + e) * (0.9 if shift_at is not None and night >= shift_at else 1.0)
        for night, e in enumerate(noise)
    ]


@pytest.mark.parametrize(("seed", "shift_at"), [(1, 20), (2, 10), (3, 15), (4, 24)])
def test_a_ten_percent_level_shift_is_found_at_its_night(seed: int, shift_at: int) -> None:
    points = find_change_points(_nightly(seed, shift_at=shift_at))
    assert [p.index for p in points] == [shift_at]
    assert points[0].change_percent == pytest.approx(-10, abs=3)
    assert points[0].p_value <= stats.CHANGE_POINT_ALPHA


def test_two_shifts_are_both_found() -> None:
    series = _nightly(7, nights=36)
    series = [v * (0.88 if 12 <= i < 24 else 1.0) for i, v in enumerate(series)]
    assert [p.index for p in find_change_points(series)] == [12, 24]


def test_pure_noise_rarely_shows_a_change_point() -> None:
    # The 1,000-series measurement is bench/stats_change_points.py; this keeps a small check.
    alarms = sum(bool(find_change_points(_nightly(seed))) for seed in range(100, 200))
    assert alarms <= 4


def test_a_short_history_has_no_change_point() -> None:
    assert find_change_points([100.0, 50.0, 100.0, 50.0, 100.0]) == []
    assert find_change_points([]) == []
