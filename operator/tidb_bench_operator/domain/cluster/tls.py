"""TLS to a secured TiDB cluster: which client Secrets a run uses, and what its failures mean.

TiDB Operator (v1 and v2) keeps client certificates in Secrets with the keys `ca.crt`,
`tls.crt` and `tls.key`; the cluster object says whether TLS is on (`ClusterTls`, read by
domain/cluster_readers.py). A run uses the operator's Secrets by default and the ones
`spec.tls` names otherwise. Secrets are read from the run's namespace: that is where its
benchmark pods run, and a pod can mount only Secrets of its own namespace. docs/tls.md has
the sources and the whole picture.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec, TlsSide
from tidb_bench_operator.domain.cluster.view import ClusterView
from tidb_bench_operator.errors import SpecError

#: The keys of a TLS Secret as TiDB Operator and cert-manager write them.
TLS_KEYS = ("ca.crt", "tls.crt", "tls.key")
#: sysbench 1.0.20's `--mysql-ssl=on` reads these fixed names from its working directory
#: (https://github.com/akopytov/sysbench/blob/1.0.20/src/drivers/mysql/drv_mysql.c).
SYSBENCH_FILES = (
    ("ca.crt", "cacert.pem"),
    ("tls.crt", "client-cert.pem"),
    ("tls.key", "client-key.pem"),
)

#: Where a benchmark pod finds the MySQL client certificate Secret (read-only); the runner
#: copies it into its private temporary directory for sysbench.
MYSQL_TLS_DIR = "/var/run/secrets/tidb-bench/mysql-tls"
MYSQL_TLS_VOLUME = "mysql-tls"

_SIDES = {
    "cluster": "PD's client certificate (TLS between components)",
    "mysql": "the MySQL client certificate (TLS to TiDB)",
}


@dataclass(frozen=True)
class TlsSecrets:
    """The client certificate Secrets a run uses; None where that connection is plain."""

    pd: str | None = None
    mysql: str | None = None
    #: PD's CA Secret when the cluster keeps it apart from `pd` (TiDB Operator v2.1).
    pd_ca: str | None = None
    #: Differences between the cluster object and the spec worth telling the user.
    notes: tuple[str, ...] = ()


def _side(
    name: str, side: TlsSide, detected: bool, default_secret: str, view: ClusterView | None
) -> tuple[str | None, str | None]:
    """(Secret name or None, a note) for one side."""
    enabled = side.enabled if side.enabled is not None else detected
    note = None
    if view is not None and side.enabled is False and detected:
        note = (
            f"{view.where} turns TLS on ({name}) but spec.tls.{name}.enabled is false: "
            "connections will be plain and a server that requires TLS refuses them"
        )
    if not enabled:
        return None, note
    if side.secret_ref is not None:
        return side.secret_ref.name, note
    if view is None or not default_secret:
        raise SpecError(
            f"tls.{name}.secretRef",
            f"TLS is on for {_SIDES[name]} but no Secret is named, and without spec.cluster "
            "there is no TiDB Operator Secret to default to",
            f"set spec.tls.{name}.secretRef.name to a Secret with keys {', '.join(TLS_KEYS)}",
        )
    return default_secret, note


def resolve_tls(spec: BenchmarkRunSpec, view: ClusterView | None) -> TlsSecrets:
    """The Secrets for PD and MySQL TLS: the spec's, else the cluster's TiDB Operator names.

    Raises SpecError when TLS is on and no Secret can be named (a `target`-only run).
    """
    tls = view.tls if view is not None else None
    pd, pd_note = _side(
        "cluster",
        spec.tls.cluster,
        bool(tls and tls.cluster),
        tls.cluster_client_secret if tls else "",
        view,
    )
    mysql, mysql_note = _side(
        "mysql",
        spec.tls.mysql,
        bool(tls and tls.mysql),
        tls.mysql_client_secret if tls else "",
        view,
    )
    notes = tuple(n for n in (pd_note, mysql_note) if n)
    # The cluster's own CA Secret goes with the cluster's cert/key pair only: a Secret the
    # spec names is a whole client Secret.
    pd_ca = None
    if pd is not None and tls is not None and spec.tls.cluster.secret_ref is None:
        pd_ca = tls.cluster_ca_secret or None
    return TlsSecrets(pd=pd, mysql=mysql, pd_ca=pd_ca, notes=notes)


def pd_url_with_tls(url: str | None, tls: bool) -> str | None:
    """PD's URL as TLS needs it: `https://` when the client certificate is used."""
    if url is not None and tls and url.startswith("http://"):
        return "https://" + url.removeprefix("http://")
    return url


