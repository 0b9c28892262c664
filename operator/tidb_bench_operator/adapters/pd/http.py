"""PD over its HTTP API (urllib): the transport the preflight and the guard use first."""

from __future__ import annotations

import json
import ssl
from collections.abc import Callable
from functools import partial
from typing import Any, Literal, TypeVar

from tidb_bench_operator.adapters.http_get import unreachable_reason, urllib_get
from tidb_bench_operator.adapters.pd.client import (
    EXEC_ADVICE,
    LEADER_PATH,
    OPERATORS_PATH,
    STORES_PATH,
    Transport,
    answer_facts,
    parse_answer,
    status_hint,
)
from tidb_bench_operator.adapters.tls import ssl_cause
from tidb_bench_operator.domain.pd import Operator, Store, parse_operators, parse_stores
from tidb_bench_operator.errors import (
    PDResponseError,
    PDUnreachableError,
)

# ---------------------------------------------------------------------------
# HTTP

T = TypeVar("T")
Kind = Literal["stores", "operators"]


def urllib_transport(
    url: str, timeout: float, context: ssl.SSLContext | None = None
) -> tuple[int, bytes, str]:
    """GET `url` with urllib (adapters.http_get: redirects not followed, the whole answer
    within `timeout`, at most MAX_DOCUMENT_BYTES read): (status, body, content type) for any
    HTTP answer; OSError when there is none.

    `context`: TLS with a client certificate, the server verified (adapters.tls).
    """
    return urllib_get(url, timeout, context=context)


class HTTPPDClient:
    """PD through its HTTP API (GET /pd/api/v1/...), with a timeout on every request."""

    def __init__(
        self,
        url: str,
        timeout: float = 5.0,
        transport: Transport | None = None,
        *,
        tls: ssl.SSLContext | None = None,
        tls_secret: str | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.tls_secret = tls_secret
        self._transport: Transport = transport or partial(urllib_transport, context=tls)

    def describe(self) -> str:
        """'PD HTTP <url>'."""
        return f"PD HTTP {self.url}"

    def get(self, path: str, timeout: float | None = None) -> bytes:
        """The body of a 200 answer to GET `path`; PDUnreachableError or PDResponseError else."""
        return self._get(path, timeout)[0]

    def _get(self, path: str, timeout: float | None = None) -> tuple[bytes, str]:
        """(body, content type) of a 200 answer to GET `path`."""
        url = f"{self.url}{path}"
        limit = self.timeout if timeout is None else timeout
        try:
            status, body, content_type = self._transport(url, limit)
        except OSError as exc:
            reason = unreachable_reason(exc, url, limit, peer="PD", tls_secret=self.tls_secret)
            advice = (
                ""  # PD answered; the certificates disagree, which another way cannot mend
                if ssl_cause(exc) is not None
                else f" Is the PD Service reachable from the controller? If not, {EXEC_ADVICE}"
            )
            raise PDUnreachableError(
                f"PD at {self.url} is unreachable from the controller: {reason} (GET {path})."
                + advice,
                url=url,
                reason=reason,
            ) from None  # the client's own exception may carry what the endpoint sent
        if status != 200:
            facts = answer_facts(body, content_type)
            raise PDResponseError(
                f"PD at {self.url} answered HTTP {status} to GET {path} ({facts}; "
                f"{status_hint(status)})",
                url=url,
                status=status,
                body=facts,
            )
        return body, content_type

    def _read(self, path: str, parse: Callable[[Any], T], kind: Kind) -> T:
        body, content_type = self._get(path)
        return parse_answer(
            self.describe(), parse, body, asked=f"GET {path}", kind=kind, content_type=content_type
        )

    def stores(self) -> list[Store]:
        """GET /pd/api/v1/stores."""
        return self._read(STORES_PATH, parse_stores, "stores")

    def operators(self) -> list[Operator]:
        """GET /pd/api/v1/operators."""
        return self._read(OPERATORS_PATH, parse_operators, "operators")

    def leader(self) -> str | None:
        """GET /pd/api/v1/leader: the leader member's `name` (None when the body has none)."""
        body = self.get(LEADER_PATH)
        try:
            doc = json.loads(body)
        except ValueError:
            return None
        name = doc.get("name") if isinstance(doc, dict) else None
        return name if isinstance(name, str) and name else None
