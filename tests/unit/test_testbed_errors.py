"""The test bed fails precisely: what failed, where its log is, what to do."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from testbed import cluster
from testbed.cluster import Ports, Testbed, TestbedError


def test_a_port_in_use_is_named_with_its_component(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        tb = Testbed(state=tmp_path, ports=Ports(base=port - 2))
        with pytest.raises(TestbedError) as err:
            tb._check_ports()
    assert f"{port} (kube-apiserver)" in str(err.value)
    assert "TIDB_BENCH_TESTBED_PORT_BASE" in str(err.value)


def test_missing_kubernetes_binaries_say_how_to_build_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cluster, "K8S_BIN", tmp_path / "nothing-here")
    with pytest.raises(TestbedError) as err:
        Testbed(state=tmp_path)._check_binaries()
    assert "kube-apiserver" in str(err.value) and "make k8s" in str(err.value)


def test_a_component_that_dies_at_start_up_is_reported_with_its_log(tmp_path: Path) -> None:
    tb = Testbed(state=tmp_path)
    tb.logs.mkdir(parents=True)
    tb._spawn("kube-apiserver", ["sh", "-c", "echo 'error: invalid flag --bogus' >&2; exit 1"])
    import time

    time.sleep(0.5)
    with pytest.raises(TestbedError) as err:
        tb._alive_or_raise("kube-apiserver")
    text = str(err.value)
    assert "kube-apiserver exited during start-up" in text
    assert str(tb.log_of("kube-apiserver")) in text
    assert "invalid flag --bogus" in text
    tb.stop()  # reaps the exited child