def secret_field(side: str, spec: BenchmarkRunSpec) -> str:
    """The spec field a Secret problem points at, saying when the name is TiDB Operator's."""
    ref = spec.tls.cluster.secret_ref if side == "cluster" else spec.tls.mysql.secret_ref
    field = f"spec.tls.{side}.secretRef.name"
    return field if ref is not None else f"{field} (unset: TiDB Operator's name)"


def _create_line(namespace: str, name: str) -> str:
    files = " ".join(f"--from-file={k}=<{k}>" for k in TLS_KEYS)
    return f"kubectl -n {namespace} create secret generic {name} {files}"


def secret_not_found(
    side: str, spec: BenchmarkRunSpec, namespace: str, name: str, cluster_namespace: str
) -> str:
    """The message for a TLS Secret that does not exist in the run's namespace."""
    where = ""
    if cluster_namespace != namespace:
        where = (
            f"; the cluster is in namespace {cluster_namespace!r}, but benchmark pods can "
            f"mount only Secrets of their own namespace: copy it into {namespace!r}"
        )
    return (
        f"{secret_field(side, spec)}: Secret {name!r} with {_SIDES[side]} not found in "
        f"namespace {namespace!r}{where}; create it from the client certificate, its key "
        f"and the CA: {_create_line(namespace, name)}"
    )


def secret_keys_missing(
    side: str, spec: BenchmarkRunSpec, namespace: str, name: str, keys: set[str]
) -> str | None:
    """The message for a TLS Secret lacking a key, or None when it has all three."""
    missing = [k for k in TLS_KEYS if k not in keys]
    if not missing:
        return None
    return (
        f"{secret_field(side, spec)}: Secret {namespace}/{name} has no key "
        f"{', '.join(repr(k) for k in missing)} (it has: {', '.join(sorted(keys)) or 'no keys'}); "
        f"a TLS client Secret holds {', '.join(TLS_KEYS)}: recreate it with "
        f"{_create_line(namespace, name)}"
    )


# ---------------------------------------------------------------------------
# What a failed handshake means. OpenSSL names the failure: for our own verification of the
# server in `verify_message` (X509_verify_cert_error_string), for the server's refusal of our
# certificate in the alert it sent (`reason`, e.g. TLSV1_ALERT_UNKNOWN_CA).

_ALERTS = {
    "UNKNOWN_CA": "the server does not trust the CA that signed our client certificate",
    "CERTIFICATE_EXPIRED": "the server says our client certificate has expired",
    "BAD_CERTIFICATE": "the server rejected our client certificate",
    "CERTIFICATE_REQUIRED": "the server requires a client certificate and got none",
    "HANDSHAKE_FAILURE": "the server ended the handshake (no common protocol or cipher, or "
    "no client certificate)",
}


def describe_tls_failure(
    *, peer: str, source: str | None, reason: str | None, verify_message: str | None
) -> str:
    """One sentence for a TLS failure talking to `peer` with the certificate from `source`.

    `source` says where the certificate came from: `Secret ns/name`, a mounted directory.
    """
    source = source or "the client Secret"
    if verify_message:
        return (
            f"TLS to {peer}: the server's certificate failed verification against ca.crt of "
            f"{source}: {verify_message} (is ca.crt the CA that signed the server's "
            "certificate, and is that certificate valid for this host and not expired?)"
        )
    upper = (reason or "").upper()
    for key, meaning in _ALERTS.items():
        if key in upper:
            return (
                f"TLS to {peer}: {meaning} ({reason}); check tls.crt of {source}: it must be "
                "signed by the CA the server trusts and be within its validity"
            )
    if "EOF" in upper:
        # TLS 1.3: the client's handshake is done before the server judges its certificate,
        # so a refusal may reach the client only as the connection closing.
        return (
            f"TLS to {peer}: the server closed the connection during the handshake ({reason}), "
            "most often because it refused our client certificate (not signed by a CA it "
            f"trusts, or expired); check tls.crt of {source}"
        )
    if "KEY_VALUES_MISMATCH" in upper:
        return (
            f"{source}: tls.key is not the key of tls.crt ({reason}); put the matching pair in it"
        )
    return f"TLS to {peer} failed ({reason or 'no reason given'}) using {source}"


