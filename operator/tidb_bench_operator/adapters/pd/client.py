"""What every PD transport shares: the API paths, the PDClient interface, reading PD's answers."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol, TypeVar

from tidb_bench_operator.domain.pd import Operator, Store
from tidb_bench_operator.errors import (
    ParseError,
    PDError,
)

API = "/pd/api/v1"
STORES_PATH = f"{API}/stores"
OPERATORS_PATH = f"{API}/operators"
LEADER_PATH = f"{API}/leader"
HEALTH_PATH = f"{API}/health"

# In a TiDB Operator PD pod the binary is /pd-ctl and PD listens on 127.0.0.1:2379, which is
# also pd-ctl's default -u; we pass it explicitly so a PD_ADDR in the pod's env cannot
# redirect us (https://github.com/tikv/pd/blob/v8.1.1/tools/pd-ctl/pdctl/ctl.go).
PD_CTL = "/pd-ctl"
LOCAL_PD_URL = "http://127.0.0.1:2379"
LOCAL_PD_TLS_URL = "https://127.0.0.1:2379"
PD_CONTAINER = "pd"

TransportMode = Literal["Auto", "HTTP", "Exec"]
Transport = Callable[[str, float], tuple[int, bytes]]
"""GET a URL within a timeout: (status, body) for any HTTP answer; OSError when none came."""
ExecFn = Callable[[str, str, str, Sequence[str], float], str]
"""Run argv in (namespace, pod, container) within a timeout; return stdout then stderr."""

EXEC_ADVICE = "set spec.preflight.pdTransport: Exec to go through the PD pod"
T = TypeVar("T")


# ---------------------------------------------------------------------------
# The interface


class PDClient(Protocol):
    """What the preflight gate needs from PD, modelled on TiDB Operator's pkg/pdapi."""

    def stores(self) -> list[Store]:
        """Up and Offline stores (TiKV and TiFlash; Tombstone hidden, as PD does by default)."""
        ...

    def operators(self) -> list[Operator]:
        """The operators PD holds right now (GET /operators, pd-ctl `operator show`)."""
        ...

    def describe(self) -> str:
        """Where PD is read from, for messages: 'PD HTTP http://…' or 'pd-ctl in pod ns/name'."""
        ...


def pd_message(body: bytes) -> str:
    """PD's error text: handlers answer a JSON string (see above); anything else is excerpted."""
    text = body.decode("utf-8", errors="replace").strip()
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, str):
        return value
    flat = " ".join(text.split())
    return flat if len(flat) <= 200 else flat[:197] + "..."


def status_hint(status: int) -> str:
    if status == 404:
        return "is this a PD address? PD serves its API under /pd/api/v1"
    if status >= 500:
        return "PD is unhealthy (e.g. no leader elected): check the PD pods' logs"
    return "check the PD address and version"


def parse_answer(where: str, parse: Callable[[Any], T], body: str | bytes) -> T:
    """Run a domain parser, naming the source in its error."""
    try:
        return parse(body)
    except PDError as exc:
        raise PDError(f"{where}: {exc}") from exc
    except ParseError as exc:
        raise ParseError(f"{where}: {exc}") from exc
