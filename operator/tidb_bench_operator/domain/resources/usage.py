"""What a usage source (Prometheus, the resource metrics API) read for one step's window.

The adapters (adapters/usage/) build these; domain/resources/ turns them, with the pods' and
nodes' facts, into the step's block of status. Nothing here holds a Secret or a foreign
answer's text: `notes` are written by the adapters in our own words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class PodKey:
    """A pod whose usage is asked for."""

    namespace: str
    name: str


@dataclass(frozen=True)
class PodUsage:
    """One pod over the window: mean cores, peak working set, mean network rates."""

    namespace: str
    name: str
    cpu_cores: float | None = None
    memory_bytes: float | None = None
    rx_bytes_per_sec: float | None = None
    tx_bytes_per_sec: float | None = None


@dataclass(frozen=True)
class NodeUsage:
    """One node's total CPU over the window, when the source has it (else derived from pods)."""

    name: str
    cpu_cores: float


@dataclass(frozen=True)
class UsageReading:
    """A source's answer for a window; `unavailable` says why nothing could be read."""

    source: str
    start: datetime
    end: datetime
    pods: tuple[PodUsage, ...] = ()
    nodes: tuple[NodeUsage, ...] = ()
    #: Requests sent to the source for this reading (the cost, docs/resources.md).
    queries: int = 0
    unavailable: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


class UsageSource(Protocol):
    """Reads pods' (and nodes') usage over a window; never raises: failures are `unavailable`."""

    #: How long after a window's end its usage is complete in the source (a scrape interval
    #: for Prometheus; 0 for the metrics API, sampled during the step).
    settle_seconds: float

    def sample(self, pods: Sequence[PodKey], at: datetime) -> None:
        """Take one sample now (the metrics API, which has no history); others do nothing."""
        ...

    def read(
        self, pods: Sequence[PodKey], nodes: Sequence[str], start: datetime, end: datetime
    ) -> UsageReading:
        """Usage of `pods` (and `nodes`) from `start` to `end`."""
        ...
