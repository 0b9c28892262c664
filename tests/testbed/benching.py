"""What the benchmarks in bench/ share: a namespace with the `db` Secret, and a controller
watching only it, started as a subprocess of the benchmark."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from testbed.cluster import Testbed
from testbed.crds import install_project_crds
from testbed.kube import api_client, wait_for
from testbed.services import mariadb_info


@dataclass(frozen=True)
class Bed:
    """The running test bed as a benchmark uses it."""

    tb: Testbed
    api: client.ApiClient
    core: client.CoreV1Api
    db: dict[str, Any]


def open_bed() -> Bed | None:
    """The running test bed with the project's CRDs installed; None (said why) when it is down."""
    tb = Testbed()
    if not tb.is_up():
        print("the test bed is not up: run `make testbed-up` first", file=sys.stderr)
        return None
    api = api_client(tb)
    install_project_crds(api)
    return Bed(tb, api, client.CoreV1Api(api), mariadb_info(tb))


def bench_namespace(core: client.CoreV1Api, ns: str, db: dict[str, Any]) -> None:
    """Create `ns` and, in it, the Secret `db` holding the MariaDB stand-in's credentials."""
    core.create_namespace({"metadata": {"name": ns}})
    wait_for(lambda: core.list_namespaced_service_account(ns).items, 30, "default SA")
    secret = {"user": db["user"], "password": db["password"]}
    core.create_namespaced_secret(ns, {"metadata": {"name": "db"}, "stringData": secret})


def start_controller(tb: Testbed, ns: str, **env: str) -> tuple[subprocess.Popen[bytes], Path]:
    """`tidb-bench operator --namespace=ns` logging to the test bed's logs; waits until ready."""
    log = tb.logs / f"controller-{ns}.log"
    with log.open("ab") as out:
        ctl = subprocess.Popen(
            [str(Path(sys.executable).parent / "tidb-bench"), "operator", f"--namespace={ns}"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "KUBECONFIG": str(tb.kubeconfig), "TIDB_BENCH_LIVENESS": "", **env},
        )  # fmt: skip
    try:
        wait_for(lambda: "tidb-bench-operator ready" in log.read_text(), 60, "controller")
    except BaseException:
        stop_controller(ctl)
        raise
    return ctl, log


def stop_controller(ctl: subprocess.Popen[bytes]) -> None:
    os.killpg(ctl.pid, signal.SIGTERM)
    ctl.wait(timeout=30)
