"""PD over its HTTP API (urllib): the transport the preflight and the guard use first."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from functools import partial
from typing import Any, Literal, TypeVar

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
from tidb_bench_operator.adapters.tls import explain, ssl_cause
from tidb_bench_operator.domain.pd import Operator, Store, parse_operators, parse_stores
from tidb_bench_operator.domain.untrusted import MAX_DOCUMENT_BYTES
from tidb_bench_operator.errors import (
    PDResponseError,
    PDUnreachableError,
)

# ---------------------------------------------------------------------------
# HTTP

T = TypeVar("T")
Kind = Literal["stores", "operators"]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A 3xx is the answer: following it would let a PD URL lead the controller elsewhere."""

    def redirect_request(self, *_args: object, **_kwargs: object) -> None:
        return None


def _read_within(response: Any, deadline: float, limit: int) -> bytes:
    """The body, read in pieces until `deadline` (monotonic): a trickle cannot hold us."""
    parts: list[bytes] = []
    size = 0
    while size <= limit:
        if time.monotonic() > deadline:
            raise TimeoutError("the answer did not end in time")
        piece = response.read1(64 * 1024) if hasattr(response, "read1") else response.read()
        if not piece:
            break
        parts.append(piece)
        size += len(piece)
    return b"".join(parts)


def urllib_transport(
    url: str, timeout: float, context: ssl.SSLContext | None = None
) -> tuple[int, bytes, str]:
    """GET `url` with urllib: (status, body, content type) for any HTTP answer; OSError when
    there is none. Redirects are not followed (a 3xx is returned); the whole answer must
    come within `timeout` seconds (each read also times out).

    `context`: TLS with a client certificate, the server verified (adapters.tls).
    """
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    opener = urllib.request.build_opener(
        urllib.request.HTTPSHandler(context=context), _NoRedirect()
    )
    deadline = time.monotonic() + timeout
    try:
        with opener.open(request, timeout=timeout) as response:
            body = _read_within(response, deadline, MAX_DOCUMENT_BYTES)
            return int(response.status), body, str(response.headers.get("Content-Type") or "")
    except urllib.error.HTTPError as exc:
        # A non-200 is an answer, not a transport failure (PD puts its error text in the
        # body; it is never quoted: the URL may not be PD's).
        try:
            body = _read_within(exc, deadline, MAX_DOCUMENT_BYTES)
            return exc.code, body, str(exc.headers.get("Content-Type") or "")
        finally:
            exc.close()
    except http.client.HTTPException as exc:
        # e.g. plain HTTP against a TLS-only PD: something answered, but not HTTP.
        raise ConnectionError(f"not an HTTP answer ({type(exc).__name__})") from exc


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
    if isinstance(cause, ConnectionError) and str(cause).startswith("not an HTTP answer"):
        return str(cause)
    if isinstance(cause, BaseException):
        return type(cause).__name__  # its text may carry what the endpoint sent
    return "no answer"


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