#: MySQL and TiDB: ER_SECURE_TRANSPORT_REQUIRED (3159); MariaDB has its own number (4036).
SECURE_TRANSPORT_ERRNOS = (3159, 4036)


_USE_TLS = (
    "set spec.tls.mysql.enabled: true (and spec.tls.mysql.secretRef when the cluster does "
    "not name the Secret), or turn on the cluster's MySQL TLS (TidbCluster "
    "spec.tidb.tlsClient.enabled, TiDBGroup spec.template.spec.security.tls.mysql)"
)
#: Access denied: a wrong password, or an account that requires a client certificate.
ACCESS_DENIED = 1045


def plain_refused_hint(errno: int | None, text: str, tls_used: bool) -> str | None:
    """What to do when the server refused a connection made without a client certificate."""
    if tls_used:
        return None
    if errno in SECURE_TRANSPORT_ERRNOS or "insecure transport" in text.lower():
        return f"the server requires TLS but this run connects without it: {_USE_TLS}"
    if errno == ACCESS_DENIED:
        return (
            "check the password; if the account requires a client certificate (REQUIRE X509 "
            f"or SSL), the run needs TLS: {_USE_TLS}"
        )
    return None


# ---------------------------------------------------------------------------
# pd-ctl in a PD pod with TLS: the certificate files are the pod's own mounted Secrets.
# TiDB Operator mounts the PD server Secret at /var/lib/pd-tls (v1 and v2) and, with v1's
# `spec.pd.mountClusterClientSecret: true`, the cluster client Secret at
# /var/lib/cluster-client-tls; either holds ca.crt, tls.crt and tls.key (docs/tls.md).
PD_SERVER_TLS_DIR = "/var/lib/pd-tls"


def pd_tls_dir(pod: Mapping[str, Any], client_secret: str | None, container: str) -> str | None:
    """Where the PD pod's container mounts a TLS Secret pd-ctl can use, or None.

    The cluster client Secret wins when mounted; else the PD server Secret (PD presents that
    certificate as a client to the other PD members, so it serves pd-ctl as well).
    """
    raw = pod.get("spec")
    spec: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    secrets: dict[str, str] = {}
    for vol in spec.get("volumes") or []:
        secret = vol.get("secret") if isinstance(vol, Mapping) else None
        if isinstance(secret, Mapping) and secret.get("secretName"):
            secrets[str(vol.get("name"))] = str(secret["secretName"])
    mounts: list[tuple[str, str]] = []  # (secret name, mount path)
    for c in spec.get("containers") or []:
        if not isinstance(c, Mapping) or c.get("name") != container:
            continue
        for m in c.get("volumeMounts") or []:
            if isinstance(m, Mapping) and str(m.get("name")) in secrets:
                mounts.append((secrets[str(m["name"])], str(m.get("mountPath") or "")))
    for secret, path in mounts:
        if client_secret and secret == client_secret:
            return path
    for _secret, path in mounts:
        if path.rstrip("/") == PD_SERVER_TLS_DIR:
            return path
    return None


def pd_ctl_tls_flags(directory: str) -> list[str]:
    """pd-ctl's --cacert/--cert/--key for a mounted TLS Secret (paths, never contents)."""
    d = directory.rstrip("/")
    return [f"--cacert={d}/ca.crt", f"--cert={d}/tls.crt", f"--key={d}/tls.key"]


# ---------------------------------------------------------------------------
# Benchmark pods


def mount_mysql_tls(pod_spec: dict[str, Any], secret: str, group: int) -> None:
    """Mount the MySQL client Secret read-only, its files readable by `group` only."""
    pod_spec["securityContext"]["fsGroup"] = group
    pod_spec["volumes"].append(
        {"name": MYSQL_TLS_VOLUME, "secret": {"secretName": secret, "defaultMode": 0o440}}
    )
    pod_spec["containers"][0]["volumeMounts"].append(
        {"name": MYSQL_TLS_VOLUME, "mountPath": MYSQL_TLS_DIR, "readOnly": True}
    )


def tls_runner_args(mysql_secret: str | None) -> list[str]:
    """`--tls-dir` when the clients use TLS: a path, never certificate contents."""
    return [f"--tls-dir={MYSQL_TLS_DIR}"] if mysql_secret else []
