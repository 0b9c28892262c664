"""The runner → controller result message: typed, versioned, read the same on both sides.

A benchmark pod's runner (runner.py) ends by writing one JSON document to its termination
message; the controller reads it from the pod's status (reconcile/). The two may come from
different images (`spec.image` is the user's), so the document carries a version `v`, and
the reader checks it before anything else: a message of another version fails its step with
both versions named, instead of being misread. Within one version, fields may be added
(readers ignore keys they do not know); renaming or removing one needs a new version.

The message must fit Kubernetes' 4 KiB termination message (`termination_text`); the
per-interval series goes to the pod log instead, on one line starting with SERIES_MARKER.
docs/design.md ("The result message") shows a message of each kind.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import Field, ValidationError

from tidb_bench_operator.domain.api.base import TolerantCamelModel
from tidb_bench_operator.domain.api.common import MAX_STATUS_INT
from tidb_bench_operator.domain.api.results import StepResult
from tidb_bench_operator.domain.sysbench import combine_step_results

#: The version this code writes and the only one it reads.
RESULT_VERSION = 1
#: Kubernetes truncates a termination message beyond this many bytes.
MAX_TERMINATION_MESSAGE = 4096
#: A failure's text is cut here, so that even escaped non-ASCII text leaves room for the rest.
MAX_FAILURE_MESSAGE = 3000
#: Prefix of the one log line that carries a step's per-interval series (runner → ConfigMap).
SERIES_MARKER = "TIDB-BENCH-SERIES "


class _Message(TolerantCamelModel):
    v: int = Field(
        le=MAX_STATUS_INT, default=RESULT_VERSION, description="Version of the message's schema."
    )


class ClientCpu(TolerantCamelModel):
    """How much CPU the client used while measuring, and whether that was all it had."""

    used: float = Field(description="CPU seconds per wall second sysbench used.")
    available: float = Field(description="CPUs the client may use (cgroup quota or affinity).")
    saturated: bool = Field(description="True when used >= 90% of available.")


class StepReport(_Message):
    """A measured step of one client (`tidb-bench runner step`)."""

    ok: Literal[True] = True
    result: StepResult = Field(description="The client's end-of-run numbers.")
    started_at: str | None = Field(default=None, description="When measuring began (ISO 8601).")
    late_seconds: float = Field(default=0.0, description="How late it started for the rendezvous.")
    late: bool = Field(default=False, description="Later than the allowed start skew.")
    cpu: ClientCpu | None = Field(default=None, description="The client's CPU use.")
    notes: list[str] = Field(default_factory=list, description="How the numbers were obtained.")
    histogram: list[tuple[float, int]] = Field(
        default_factory=list, description="sysbench's latency histogram: (ms, count) rows."
    )
    histogram_dropped: bool | None = Field(
        default=None, description="True when the histogram did not fit in the message."
    )
    queue_max: int | None = Field(
        default=None, description="(--rate) the longest sysbench event queue reported."
    )
    queue_last: int | None = Field(
        default=None, description="(--rate) the event queue at the last report."
    )
    series: list[dict[str, Any]] = Field(
        default_factory=list,
        description="The interval lines; printed on the SERIES_MARKER log line, never in the "
        "termination message, and kept by the controller as they are.",
    )


class DatasetReport(_Message):
    """What `tidb-bench runner prepare|cleanup` did to the dataset."""

    ok: Literal[True] = True
    action: Literal["prepared", "reused", "verified", "cleaned"] = Field(
        description="prepared: loaded now; reused: present with the right row counts; "
        "verified: present (prepare: Never); cleaned: dropped."
    )
    tables: int = Field(le=MAX_STATUS_INT, description="How many tables.")
    reason: Literal["missing", "stale"] | None = Field(
        default=None, description="Why it was loaded: no tables, or tables of another size."
    )
    seconds: float | None = Field(default=None, description="How long loading took.")
    analyzed: int | None = Field(
        le=MAX_STATUS_INT,
        default=None,
        description="Tables analyzed after prepare (ANALYZE TABLE).",
    )
    analyze_seconds: float | None = Field(default=None, description="How long that took.")
    warmed: int | None = Field(
        le=MAX_STATUS_INT,
        default=None,
        description="Tables read through their index to warm the cache.",
    )
    warm_up_seconds: float | None = Field(default=None, description="How long that took.")
    scripts: list[str] | None = Field(
        default=None,
        max_length=16,
        description="Custom workloads whose own prepare (or cleanup) ran.",
    )


class RunnerFailure(_Message):
    """The runner failed (or its message could not be read); `message` says what to do."""

    ok: Literal[False] = False
    kind: str = Field(description="Short cause: a sysbench failure kind or an exception name.")
    message: str = Field(description="What failed, where, and what to do.")


Report = TypeVar("Report", StepReport, DatasetReport)

#: Failure kinds that say the client lost the database or was stopped, not that the step
#: cannot work: such a step is run again (spec.stepRetries). "cancelled": the runner got
#: SIGTERM (its pod was deleted or evicted).
RETRIED_KINDS = ("connect", "no-summary", "thread-init-timeout", "cancelled")
#: MySQL client errors of a connection lost or refused mid-step (server gone away, lost
#: connection, cannot connect, server shutdown in progress).
RETRIED_ERRNOS = ("2006", "2013", "2003", "1053")


def termination_text(message: StepReport | DatasetReport | RunnerFailure) -> str:
    """The message as the termination message: compact JSON within MAX_TERMINATION_MESSAGE.

    What does not fit is dropped in this order: the series (always: the log has it), the
    histogram (flagged: the controller then takes the worst client's percentile and says
    so), the last notes, the end of a failure's text.
    """
    doc = message.model_dump(by_alias=True, mode="json", exclude_none=True, exclude={"series"})
    text = _dumps(doc)
    if len(text) > MAX_TERMINATION_MESSAGE and "histogram" in doc:
        doc.pop("histogram")
        doc["histogramDropped"] = True
        text = _dumps(doc)
    while len(text) > MAX_TERMINATION_MESSAGE and doc.get("notes"):
        doc["notes"].pop()
        text = _dumps(doc)
    # JSON escapes non-ASCII text as \uXXXX: a 3000-character message may still be too long.
    while len(text) > MAX_TERMINATION_MESSAGE and isinstance(doc.get("message"), str):
        over = len(text) - MAX_TERMINATION_MESSAGE
        doc["message"] = doc["message"][: -max(over // 6, 1) - 1]
        text = _dumps(doc)
    return text


def _dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, separators=(",", ":"))


def is_retried(f: RunnerFailure) -> bool:
    """True when the failure is the database or the pod going away, not the step itself."""
    if f.kind in RETRIED_KINDS:
        return True
    return f.kind in ("sql-error", "fatal") and any(
        f"error {n}" in f.message for n in RETRIED_ERRNOS
    )


def failure(kind: str, message: str) -> RunnerFailure:
    """A failure message, its text cut to MAX_FAILURE_MESSAGE characters."""
    return RunnerFailure(kind=kind, message=message[:MAX_FAILURE_MESSAGE])


def read_report(
    text: str, expected: type[Report], *, exit_code: int | None = None
) -> Report | RunnerFailure:
    """Read a termination message as `expected`, or as the failure it reports or is.

    The version is checked first; text that is not a JSON object, or does not match the
    schema of its version, is a RunnerFailure quoting it.
    """
    try:
        doc = json.loads(text)
    except ValueError:
        return failure("unreadable", f"exit {exit_code}: {text[-800:]}")
    if not isinstance(doc, dict):
        return failure("unreadable", f"exit {exit_code}: {text[-800:]}")
    version = doc.get("v")
    if version != RESULT_VERSION:
        return failure(
            "version",
            f"the runner wrote a result of version {version!r}, and this controller reads "
            f"version {RESULT_VERSION}: run the runner image of the controller's release "
            "(remove spec.image, or set it to that image)",
        )
    try:
        if doc.get("ok") is False:
            return RunnerFailure.model_validate(doc)
        return expected.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "message"
        return failure(
            "invalid",
            f"the runner's version {RESULT_VERSION} result does not match its schema at "
            f"{where}: {first['msg']} (message: {text[:300]})",
        )


def series_line(series: Sequence[dict[str, Any]]) -> str:
    """The log line carrying a step's interval series."""
    return SERIES_MARKER + _dumps({"series": list(series)})


def read_series(log: str) -> list[dict[str, Any]] | None:
    """The series from a runner's log (its last SERIES_MARKER line), or None when absent."""
    found = None
    for line in log.splitlines():
        if line.startswith(SERIES_MARKER):
            found = json.loads(line[len(SERIES_MARKER) :]).get("series", [])
    return found


@dataclass(frozen=True)
class CombinedStep:
    """A step's clients combined: one result, the notes to keep, and what made it doubtful."""

    result: StepResult
    notes: list[str]
    late: list[StepReport]
    saturated: bool


def combine_clients(reports: Sequence[StepReport]) -> CombinedStep:
    """Combine the reports of a step's clients (domain.sysbench.combine_step_results).

    Notes appear once each, in the clients' order, then how the clients were combined.
    """
    results = [r.result for r in reports]
    histograms = [list(r.histogram) or None for r in reports]
    combined, how = combine_step_results(results, histograms)
    notes: list[str] = []
    for r in reports:
        notes.extend(n for n in r.notes if n not in notes)
    if len(reports) > 1:
        notes.extend(how)
    return CombinedStep(
        result=combined,
        notes=notes,
        late=[r for r in reports if r.late],
        saturated=any(r.cpu is not None and r.cpu.saturated for r in reports),
    )
