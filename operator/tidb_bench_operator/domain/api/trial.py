"""A step's trial as status keeps it (compact) and the bounds of a measured step in status.

Status holds what `kubectl get/describe` and the report need; the rest of a trial (its full
result, notes and disturbances) is in the run's results store (domain/results_store.py).
The bound these constants give is stated in docs/how-a-run-goes.md.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field, model_validator

from tidb_bench_operator.domain.api.common import MAX_STATUS_INT, StatusModel
from tidb_bench_operator.domain.api.guard import Disturbance
from tidb_bench_operator.domain.api.results import StepResult

#: Trials status lists over all steps; a run with more keeps this many spread over its steps
#: (each step at least one) and the rest in the results store only.
MAX_STATUS_TRIALS = 1024
#: A measured step in status keeps at most this many notes (the rest: the results store) ...
STATUS_NOTES = 4
#: ... each cut at this many characters ...
STATUS_NOTE_CHARS = 160
#: ... and at least this many of its disturbances (the notes summarise them all) ...
STATUS_DISTURBANCES = 2
#: ... or, in a run of few steps, this many over all steps (up to the 20 a step keeps).
MAX_STATUS_DISTURBANCES = 256
#: The note that says where a step's other notes are.
MORE_NOTES = "more notes:"


#: Of a cut note, status keeps this many characters of its end: a note says what happened
#: last ("…; run again", "…: its interval series is not kept").
STATUS_NOTE_END = 48


def cut(text: str) -> str:
    """`text`, or its beginning and its last STATUS_NOTE_END characters around an ellipsis,
    STATUS_NOTE_CHARS in all."""
    if len(text) <= STATUS_NOTE_CHARS:
        return text
    return text[: STATUS_NOTE_CHARS - 1 - STATUS_NOTE_END] + "…" + text[-STATUS_NOTE_END:]


class Trial(StatusModel):
    """One measurement of a step; with spec.repeats > 1 a step has several.

    In status a trial is a compact line (round, qps, valid, how many disturbances): its full
    result, notes and disturbances are in the run's results store (domain/results_store.py,
    document t<step>m<n>), where `tidb-bench report` reads them. Runs of earlier releases
    kept them here, and are still read.
    """

    round: int = Field(
        le=MAX_STATUS_INT, ge=0, description="Sweep round the trial was measured in, from 0."
    )
    # Not required in the CRD: a run measuring while the controller is upgraded has trials
    # of the earlier release (QPS only in `result`, filled in below) beside new ones.
    qps: float = Field(default=0.0, description="The trial's QPS (clients combined).")
    result: StepResult | None = Field(
        default=None,
        description="The trial's numbers (clients combined); in the results store, not in "
        "status (runs of earlier releases kept them here).",
    )
    valid: bool | None = Field(default=None, description="Whether the trial can be trusted.")
    client_saturated: bool | None = Field(
        default=None, description="True when the clients, not the database, were the bottleneck."
    )
    finished_at: datetime | None = Field(default=None, description="When the trial ended.")
    disturbed: int | None = Field(
        default=None,
        ge=0,
        le=MAX_STATUS_INT,
        description="How many disturbances the guard saw while the trial ran (listed in the "
        "results store); any makes it invalid.",
    )
    cpu_ms_per_query: float | None = Field(
        default=None,
        description="Server CPU milliseconds per query over the trial's measured window "
        "(resources.cpuMsPerQuery); kept in status for the schedule's efficiency verdict.",
    )
    notes: list[str] | None = Field(
        default=None,
        description="How the trial was measured (in the results store; status keeps none).",
    )
    disturbances: list[Disturbance] | None = Field(
        default=None,
        description="What the guard saw change while the trial ran (in the results store; "
        "status keeps the count, `disturbed`).",
    )

    @model_validator(mode="before")
    @classmethod
    def _qps_from_result(cls, value: object) -> object:
        """A trial written by an earlier release has its QPS only in its result."""
        if isinstance(value, dict) and "qps" not in value:
            result = value.get("result")
            qps = result.get("qps") if isinstance(result, dict) else getattr(result, "qps", None)
            if qps is not None:
                return {**value, "qps": qps}
        return value

    def compact(self) -> Trial:
        """The trial as status keeps it: no result, notes or disturbances, their count."""
        count = max(self.disturbed or 0, len(self.disturbances or []))
        return self.model_copy(
            update={
                "result": None,
                "notes": None,
                "disturbances": None,
                "disturbed": count or None,
                "finished_at": None,
                "client_saturated": self.client_saturated or None,
            }
        )
