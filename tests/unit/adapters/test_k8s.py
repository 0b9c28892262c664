"""The Kubernetes adapter converts the client's exceptions at its boundary.

The client is replaced by objects raising what the real client raises (ApiException for an
answer, urllib3 and socket errors for a connection): a fake of an external library, since
the real API server's failures are tests/e2e's business (test_deploy's 403s).
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import ProtocolError

from tidb_bench_operator.adapters.k8s import Kube
from tidb_bench_operator.errors import KubeError, KubeForbidden, TidbBenchError


class Raising:
    """Any client call raises `exc`."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            raise self.exc

        return call


def kube_raising(exc: BaseException) -> Kube:
    kube = Kube(ApiClient())
    kube.core = kube.batch = kube.custom = kube.version_api = Raising(exc)
    return kube


def forbidden() -> ApiException:
    return ApiException(status=403, reason="Forbidden")


def test_a_403_on_a_list_is_kube_forbidden_naming_the_list() -> None:
    with pytest.raises(KubeForbidden, match=r"^listing Nodes: 403 Forbidden$"):
        kube_raising(forbidden()).nodes()
    with pytest.raises(KubeForbidden, match=r"listing pods a=b in namespace ns: 403"):
        kube_raising(forbidden()).pods("ns", "a=b")
    with pytest.raises(KubeForbidden, match=r"listing Jobs x=y in namespace ns: 403"):
        kube_raising(forbidden()).jobs("ns", "x=y")


def test_a_broken_connection_is_a_kube_error_and_so_one_of_ours() -> None:
    kube = kube_raising(ProtocolError("Connection aborted."))
    with pytest.raises(KubeError, match=r"listing Nodes: ProtocolError") as err:
        kube.nodes()
    assert isinstance(err.value, TidbBenchError)
    with pytest.raises(KubeError, match="reading Secret ns/db: ConnectionResetError"):
        kube_raising(ConnectionResetError(104, "reset")).secret_keys("ns", "db")


def test_a_refused_write_quotes_the_api_servers_message() -> None:
    exc = ApiException(status=422, reason="Unprocessable Entity")
    exc.body = '{"message": "Job.batch \\"x\\" is invalid: spec.template: Required value"}'
    body = {"metadata": {"namespace": "ns", "name": "x"}}
    with pytest.raises(KubeError, match=r'creating Job ns/x: 422 Job.batch "x" is invalid'):
        kube_raising(exc).create_job(body)


def test_not_found_is_an_answer_not_an_error() -> None:
    kube = kube_raising(ApiException(status=404, reason="Not Found"))
    assert kube.secret_keys("ns", "db") is None
    assert kube.tidb_cluster("ns", "basic") is None
    assert kube.served_resources("tidbbench.io", "v1alpha1") == set()


def test_best_effort_calls_swallow_every_client_error() -> None:
    kube = kube_raising(ProtocolError("Connection aborted."))
    assert kube.pod_log("ns", "p", "runner") is None
    kube.create_event({"metadata": {"namespace": "ns"}})
