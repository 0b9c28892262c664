"""The BenchmarkSchedule spec and status: cron, concurrency, regression, history."""

from __future__ import annotations

import re
import zoneinfo
from datetime import datetime
from typing import Literal

from pydantic import (
    Field,
)

from tidb_bench_operator.domain.api.common import (
    MAX_SECONDS,
    MAX_STATUS_INT,
    SpecModel,
    StatusModel,
    TerminalPhase,
)
from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
from tidb_bench_operator.domain.api.run_status import Condition
from tidb_bench_operator.domain.api.verdicts import (
    StepChangePoint,
)
from tidb_bench_operator.domain.fingerprint import Fingerprint
from tidb_bench_operator.errors import SpecError

_CRON_MACROS = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)
_CRON_FIELD = re.compile(r"^[0-9A-Za-z*?,/-]+$")

# --------------------------------------------------------------------------- schedule


class Regression(SpecModel):
    """When a scheduled run counts as a regression."""

    baseline_runs: int = Field(
        default=5,
        ge=1,
        le=50,
        description="How many previous successful runs form the baseline (their median peak QPS).",
    )
    max_qps_drop_percent: float = Field(
        default=10,
        ge=0,
        le=100,
        description="The minimum effect: a step regressed when its QPS is significantly "
        "lower than the baseline's (Mann-Whitney U, corrected over the steps) AND by at least "
        "this much; a gain as large is Improved.",
    )
    trend_runs: int = Field(
        default=30,
        ge=0,
        le=200,
        description="Successful runs kept in status.history for the change-point search over "
        "the schedule's trend (0: none beyond baselineRuns).",
    )


class BenchmarkScheduleSpec(SpecModel):
    """Runs a BenchmarkRun on a cron schedule and watches its peak QPS for regressions."""

    schedule: str = Field(
        min_length=1,
        description="Cron expression (5 fields, e.g. `0 2 * * *`) or a macro such as @daily.",
    )
    time_zone: str | None = Field(
        default=None,
        description="IANA time zone of the schedule, e.g. Asia/Shanghai; default UTC.",
    )
    suspend: bool = Field(default=False, description="Create no new runs while true.")
    concurrency_policy: Literal["Forbid", "Allow", "Replace"] = Field(
        default="Forbid",
        description="When a run is still active at the next time: Forbid skips the new run, "
        "Allow starts it too (it waits for the cluster), Replace cancels the active one.",
    )
    starting_deadline_seconds: int | None = Field(
        default=None,
        ge=0,
        le=MAX_SECONDS,
        description="A run not started within this many seconds of its time is skipped.",
    )
    successful_runs_history_limit: int = Field(
        default=3, ge=0, le=100, description="Succeeded BenchmarkRuns to keep."
    )
    failed_runs_history_limit: int = Field(
        default=1, ge=0, le=100, description="Failed or cancelled BenchmarkRuns to keep."
    )
    template: BenchmarkRunSpec = Field(description="Spec of each BenchmarkRun created.")
    regression: Regression = Field(
        default_factory=Regression, description="How a regression is detected."
    )

    def validate_semantics(self) -> None:
        """Raise SpecError for a bad cron expression, time zone or template."""
        _check_cron("schedule", self.schedule)
        if self.time_zone is not None:
            try:
                zoneinfo.ZoneInfo(self.time_zone)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                raise SpecError(
                    "timeZone",
                    f"unknown time zone {self.time_zone!r}",
                    "use an IANA name such as UTC or Asia/Shanghai",
                ) from None
        self.template.validate_semantics(prefix="template.")


def _check_cron(field: str, expression: str) -> None:
    """Raise SpecError unless `expression` looks like a 5-field cron line or a macro."""
    text = expression.strip()
    if text in _CRON_MACROS:
        return
    parts = text.split()
    if len(parts) != 5 or not all(_CRON_FIELD.match(part) for part in parts):
        raise SpecError(
            field,
            f"{expression!r} is not a cron expression",
            "use 5 fields (minute hour day-of-month month day-of-week), e.g. '0 2 * * *', "
            "or one of " + ", ".join(sorted(_CRON_MACROS)),
        )


