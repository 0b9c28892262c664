"""What both resources' models share: the API group, phases, check names, patterns, bases."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Literal, get_args

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    StringConstraints,
    WithJsonSchema,
)

from tidb_bench_operator.domain.api.base import CamelModel, TolerantCamelModel

#: The longest time any field of either resource may hold: ten years. Every duration is added
#: to a timestamp as a timedelta (whose limit is 999999999 days) or slept; ten years keeps
#: all of them far inside their limits and is longer than any benchmark means.
MAX_SECONDS = 10 * 365 * 24 * 3600
#: The largest count a spec field may hold where no smaller limit is natural.
MAX_COUNT = 1_000_000
#: The bound of every integer the controller writes into a status (counts, indexes, events):
#: the largest integer every JSON reader keeps exactly.
MAX_STATUS_INT = 2**53 - 1

GROUP = "tidbbench.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"


class RunPhase(StrEnum):
    """Where a BenchmarkRun is in its life (docs/design.md, "A run's life")."""

    PENDING = "Pending"
    PREFLIGHT = "Preflight"
    PREPARING = "Preparing"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"


#: The one set of phases a run never leaves: the reconciler, the schedules, the handlers and
#: the metrics all ask this set whether a run is finished.
TERMINAL_PHASES: frozenset[RunPhase] = frozenset(
    {RunPhase.SUCCEEDED, RunPhase.FAILED, RunPhase.CANCELLED}
)
#: Phases in which a run is measuring (or about to) and so holds its cluster.
ACTIVE_PHASES: frozenset[RunPhase] = frozenset(
    {RunPhase.PREFLIGHT, RunPhase.PREPARING, RunPhase.RUNNING}
)


def is_terminal(phase: object) -> bool:
    """True for a finished run's phase (a plain string from a dict or a RunPhase)."""
    return phase in TERMINAL_PHASES


class StepPhase(StrEnum):
    """Where one step of the sweep is."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


def _require_terminal(phase: RunPhase) -> RunPhase:
    if phase not in TERMINAL_PHASES:
        raise ValueError(f"{phase.value} is not a final phase")
    return phase


#: A finished run's phase as a schema: HistoryEntry.outcome accepts only these.
TerminalPhase = Annotated[
    RunPhase,
    AfterValidator(_require_terminal),
    WithJsonSchema({"type": "string", "enum": [p.value for p in RunPhase if p in TERMINAL_PHASES]}),
]

PreflightCheckName = Literal[
    "bench-node-isolation",
    "topology-spread",
    "store-state",
    "leader-size-balance",
    "region-size-balance",
    "pending-operators",
    "table-leader-distribution",
]
PREFLIGHT_CHECK_NAMES: tuple[str, ...] = get_args(PreflightCheckName)

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
SECRET_KEY = r"^[-._a-zA-Z0-9]+$"
QUANTITY = (
    r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)"
    r"(([KMGTPE]i)|[numkMGTPE]|[eE][+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+))?$"
)

#: A PD URL is a scheme, a host (a DNS name, IPv4 or [IPv6]), an optional port and an optional
#: path prefix: no userinfo, query or fragment, so nothing the controller appends
#: (`/pd/api/v1/...`) can become a query string or a different host.
PD_URL = (
    r"^https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?)(:[0-9]{1,5})?"
    r"(/[-A-Za-z0-9._~%!$&'()*+,;=:]*)*$"
)
MAX_PD_URL = 512


def check_base_url(value: str) -> str:
    """A base URL (PD's, Prometheus's) as PD_URL says, the reason named when it is not."""
    if len(value) > MAX_PD_URL:
        raise ValueError(f"is {len(value)} characters long; at most {MAX_PD_URL}")
    scheme, sep, rest = value.partition("://")
    if not sep or scheme not in ("http", "https"):
        raise ValueError("must start with http:// or https://")
    authority = rest.split("/", 1)[0]
    for char, what in (("@", "userinfo (user@)"), ("?", "a query (?)"), ("#", "a fragment (#)")):
        if char in value:
            raise ValueError(
                f"has {what}; a PD URL is scheme://host[:port][/path prefix] and nothing else"
            )
    port = authority.rsplit("]", 1)[-1].partition(":")[2]
    if port and not (port.isdigit() and 1 <= int(port) <= 65535):
        raise ValueError(f"port {port!r} is outside 1..65535")
    if not re.fullmatch(PD_URL, value):
        raise ValueError(
            "is not scheme://host[:port][/path prefix] (host: a DNS name, an IPv4 address or "
            "[IPv6]; no spaces)"
        )
    return value


StatusInt = Annotated[int, Field(le=MAX_STATUS_INT)]

PdUrl = Annotated[
    str,
    AfterValidator(check_base_url),
    WithJsonSchema({"type": "string", "maxLength": MAX_PD_URL, "pattern": PD_URL}),
]


def _quantity_text(value: object) -> object:
    """Accept `cpu: 2` as well as `cpu: "2"`, as Kubernetes does for quantities."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


Quantity = Annotated[
    str,
    BeforeValidator(_quantity_text),
    StringConstraints(pattern=QUANTITY),
    WithJsonSchema({"x-kubernetes-int-or-string": True, "pattern": QUANTITY}),
]


class SpecModel(CamelModel):
    """Base of user-written models: camelCase on the wire, unknown fields are errors."""


class StatusModel(TolerantCamelModel):
    """Base of controller-written models: camelCase, tolerant of fields from other versions."""
