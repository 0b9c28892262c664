"""What the statistics conclude, as wire models: trial summaries, verdicts, change points.

Kept apart from domain/stats.py (which computes them with numpy and scipy) so that the
status models, the runner and the CLI can read and write them without loading either.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from tidb_bench_operator.domain.api.base import TolerantCamelModel
from tidb_bench_operator.domain.api.common import MAX_STATUS_INT

Verdict = Literal["Regressed", "Improved", "NoChange", "Inconclusive"]
#: What a comparison judges: QPS (lower is worse) or the server's CPU milliseconds per query
#: (the schedule's efficiency verdict: higher is worse).
Metric = Literal["qps", "cpuMsPerQuery"]
#: A step whose trials' coefficient of variation exceeds this (in percent) is marked noisy.
NOISY_CV_PERCENT = 10.0


class _Camel(TolerantCamelModel):
    """Base: immutable; read back from a status written by another version, so tolerant."""

    model_config = ConfigDict(frozen=True)


class TrialSummary(_Camel):
    """What N trials of one step say together."""

    n: int = Field(le=MAX_STATUS_INT, description="Number of trials.")
    median: float = Field(description="Median of the trials: the headline number.")
    mean: float = Field(description="Mean of the trials.")
    ci_low: float | None = Field(
        default=None,
        description="Lower end of the 95% confidence interval of the mean (Student t); "
        "null with fewer than 2 trials.",
    )
    ci_high: float | None = Field(default=None, description="Upper end of the same interval.")
    cv_percent: float | None = Field(
        default=None,
        description="Coefficient of variation (sample standard deviation / mean), in percent; "
        "null with fewer than 2 trials.",
    )
    noisy: bool = Field(description="True when cvPercent exceeds the noisy bound.")


class StepVerdict(_Camel):
    """One (workload, threads) step of a run against the same step of the baseline runs."""

    workload: str = Field(description="sysbench test name.")
    threads: int = Field(le=MAX_STATUS_INT, description="Threads per client.")
    verdict: Verdict = Field(description="Regressed, Improved, NoChange or Inconclusive.")
    effect_percent: float | None = Field(
        default=None,
        description="median(this run's trials) / median(baseline trials) - 1, in percent.",
    )
    interval_low_percent: float | None = Field(
        default=None, description="Lower end of the effect's 95% bootstrap interval, in percent."
    )
    interval_high_percent: float | None = Field(
        default=None, description="Upper end of the effect's 95% bootstrap interval, in percent."
    )
    p_value: float | None = Field(default=None, description="Two-sided Mann–Whitney U p-value.")
    p_adjusted: float | None = Field(
        default=None,
        description="The p-value after the Benjamini–Hochberg correction over the run's steps.",
    )
    trials: int = Field(le=MAX_STATUS_INT, description="This run's trials of the step.")
    baseline_trials: int = Field(
        le=MAX_STATUS_INT, description="Baseline trials of the step, pooled over runs."
    )
    baseline_runs: int = Field(le=MAX_STATUS_INT, description="Baseline runs that had the step.")
    median_qps: float | None = Field(default=None, description="Median of this run's trials.")
    baseline_median_qps: float | None = Field(
        default=None, description="Median of the baseline trials."
    )
    reason: str = Field(description="Why this verdict, in one sentence.")


class RunComparison(_Camel):
    """A run against its baseline, step by step, and one verdict for the whole run."""

    verdict: Verdict = Field(
        description="Regressed when any step regressed; else Improved when any improved; "
        "NoChange when every step is NoChange; else Inconclusive."
    )
    min_effect_percent: float = Field(description="Smallest change that counts, in percent.")
    alpha: float = Field(description="Significance level after the correction.")
    baseline_runs: int = Field(le=MAX_STATUS_INT, description="Baseline runs compared with.")
    excluded_invalid: int = Field(
        le=MAX_STATUS_INT,
        default=0,
        description="Baseline and current trials left out because they were invalid.",
    )
    steps: list[StepVerdict] = Field(default_factory=list, description="Per-step verdicts.")
    message: str = Field(description="One line saying what was found.")
    metric: Metric = Field(
        default="qps",
        description="What the steps' trials measure: qps (a drop is a regression) or "
        "cpuMsPerQuery (server CPU ms per query, a rise is a regression; the steps' "
        "medianQps and baselineMedianQps then hold CPU ms per query).",
    )


class ChangePoint(_Camel):
    """Where a series' level moved: the first point at the new level."""

    index: int = Field(le=MAX_STATUS_INT, description="Index of the first point after the change.")
    p_value: float = Field(description="Permutation p-value of the split.")
    before_median: float = Field(description="Median of the segment before the change.")
    after_median: float = Field(description="Median of the segment after the change.")
    change_percent: float = Field(description="after / before - 1, in percent.")


class StepChangePoint(TolerantCamelModel):
    """Where one step's nightly QPS moved to another level."""

    workload: str = Field(description="sysbench test name.")
    threads: int = Field(le=MAX_STATUS_INT, description="Threads per client.")
    run: str = Field(description="The first run at the new level.")
    previous_run: str | None = Field(default=None, description="The last run at the old level.")
    p_value: float = Field(description="Permutation p-value of the change (E-Divisive means).")
    before_median_qps: float = Field(description="Median QPS of the runs before the change.")
    after_median_qps: float = Field(description="Median QPS of the runs from the change on.")
    change_percent: float = Field(description="after / before - 1, in percent.")
