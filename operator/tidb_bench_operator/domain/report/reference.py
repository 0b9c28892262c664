"""Published sysbench numbers to compare a run with (`tidb-bench report --compare FILE`).

A reference file holds numbers someone else measured — a cloud vendor's sizing table, an
older report — with where they come from and under which conditions, so a report can put
them beside a run and print the source next to them. The format is documented in
docs/reference-format.md; examples/reference/published-sysbench.yaml is one such file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from tidb_bench_operator.domain.sysbench import Workload
from tidb_bench_operator.errors import TidbBenchError

REFERENCE_KIND = "BenchmarkReference"


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


def _range(value: object) -> object:
    """A number stays a number; `[low, high]` must be two numbers, low <= high."""
    if isinstance(value, list | tuple):
        if len(value) != 2:
            raise ValueError("a range is [low, high]: exactly two numbers")
        low, high = value
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value):
            raise ValueError("a range is [low, high] of numbers")
        if low > high:
            raise ValueError(f"range [{low}, {high}] has low > high")
        return (float(low), float(high))
    return value


class ReferenceResult(_Model):
    """One published number: a workload at a thread count (or unknown), QPS/TPS and latency."""

    workload: Workload = Field(description="sysbench test, as in BenchmarkRun spec.workloads.")
    threads: int | None = Field(
        default=None, ge=1, description="Threads used; omit when the source does not say."
    )
    qps: float | tuple[float, float] | None = Field(
        default=None, description="Queries per second, or [low, high] for a published range."
    )
    tps: float | tuple[float, float] | None = Field(
        default=None, description="Transactions per second, or [low, high]."
    )
    latency_ms: float | None = Field(
        default=None, ge=0, description="Latency at `percentile`, in milliseconds."
    )
    percentile: int = Field(default=95, ge=1, le=100, description="Which percentile latencyMs is.")

    @field_validator("qps", "tps", mode="before")
    @classmethod
    def _number_or_range(cls, value: object) -> object:
        return _range(value)

    def has_number(self) -> bool:
        return self.qps is not None or self.tps is not None


class Reference(_Model):
    """A set of published numbers measured together: one system under one set of conditions."""

    name: str = Field(min_length=1, description="What was measured, e.g. the instance size.")
    source: str = Field(
        min_length=1, description="Where the numbers are published (title and URL)."
    )
    conditions: str = Field(
        default="", description="Versions, hardware, dataset, duration, SLO the numbers hold for."
    )
    results: list[ReferenceResult] = Field(min_length=1, description="The numbers.")


class ReferenceFile(_Model):
    """A file of references."""

    api_version: Literal["tidbbench.io/v1alpha1"] = Field(description="tidbbench.io/v1alpha1")
    kind: Literal["BenchmarkReference"] = Field(description=REFERENCE_KIND)
    references: list[Reference] = Field(min_length=1, description="One entry per system.")


def is_reference(doc: object) -> bool:
    """True for a parsed document that declares itself a reference file."""
    return isinstance(doc, Mapping) and doc.get("kind") == REFERENCE_KIND


def parse_reference(doc: Mapping[str, Any], origin: str) -> ReferenceFile:
    """The validated reference file; errors name the file, the field path and the fix."""
    try:
        parsed = ReferenceFile.model_validate(doc)
    except ValidationError as exc:
        problems = []
        for err in exc.errors()[:5]:
            where = ".".join(str(p) for p in err["loc"]) or "(top level)"
            problems.append(f"{where}: {err['msg']}")
        raise TidbBenchError(
            f"{origin}: not a valid {REFERENCE_KIND}: "
            + "; ".join(problems)
            + " (the format is in docs/reference-format.md)"
        ) from None
    for i, ref in enumerate(parsed.references):
        for j, row in enumerate(ref.results):
            if not row.has_number():
                raise TidbBenchError(
                    f"{origin}: references.{i}.results.{j}: neither qps nor tps is set "
                    "(give at least one number to compare with)"
                )
    return parsed
