"""The schedule's efficiency verdict: a run's server CPU per query against its baseline runs,
judged with the statistics of the QPS verdict, a rise being the regression (docs/schedules.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tidb_bench_operator.domain.api.schedule import HistoryEntry
from tidb_bench_operator.domain.api.verdicts import RunComparison
from tidb_bench_operator.domain.schedule import step_cpu_trials
from tidb_bench_operator.domain.stats.inference import compare_runs

#: Steps without resource data named in the message; the rest are counted.
NAMED_STEPS = 4


@dataclass(frozen=True)
class Efficiency:
    """The efficiency verdict on a run (None: no step had resource data) and what to say."""

    verdict: RunComparison | None
    message: str


def judge_efficiency(
    entry: HistoryEntry,
    previous: Sequence[HistoryEntry],
    baseline_runs: int,
    min_effect_percent: float,
    excluded_invalid: int = 0,
) -> Efficiency:
    """`entry`'s CPU ms per query, step by step, against the newest `baseline_runs`
    successful runs of `previous` (oldest first) that have resource data.

    Only the steps with resource data are judged: a step without it gets no verdict (the
    message names it), and a run with none gets no verdict at all.
    """
    current = step_cpu_trials(entry.steps)
    if not current:
        return Efficiency(
            None,
            "no efficiency verdict: no step of the run has server CPU per query "
            "(no resource data: spec.metrics, or server metrics unavailable)",
        )
    measured = [e for e in previous if e.outcome == "Succeeded" and step_cpu_trials(e.steps)]
    baseline = [
        {key: cpu for key, cpu in step_cpu_trials(e.steps).items() if key in current}
        for e in measured[-baseline_runs:]
    ]
    verdict = compare_runs(
        current,
        baseline,
        min_effect_percent,
        excluded_invalid=excluded_invalid,
        metric="cpuMsPerQuery",
    )
    missing = [f"{s.workload} at {s.threads} threads" for s in entry.steps
               if (s.workload, s.threads) not in current]  # fmt: skip
    text = verdict.message
    if missing:
        named = ", ".join(missing[:NAMED_STEPS])
        more = len(missing) - NAMED_STEPS
        text += f"; no efficiency verdict for {named}" + (f" and {more} more" if more > 0 else "")
        text += " (no resource data)"
    return Efficiency(verdict, text)
