"""Kube.metrics_api through the real Kubernetes client against a real HTTP server standing in
for the API server's aggregated resource metrics API: answers, 404, 403 and 503."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from kubernetes import client

from tidb_bench_operator.adapters.k8s import Kube
from tidb_bench_operator.errors import KubeError, KubeForbidden

PODS = (Path(__file__).parents[3] / "data" / "metrics-server" / "pods-1.json").read_bytes()
STATUS = {
    "/apis/metrics.k8s.io/v1beta1/namespaces/bench/pods": 200,
    "/apis/metrics.k8s.io/v1beta1/namespaces/denied/pods": 403,
    "/apis/metrics.k8s.io/v1beta1/namespaces/down/pods": 503,
}


class _APIServer(BaseHTTPRequestHandler):
    def log_message(self, *_args: object) -> None:
        pass

    def do_GET(self) -> None:
        status = STATUS.get(self.path, 404)
        body = PODS if status == 200 else b'{"kind":"Status","message":"HIDDEN detail"}'
        self.send_response(status, "HIDDEN reason" if status == 503 else None)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def kube() -> Iterator[Kube]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _APIServer)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    conf = client.Configuration()
    conf.host = f"http://127.0.0.1:{server.server_address[1]}"
    api = client.ApiClient(conf)
    try:
        yield Kube(api)
    finally:
        api.close()
        api.rest_client.pool_manager.clear()
        server.shutdown()
        server.server_close()


def test_the_answer_comes_back_as_the_wire_dict(kube: Kube) -> None:
    doc = kube.metrics_api("namespaces/bench/pods")
    assert doc is not None and doc["kind"] == "PodMetricsList"
    assert doc["items"][0]["containers"][0]["usage"]["cpu"] == "1498232171n"


def test_an_api_not_served_is_none(kube: Kube) -> None:
    assert kube.metrics_api("nodes") is None


def test_403_is_forbidden_and_other_failures_name_the_status_never_the_servers_text(
    kube: Kube,
) -> None:
    with pytest.raises(KubeForbidden, match=r"^reading the resource metrics API \(namespaces/"
                       r"denied/pods\): HTTP 403$"):  # fmt: skip
        kube.metrics_api("namespaces/denied/pods")
    with pytest.raises(KubeError) as info:
        kube.metrics_api("namespaces/down/pods")
    assert str(info.value).endswith("HTTP 503") and "HIDDEN" not in str(info.value)
