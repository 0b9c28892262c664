"""The two resources whole, and parsing a user's spec into them with precise errors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import (
    Field,
    ValidationError,
)

from tidb_bench_operator.domain.api.common import StatusModel
from tidb_bench_operator.domain.api.experiment import (
    BenchmarkExperimentSpec,
    BenchmarkExperimentStatus,
)
from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
from tidb_bench_operator.domain.api.run_status import BenchmarkRunStatus
from tidb_bench_operator.domain.api.schedule import BenchmarkScheduleSpec, BenchmarkScheduleStatus
from tidb_bench_operator.errors import SpecError

# --------------------------------------------------------------------------- resources


# The resources as a whole; apiVersion, kind and metadata are ignored (extra="ignore").


class BenchmarkRun(StatusModel):
    """A sysbench thread sweep against a TiDB cluster, with its results in status."""

    spec: BenchmarkRunSpec = Field(description="What to benchmark and how.")
    status: BenchmarkRunStatus | None = Field(
        default=None, description="What the controller observed and measured."
    )


class BenchmarkSchedule(StatusModel):
    """Creates BenchmarkRuns on a cron schedule and flags peak-QPS regressions."""

    spec: BenchmarkScheduleSpec = Field(description="When to run what, and what is a regression.")
    status: BenchmarkScheduleStatus | None = Field(
        default=None, description="What the schedule has done."
    )


class BenchmarkExperiment(StatusModel):
    """Measures a TiDB cluster as found and under each variant, then puts the cluster back."""

    spec: BenchmarkExperimentSpec = Field(
        description="The cluster it may change, the run, and the variants."
    )
    status: BenchmarkExperimentStatus | None = Field(
        default=None, description="The stash, each variant's result and the restore."
    )


#: The specs the controller validates; each checks its cross-field rules in validate_semantics.
Spec = TypeVar("Spec", BenchmarkRunSpec, BenchmarkScheduleSpec, BenchmarkExperimentSpec)


def _parse(model: type[Spec], data: Mapping[str, Any]) -> Spec:
    """Validate a spec fully, raising SpecError with the field path on any problem."""
    try:
        spec = model.model_validate(data)
    except ValidationError as exc:
        raise _spec_error(exc) from None
    spec.validate_semantics()
    return spec


def parse_run_spec(data: Mapping[str, Any]) -> BenchmarkRunSpec:
    """Validate a BenchmarkRun spec fully, raising SpecError with the field path on any problem."""
    return _parse(BenchmarkRunSpec, data)


def parse_schedule_spec(data: Mapping[str, Any]) -> BenchmarkScheduleSpec:
    """Validate a BenchmarkSchedule spec fully, raising SpecError with the field path."""
    return _parse(BenchmarkScheduleSpec, data)


def parse_experiment_spec(data: Mapping[str, Any]) -> BenchmarkExperimentSpec:
    """Validate a BenchmarkExperiment spec fully, raising SpecError with the field path."""
    return _parse(BenchmarkExperimentSpec, data)


def field_path(loc: tuple[int | str, ...]) -> str:
    """`("threads", 1)` -> `threads[1]`: a pydantic error location as a spec field path."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else part)
    return path


def _spec_error(exc: ValidationError) -> SpecError:
    """The first pydantic error as a SpecError (the others usually follow from the same typo)."""
    error = exc.errors()[0]
    more = exc.error_count() - 1
    hint = f"{more} more problem(s) after fixing this one" if more else ""
    return SpecError(field_path(error["loc"]), error["msg"], hint)
