"""One bounded GET over urllib, for the HTTP APIs the controller reads (PD, Prometheus).

The trust rules of every such read (docs/trust.md): a 3xx is the answer (never followed), the
whole answer must come within the timeout, the body is read up to a size cap, and no text of
the answer or of the client's exception reaches a message (`unreachable_reason`).
"""

from __future__ import annotations

import http.client
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from tidb_bench_operator.adapters.tls import explain
from tidb_bench_operator.domain.untrusted import MAX_DOCUMENT_BYTES


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A 3xx is the answer: following it would let a URL lead the controller elsewhere."""

    def redirect_request(self, *_args: object, **_kwargs: object) -> None:
        return None


def _read_within(response: Any, deadline: float, limit: int) -> bytes:
    """The body, read in pieces until `deadline` (monotonic): a trickle cannot hold us.

    More than `limit` bytes: reading stops there, and the caller sees a body over `limit`.
    """
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


def urllib_get(
    url: str,
    timeout: float,
    *,
    context: ssl.SSLContext | None = None,
    headers: Mapping[str, str] | None = None,
    limit: int = MAX_DOCUMENT_BYTES,
) -> tuple[int, bytes, str]:
    """GET `url`: (status, body, content type) for any HTTP answer; OSError when there is
    none. Redirects are not followed (a 3xx is returned); the whole answer must come within
    `timeout` seconds (each read also times out); a body over `limit` bytes is cut just past
    it (so the caller can tell it was too big).

    `context`: TLS, the server verified (adapters.tls); `headers`: e.g. a bearer token.
    """
    request = urllib.request.Request(url, headers={"Accept": "application/json", **(headers or {})})
    opener = urllib.request.build_opener(
        urllib.request.HTTPSHandler(context=context), _NoRedirect()
    )
    deadline = time.monotonic() + timeout
    try:
        with opener.open(request, timeout=timeout) as response:
            body = _read_within(response, deadline, limit)
            return int(response.status), body, str(response.headers.get("Content-Type") or "")
    except urllib.error.HTTPError as exc:
        # A non-200 is an answer, not a transport failure (the server may put its error text
        # in the body; it is never quoted: the URL may not be what it claims).
        try:
            body = _read_within(exc, deadline, limit)
            return exc.code, body, str(exc.headers.get("Content-Type") or "")
        finally:
            exc.close()
    except http.client.HTTPException as exc:
        # e.g. plain HTTP against a TLS-only server: something answered, but not HTTP.
        raise ConnectionError(f"not an HTTP answer ({type(exc).__name__})") from exc


def unreachable_reason(
    exc: BaseException, url: str, timeout: float, *, peer: str, tls_secret: str | None = None
) -> str:
    """A short, specific description of why no HTTP answer came from `peer` (e.g. "PD")."""
    cause: object = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or url
    source = f"Secret {tls_secret}" if tls_secret else None
    tls_problem = explain(exc, peer=f"{peer} {parts.netloc}", source=source)
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
