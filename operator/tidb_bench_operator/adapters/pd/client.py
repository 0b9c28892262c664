"""What every PD transport shares: the API paths, the PDClient interface, reading PD's answers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol, TypeVar

from tidb_bench_operator.domain.pd import Operator, Store, answer_mismatch
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
Transport = Callable[[str, float], tuple[int, bytes, str]]
"""GET a URL within a timeout: (status, body, content type) for any HTTP answer (redirects
not followed); OSError when none came."""
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


def answer_facts(body: bytes | str, content_type: str | None = None) -> str:
    """What may be said of an answer from an endpoint a run's author chose: its content type
    and size, never its text (a PD URL may lead anywhere the controller can reach)."""
    size = len(body.encode() if isinstance(body, str) else body)
    kind = content_type.split(";", 1)[0].strip()[:60] if content_type else ""
    shown = kind if kind and all(c.isalnum() or c in "/.+-" for c in kind) else "no content type"
    return f"{shown}, {size} bytes, not quoted"


def status_hint(status: int) -> str:
    if 300 <= status < 400:
        return "a redirect, which is not followed: set spec.target.pdURL to PD itself"
    if status == 404:
        return "is this a PD address? PD serves its API under /pd/api/v1"
    if status >= 500:
        return "PD is unhealthy (e.g. no leader elected): check the PD pods' logs"
    return "check the PD address and version"


def parse_answer(
    where: str,
    parse: Callable[[Any], T],
    body: str | bytes,
    *,
    asked: str,
    kind: Literal["stores", "operators"],
    content_type: str | None = None,
) -> T:
    """Run a domain parser; its error names the source, what was asked and what the answer
    lacks (domain.pd.answer_mismatch), never the answer's text."""
    try:
        return parse(body)
    except (PDError, ParseError) as exc:
        facts = answer_facts(body, content_type)
        raise type(exc)(
            f"{where}: {asked} answered ({facts}), which is not PD's {kind}: "
            f"{answer_mismatch(body, kind)}"
        ) from None  # the parser's own message quotes the answer: not even in a traceback
