"""TLS client contexts from a client certificate Secret, and what a failed handshake means.

The context verifies the server against the Secret's `ca.crt` (certificate chain and host
name) and presents `tls.crt`/`tls.key` for mutual TLS. Python's ssl module loads a key only
from a file, so the certificate and key are written to a private temporary directory (mode
0700, files 0600) just long enough to load them, and removed at once; the context keeps
them in memory. Nothing here logs or stores the contents.
"""

from __future__ import annotations

import os
import ssl
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from tidb_bench_operator.domain.cluster.tls import SYSBENCH_FILES, TLS_KEYS, describe_tls_failure
from tidb_bench_operator.errors import TLSConfigError

SecretValue = Callable[[str, str, str], str | None]
"""Reads one Secret value (namespace, name, key), like adapters.k8s.Kube.secret_value."""


def _write_private(directory: str, name: str, text: str) -> str:
    path = Path(directory) / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, stat.S_IRUSR | stat.S_IWUSR)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return str(path)


def client_context(ca: str, cert: str, key: str, *, where: str) -> ssl.SSLContext:
    """A client SSLContext trusting only `ca`, presenting `cert` with `key` (PEM texts)."""
    try:
        ctx = ssl.create_default_context(cadata=ca)
    except (ssl.SSLError, ValueError) as exc:
        raise TLSConfigError(f"{where}: ca.crt is not a PEM CA certificate ({exc})") from exc
    with tempfile.TemporaryDirectory(prefix="tidb-bench-tls-") as tmp:
        certfile = _write_private(tmp, "tls.crt", cert)
        keyfile = _write_private(tmp, "tls.key", key)
        try:
            ctx.load_cert_chain(certfile, keyfile)
        except ssl.SSLError as exc:
            reason = exc.reason or str(exc)
            if "KEY_VALUES_MISMATCH" in str(reason).upper():
                message = describe_tls_failure(
                    peer="", source=where, reason=str(reason), verify_message=None
                )
            else:
                message = f"{where}: tls.crt or tls.key is not a PEM certificate and key ({reason})"
            raise TLSConfigError(message) from exc
    return ctx


def context_from_secret(
    read: SecretValue, namespace: str, name: str, ca_secret: str | None = None
) -> ssl.SSLContext:
    """The client context of Secret namespace/name (keys ca.crt, tls.crt, tls.key).

    With `ca_secret` (TiDB Operator v2.1 keeps the CA apart), ca.crt is read from that one.
    """
    values = {k: read(namespace, ca_secret if k == "ca.crt" and ca_secret else name, k)
              for k in TLS_KEYS}  # fmt: skip
    missing = [k for k, v in values.items() if not v]
    if missing:
        where = f" (ca.crt from Secret {namespace}/{ca_secret})" if ca_secret else ""
        raise TLSConfigError(
            f"Secret {namespace}/{name}{where} has no {', '.join(missing)}; a TLS client "
            f"Secret holds {', '.join(TLS_KEYS)}"
        )
    ca, cert, key = (str(values[k]) for k in TLS_KEYS)
    return client_context(ca, cert, key, where=f"Secret {namespace}/{name}")


def context_from_dir(directory: str) -> ssl.SSLContext:
    """The client context of a mounted Secret (a directory holding ca.crt, tls.crt, tls.key)."""
    texts = {}
    for key in TLS_KEYS:
        try:
            texts[key] = (Path(directory) / key).read_text()
        except OSError as exc:
            raise TLSConfigError(
                f"{directory}/{key}: cannot read the mounted TLS Secret ({exc.strerror}); the "
                f"Secret must hold {', '.join(TLS_KEYS)}"
            ) from exc
    return client_context(
        texts["ca.crt"], texts["tls.crt"], texts["tls.key"], where=f"the Secret in {directory}"
    )


def ssl_cause(exc: BaseException | None) -> ssl.SSLError | None:
    """The ssl.SSLError behind `exc` (its cause, context, `reason` or `original_exception`)."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, ssl.SSLError):
            return exc
        nxt = getattr(exc, "original_exception", None) or getattr(exc, "reason", None)
        if not isinstance(nxt, BaseException):
            nxt = exc.__cause__ or exc.__context__
        exc = nxt
        seen += 1
    return None


def explain(exc: BaseException, *, peer: str, source: str | None) -> str | None:
    """A sentence naming the TLS failure behind `exc`, or None when TLS is not the cause."""
    cause = ssl_cause(exc)
    if cause is None:
        return None
    verify = cause.verify_message if isinstance(cause, ssl.SSLCertVerificationError) else None
    reason = cause.reason or str(cause)
    return describe_tls_failure(
        peer=peer, source=source, reason=str(reason), verify_message=verify or None
    )


def sysbench_tls_files(tls_dir: str, directory: str) -> None:
    """Copy the mounted Secret to the names sysbench 1.0.20 reads from its working directory.

    The Secret's mount is read-only and its names are TiDB Operator's (ca.crt, tls.crt,
    tls.key); `--mysql-ssl=on` opens cacert.pem, client-cert.pem and client-key.pem in the
    current directory. The copies live in the runner's private temporary directory (0700,
    files 0600) and go with it.
    """
    for key, name in SYSBENCH_FILES:
        try:
            data = (Path(tls_dir) / key).read_bytes()
        except OSError as exc:
            raise TLSConfigError(
                f"{tls_dir}/{key}: cannot read the mounted MySQL TLS Secret ({exc.strerror}); "
                "it must hold ca.crt, tls.crt and tls.key"
            ) from exc
        fd = os.open(Path(directory) / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
