"""TLS adapters against a FakePD serving mutual TLS: HTTP, pd-ctl, bad Secrets, sysbench files."""

from __future__ import annotations

import ssl
import stat
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from testbed.certs import CA, Pem
from testbed.fake_pd import FakePD
from tidb_bench_operator.adapters.pd import (
    LOCAL_PD_TLS_URL,
    ExecPDClient,
    HTTPPDClient,
    UnavailablePDClient,
    make_pd_client,
)
from tidb_bench_operator.adapters.tls import (
    client_context,
    context_from_dir,
    context_from_secret,
    sysbench_tls_files,
)
from tidb_bench_operator.domain.manifests import Endpoint
from tidb_bench_operator.errors import PDUnreachableError, TLSConfigError

EMULATOR = Path(__file__).resolve().parents[2] / "testbed" / "pd_ctl_emulator.py"


@pytest.fixture(scope="module")
def ca() -> CA:
    return CA("unit CA")


@pytest.fixture(scope="module")
def client(ca: CA) -> Pem:
    return ca.issue("tidb-bench")


@pytest.fixture(scope="module")
def tls_pd(ca: CA, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakePD]:
    server = ca.issue("pd", server=True)
    d = tmp_path_factory.mktemp("pd")
    (d / "c").write_text(server.cert)
    (d / "k").write_text(server.key)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cadata=ca.pem)
    ctx.load_cert_chain(d / "c", d / "k")
    ctx.verify_mode = ssl.CERT_REQUIRED
    with FakePD().start(tls=ctx) as pd:
        yield pd


def secret_dir(tmp: Path, ca: CA, cert: Pem) -> Path:
    for name, text in (("ca.crt", ca.pem), ("tls.crt", cert.cert), ("tls.key", cert.key)):
        (tmp / name).write_text(text)
    return tmp


def test_http_pd_client_reads_stores_over_mutual_tls(tls_pd: FakePD, ca: CA, client: Pem) -> None:
    ctx = client_context(ca.pem, client.cert, client.key, where="Secret ns/c")
    pd = HTTPPDClient(tls_pd.url, tls=ctx, tls_secret="ns/c")
    assert len(pd.stores()) == 4


def test_a_client_certificate_of_another_ca_is_refused_and_the_error_names_the_alert(
    tls_pd: FakePD, ca: CA
) -> None:
    foreign = CA("other").issue("tidb-bench")
    ctx = client_context(ca.pem, foreign.cert, foreign.key, where="Secret ns/c")
    with pytest.raises(PDUnreachableError) as err:
        HTTPPDClient(tls_pd.url, tls=ctx, tls_secret="ns/c").stores()
    text = str(err.value)
    assert "the server does not trust the CA that signed our client certificate" in text
    assert "TLSV1_ALERT_UNKNOWN_CA" in text and "Secret ns/c" in text
    assert "pdTransport" not in text  # another transport would not mend certificates


def test_a_server_signed_by_another_ca_fails_our_verification(tls_pd: FakePD, client: Pem) -> None:
    other = CA("other")
    ctx = client_context(other.pem, client.cert, client.key, where="Secret ns/c")
    with pytest.raises(PDUnreachableError) as err:
        HTTPPDClient(tls_pd.url, tls=ctx, tls_secret="ns/c").stores()
    assert "the server's certificate failed verification against ca.crt of Secret ns/c" in str(
        err.value
    )
    assert "self-signed certificate in certificate chain" in str(err.value)


def test_an_expired_client_certificate_is_named(tls_pd: FakePD, ca: CA) -> None:
    old = ca.issue("tidb-bench", valid_days=-1, starts_days_ago=10)
    ctx = client_context(ca.pem, old.cert, old.key, where="Secret ns/c")
    with pytest.raises(PDUnreachableError, match="our client certificate has expired"):
        HTTPPDClient(tls_pd.url, tls=ctx, tls_secret="ns/c").stores()


def test_a_key_that_is_not_the_certificates_is_a_config_error(ca: CA, client: Pem) -> None:
    other = ca.issue("x")
    with pytest.raises(TLSConfigError, match=r"^Secret ns/c: tls.key is not the key of tls.crt"):
        client_context(ca.pem, client.cert, other.key, where="Secret ns/c")


