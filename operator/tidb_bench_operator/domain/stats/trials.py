"""A step measured several times (spec.repeats): which numbers the step shows for its trials.

The step's numbers are those of its median trial (by QPS, the lower one of an even count),
so latency, TPS and QPS in one row come from one real measurement; `qps` itself is the
median of the trials, and `qpsTrials` adds the interval, the CV and the noisy flag. Valid
trials are preferred: invalid ones count only when no trial is valid.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from tidb_bench_operator.domain.api.results import StepResult
from tidb_bench_operator.domain.api.run_status import StepStatus
from tidb_bench_operator.domain.api.trial import Trial
from tidb_bench_operator.domain.stats.inference import summarize_trials


def with_trial(
    step: StepStatus,
    trial: Trial,
    noisy_cv_percent: float,
    stored: Callable[[int], StepResult] | None = None,
) -> StepStatus:
    """A copy of `step` with `trial` added and its numbers recomputed from all its trials.

    Trials kept compact (status keeps no result: domain/results_store.py has it) are
    chosen by their QPS; the median one's result, when it is not `trial`'s, comes from
    `stored(n)` (n: its place in the step's trials).
    """
    trials = [*step.trials, trial]
    pool = [t for t in trials if t.valid] or trials
    ordered = sorted(pool, key=lambda t: t.qps)
    middle = ordered[(len(ordered) - 1) // 2]
    if middle.result is not None:
        numbers = middle.result
    elif stored is not None:
        numbers = stored(trials.index(middle))
    else:
        raise ValueError("the median trial's result is not in status and no store was given")
    updated = step.with_result(numbers)
    qps = [t.qps for t in pool]
    updated.trials = trials
    updated.qps = round(statistics.median(qps), 2)
    updated.qps_trials = summarize_trials(qps, noisy_cv_percent)
    updated.valid = any(t.valid for t in trials)
    updated.client_saturated = middle.client_saturated
    return updated


def valid_trial_qps(step: StepStatus) -> list[float]:
    """QPS of the step's valid trials; a step measured once (no trials) gives its own QPS."""
    if step.trials:
        return [t.qps for t in step.trials if t.valid]
    return [step.qps] if step.qps is not None and step.valid is not False else []