class HistoryStep(StatusModel):
    """One step's numbers kept in a schedule's history, for later regression baselines."""

    workload: str = Field(description="sysbench test name.")
    threads: int = Field(le=MAX_STATUS_INT, ge=1, description="Threads per client.")
    qps: float = Field(description="The step's QPS (all clients combined).")
    latency_ms: float | None = Field(
        default=None, description="The step's percentile latency, in milliseconds."
    )
    trials: list[float] = Field(
        default_factory=list, description="QPS of each valid trial (spec.repeats)."
    )
    cpu_ms_per_query: list[float] = Field(
        default_factory=list,
        description="Server CPU milliseconds per query of each valid trial (of the step, "
        "for a run measured once); empty when the step has no resource data.",
    )


class HistoryEntry(StatusModel):
    """One finished run of a schedule."""

    name: str = Field(description="BenchmarkRun name.")
    outcome: TerminalPhase = Field(description="The run's final phase.")
    peak_qps: float | None = Field(default=None, description="The run's peak QPS.")
    baseline_qps: float | None = Field(
        default=None, description="Baseline peak QPS the run was compared with."
    )
    regressed: bool | None = Field(
        default=None, description="Whether the run's peak QPS fell below the regression bound."
    )
    started_at: datetime | None = Field(default=None, description="When the run started.")
    finished_at: datetime | None = Field(default=None, description="When the run finished.")
    steps: list[HistoryStep] = Field(
        default_factory=list,
        description="QPS per valid step, so regression baselines outlive deleted runs.",
    )
    verdict: str | None = Field(
        default=None,
        description="Regressed, Improved, NoChange or Inconclusive against the baseline.",
    )
    efficiency: str | None = Field(
        default=None,
        description="Server CPU per query against the baseline: Regressed (a rise), Improved, "
        "NoChange or Inconclusive; unset when no step had resource data.",
    )
    invalid_trials: int | None = Field(
        le=MAX_STATUS_INT,
        default=None,
        description="Trials (or steps measured once) left out of comparisons as invalid.",
    )
    fingerprint: Fingerprint | None = Field(
        default=None,
        description="The run's environment fingerprint; kept for the newest baselineRuns "
        "successful runs, so a verdict can say what changed.",
    )


class BenchmarkScheduleStatus(StatusModel):
    """What the schedule has done; written only by the controller."""

    last_schedule_time: datetime | None = Field(
        default=None, description="When a run was last created."
    )
    last_successful_run: str | None = Field(
        default=None, description="Name of the latest Succeeded run."
    )
    last_peak_qps: float | None = Field(
        default=None, description="Peak QPS of the latest Succeeded run."
    )
    active: list[str] = Field(default_factory=list, description="Runs not yet finished.")
    history: list[HistoryEntry] = Field(
        default_factory=list,
        description="Finished runs, oldest first; kept beyond the run history limits so the "
        "regression baseline survives run deletion.",
    )
    regressed: bool = Field(
        default=False, description="Whether the latest Succeeded run is a regression."
    )
    verdict: str | None = Field(
        default=None, description="The latest Succeeded run's verdict against its baseline."
    )
    efficiency: str | None = Field(
        default=None,
        description="The latest Succeeded run's efficiency verdict (server CPU per query) "
        "against its baseline; unset when its steps had no resource data.",
    )
    change_points: list[StepChangePoint] = Field(
        default_factory=list,
        description="Where a step's QPS moved to another level over the history (E-Divisive "
        "means), oldest first.",
    )
    conditions: list[Condition] = Field(default_factory=list, description="Latest observations.")
    observed_generation: int | None = Field(
        le=MAX_STATUS_INT, default=None, description="metadata.generation the status describes."
    )
    message: str | None = Field(default=None, description="Latest notable event, in one sentence.")
