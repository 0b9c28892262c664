"""PD over its HTTP API (urllib): the transport the preflight and the guard use first."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from functools import partial

from tidb_bench_operator.adapters.pd.client import (
    EXEC_ADVICE,
    LEADER_PATH,
    OPERATORS_PATH,
    STORES_PATH,
    Transport,
    parse_answer,
    pd_message,
    status_hint,
)
from tidb_bench_operator.adapters.tls import explain, ssl_cause
from tidb_bench_operator.domain.pd import Operator, Store, parse_operators, parse_stores
from tidb_bench_operator.errors import (
    PDResponseError,
    PDUnreachableError,
)

# ---------------------------------------------------------------------------
# HTTP


def urllib_transport(
    url: str, timeout: float, context: ssl.SSLContext | None = None
) -> tuple[int, bytes]:
    """GET `url` with urllib: (status, body) for any HTTP answer; OSError when there is none.

    `context`: TLS with a client certificate, the server verified (adapters.tls).
    """
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            return int(response.status), bytes(response.read())
    except urllib.error.HTTPError as exc:
        # A non-200 is an answer, not a transport failure: PD puts its error text in the
        # body as a JSON string (e.g. GetStore in https://github.com/tikv/pd/blob/v8.1.1/server/api/store.go).
        try:
            return exc.code, bytes(exc.read())
        finally:
            exc.close()
    except http.client.HTTPException as exc:
        # e.g. plain HTTP against a TLS-only PD: something answered, but not HTTP.
        raise ConnectionError(f"not an HTTP answer ({type(exc).__name__}: {exc})") from exc


def _unreachable_reason(
    exc: BaseException, url: str, timeout: float, tls_secret: str | None = None
) -> str:
    """A short, specific description of why no HTTP answer came."""
    cause: object = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or url
    source = f"Secret {tls_secret}" if tls_secret else None
    tls_problem = explain(exc, peer=f"PD {parts.netloc}", source=source)
    if tls_problem is not None:
        return tls_problem
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused (nothing listens on that host and port)"
    if isinstance(cause, TimeoutError):
        return f"no answer within {timeout:g} s (timed out)"
    if isinstance(cause, socket.gaierror):
        return f"cannot resolve host {host!r} ({cause.strerror or cause})"
    if isinstance(cause, ssl.SSLError):
        return f"TLS handshake failed ({cause})"
    if isinstance(cause, BaseException):
        return f"{type(cause).__name__}: {cause}"
    return str(cause)


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
        url = f"{self.url}{path}"
        limit = self.timeout if timeout is None else timeout
        try:
            status, body = self._transport(url, limit)
        except OSError as exc:
            reason = _unreachable_reason(exc, url, limit, self.tls_secret)
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
            ) from exc
        if status != 200:
            message = pd_message(body)
            raise PDResponseError(
                f"PD at {self.url} answered {status} to GET {path}: {message} "
                f"({status_hint(status)})",
                url=url,
                status=status,
                body=message,
            )
        return body

    def stores(self) -> list[Store]:
        """GET /pd/api/v1/stores."""
        return parse_answer(self.describe(), parse_stores, self.get(STORES_PATH))

    def operators(self) -> list[Operator]:
        """GET /pd/api/v1/operators."""
        return parse_answer(self.describe(), parse_operators, self.get(OPERATORS_PATH))

    def leader(self) -> str | None:
        """GET /pd/api/v1/leader: the leader member's `name` (None when the body has none)."""
        body = self.get(LEADER_PATH)
        try:
            doc = json.loads(body)
        except ValueError:
            return None
        name = doc.get("name") if isinstance(doc, dict) else None
        return name if isinstance(name, str) and name else None
