"""Bring the whole test bed up or down: control plane, node agent, MariaDB, nodes, CRDs."""

from __future__ import annotations

import shutil

from kubernetes import client

from testbed.cluster import Testbed, TestbedError
from testbed.kube import api_client, default_nodes, install_tidb_crd
from testbed.services import mariadb_alive, start_agent, start_mariadb
from testbed.v2cluster import install_v2_crds


def bring_up(tb: Testbed) -> bool:
    """Start everything unless already up; returns True when this call started it."""
    if tb.is_up() and mariadb_alive(tb):
        return False
    if tb.state.exists():
        # Left over from a run that died: stop what it left and start clean.
        tb.stop()
        shutil.rmtree(tb.state)
    tb.start()
    try:
        start_agent(tb)
        start_mariadb(tb)
        api = api_client(tb)
        default_nodes(client.CoreV1Api(api), tb.ports.kubelet)
        install_tidb_crd(client.ApiextensionsV1Api(api))
        install_v2_crds(client.ApiextensionsV1Api(api))  # TiDB Operator v2, made fit for 1.20
    except Exception as exc:
        tb.stop()
        if isinstance(exc, TestbedError):
            raise
        raise TestbedError(f"test bed set-up failed: {exc}") from exc
    return True


def tear_down(tb: Testbed) -> None:
    """Stop every process and remove the state directory."""
    tb.stop()
    if tb.state.exists():
        shutil.rmtree(tb.state, ignore_errors=True)