def test_a_secret_missing_a_key_is_named(ca: CA, client: Pem) -> None:
    values = {"ca.crt": ca.pem, "tls.crt": client.cert}

    def read(ns: str, name: str, key: str) -> str | None:
        return values.get(key)

    with pytest.raises(TLSConfigError, match=r"^Secret ns/c has no tls.key; a TLS client Secret"):
        context_from_secret(read, "ns", "c")


def test_a_mounted_secret_directory_without_a_file_is_named(
    tmp_path: Path, ca: CA, client: Pem
) -> None:
    d = secret_dir(tmp_path, ca, client)
    context_from_dir(str(d))
    (d / "tls.key").unlink()
    with pytest.raises(TLSConfigError, match=r"tls.key: cannot read the mounted TLS Secret"):
        context_from_dir(str(d))


def test_sysbench_gets_the_secret_under_its_fixed_names_private(
    tmp_path: Path, ca: CA, client: Pem
) -> None:
    (tmp_path / "secret").mkdir()
    src = secret_dir(tmp_path / "secret", ca, client)
    work = tmp_path / "work"
    work.mkdir()
    sysbench_tls_files(str(src), str(work))
    assert (work / "cacert.pem").read_text() == ca.pem
    assert (work / "client-cert.pem").read_text() == client.cert
    assert (work / "client-key.pem").read_text() == client.key
    for f in work.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600


# ---------------------------------------------------------------------- pd-ctl with TLS


def emulator_in_pod(pd_url: str, log: list[list[str]]) -> Any:
    """pd-ctl (the emulator) as if exec'd in a PD pod whose 127.0.0.1:2379 is `pd_url`."""

    def run(namespace: str, pod: str, container: str, argv: Sequence[str], timeout: float) -> str:
        log.append(list(argv))
        done = subprocess.run(
            [sys.executable, str(EMULATOR), "--pd-url-override", pd_url, *argv[1:]],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
        return done.stdout + done.stderr

    return run


def test_pd_ctl_runs_with_the_pods_mounted_certificates_over_https(
    tmp_path: Path, tls_pd: FakePD, ca: CA, client: Pem
) -> None:
    d = secret_dir(tmp_path, ca, client)
    log: list[list[str]] = []
    pd = ExecPDClient(
        None, "ns", "basic-pd-0", exec_fn=emulator_in_pod(tls_pd.url, log), tls_dir=str(d)
    )
    assert len(pd.stores()) == 4
    assert log[0] == [
        "/pd-ctl", "-u", LOCAL_PD_TLS_URL, f"--cacert={d}/ca.crt", f"--cert={d}/tls.crt",
        f"--key={d}/tls.key", "store",
    ]  # fmt: skip


def test_pd_ctl_with_a_foreign_certificate_reports_a_tls_failure(
    tmp_path: Path, tls_pd: FakePD, ca: CA
) -> None:
    d = secret_dir(tmp_path, ca, CA("other").issue("x"))
    pd = ExecPDClient(
        None, "ns", "basic-pd-0", exec_fn=emulator_in_pod(tls_pd.url, []), tls_dir=str(d)
    )
    with pytest.raises(PDUnreachableError, match="failed the TLS handshake with PD at https://"):
        pd.stores()


class PdPods:
    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self._pods = pods

    def pods(self, namespace: str | None, selector: str) -> list[dict[str, Any]]:
        return self._pods


def running_pd(volumes: list[dict[str, Any]], mounts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": "basic-pd-0", "namespace": "ns"},
        "spec": {"volumes": volumes, "containers": [{"name": "pd", "volumeMounts": mounts}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def test_exec_transport_finds_the_pd_pods_tls_mount_or_says_there_is_none() -> None:
    ep = Endpoint("t", 4000, "https://basic-pd.ns:2379", "basic", "ns", pd_tls_secret="c")
    mounted = running_pd(
        [{"name": "pd-tls", "secret": {"secretName": "basic-pd-cluster-secret"}}],
        [{"name": "pd-tls", "mountPath": "/var/lib/pd-tls"}],
    )
    pd = make_pd_client("Exec", ep, PdPods([mounted]), None, exec_fn=lambda *a: "")
    assert isinstance(pd, ExecPDClient) and pd.tls_dir == "/var/lib/pd-tls"
    bare = make_pd_client("Exec", ep, PdPods([running_pd([], [])]), None, exec_fn=lambda *a: "")
    assert isinstance(bare, UnavailablePDClient)
    assert "PD pod ns/basic-pd-0 mounts no TLS Secret in its 'pd' container" in bare.reason
