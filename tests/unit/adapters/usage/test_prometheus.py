"""The Prometheus usage source against a real HTTP server answering recorded Prometheus bodies.

The bodies in tests/data/prometheus/usage/ are what Prometheus 2.42 answered to this source's
own queries over series in cAdvisor's shape (see the README.md beside them).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tidb_bench_operator.adapters.usage import PrometheusUsageSource
from tidb_bench_operator.adapters.usage.prometheus import names_regex, parse_vector
from tidb_bench_operator.domain.api.metrics_spec import PrometheusQueries
from tidb_bench_operator.domain.resources.usage import PodKey, UsageReading

DATA = Path(__file__).parents[3] / "data" / "prometheus" / "usage"
T0 = 1764720000
START, END = datetime.fromtimestamp(T0 + 60, UTC), datetime.fromtimestamp(T0 + 240, UTC)
PODS = [
    PodKey("bench", name)
    for name in ("basic-tidb-0", "basic-tikv-0", "basic-tikv-1", "basic-pd-0", "basic-tikv-2")
]
NODES = ["node1", "node2", "node3", "node4"]
TOKEN = "s3cret-token-7f1e"


def recorded(query: str) -> bytes:
    """The recorded answer to one of the source's queries, chosen by its metric."""
    if 'id="/"' in query:
        name = "node-cpu"
    elif "process_cpu_seconds_total" in query:
        name = "process-cpu"
    elif "container_cpu_usage_seconds_total" in query:
        name = "pod-cpu"
    elif "working_set" in query:
        name = "pod-memory"
    else:
        name = "rx" if "receive" in query else "tx"
    return (DATA / f"{name}.json").read_bytes()


@dataclass
class Prometheus:
    """A real HTTP server in a thread; `answer` decides each answer from the query."""

    answer: str = "recorded"
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    url: str = ""

    def queries(self) -> list[str]:
        return [urllib.parse.parse_qs(urllib.parse.urlsplit(p).query)["query"][0]
                for p, _ in self.requests if p.startswith("/api/v1/query")]  # fmt: skip


def _handler(prom: Prometheus) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args: object) -> None:
            pass

        def _send(self, status: int, body: bytes, **headers: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            with contextlib.suppress(OSError):  # the client gave up (a timeout test)
                self.wfile.write(body)

        def do_GET(self) -> None:
            prom.requests.append((self.path, dict(self.headers.items())))
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            text = query.get("query", [""])[0]
            mode = prom.answer
            if self.path.startswith("/elsewhere") or mode == "recorded":
                self._send(200, recorded(text))
            elif mode in ("nan", "bad-data"):
                self._send(400 if mode == "bad-data" else 200, (DATA / f"{mode}.json").read_bytes())
            elif mode == "empty":
                self._send(200, b'{"status":"success","data":{"resultType":"vector","result":[]}}')
            elif mode == "500":
                self._send(500, b'{"status":"error","errorType":"internal","error":"boom HIDDEN"}')
            elif mode == "memory-500":
                code = 500 if "working_set" in text else 200
                self._send(code, b"HIDDEN" if code == 500 else recorded(text))
            elif mode == "redirect":
                self._send(302, b"HIDDEN", Location="/elsewhere/api/v1/query?" + self.path)
            elif mode == "slow":
                time.sleep(2.0)
                self._send(200, recorded(text))
            elif mode == "huge":
                pad = "x" * (9 * 1024 * 1024)
                body = '{"status":"success","data":{"resultType":"vector","result":[],"p":"%s"}}'
                self._send(200, (body % pad).encode())
            elif mode == "echo":
                token = self.headers.get("Authorization", "")
                if "working_set" in text:
                    self._send(400, json.dumps({"status": "error", "errorType": "bad_data",
                                                "error": token}).encode())  # fmt: skip
                    return
                result = [{"metric": {"namespace": "bench", "pod": token}, "value": [1, "1"]},
                          {"metric": {"namespace": token, "pod": "x"}, "value": [1, "2"]}]  # fmt: skip
                body = {"status": "success", "data": {"resultType": "vector", "result": result}}
                self._send(200, json.dumps(body).encode())

    return Handler


@pytest.fixture
def prometheus() -> Iterator[Prometheus]:
    prom = Prometheus()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(prom))
    server.daemon_threads = True
    prom.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield prom
    finally:
        server.shutdown()
        server.server_close()


def read(prom: Prometheus, **kwargs: object) -> UsageReading:
    source = PrometheusUsageSource(prom.url, **kwargs)  # type: ignore[arg-type]
    return source.read(PODS, NODES, START, END)


def test_each_pods_cores_memory_and_network_and_each_nodes_cores_are_read(
    prometheus: Prometheus,
) -> None:
    reading = read(prometheus)
    assert reading.unavailable is None
    assert reading.source == "prometheus" and (reading.start, reading.end) == (START, END)
    by_name = {p.name: p for p in reading.pods}
    assert [p.name for p in reading.pods] == [p.name for p in PODS]
    # tidb + slowlog containers; the pod's own cgroup (container="") and pause not added
    assert by_name["basic-tidb-0"].cpu_cores == pytest.approx(1.51)
    assert by_name["basic-tikv-1"].cpu_cores == pytest.approx(3.2)
    assert by_name["basic-tidb-0"].memory_bytes == pytest.approx(905e6 * 1.1)
    assert by_name["basic-tikv-0"].rx_bytes_per_sec == pytest.approx(2.5e6)
    assert by_name["basic-tikv-0"].tx_bytes_per_sec == pytest.approx(4.0e6)
    assert by_name["basic-pd-0"].rx_bytes_per_sec is None
    assert by_name["basic-tikv-2"].cpu_cores is None
    assert {n.name: round(n.cpu_cores, 2) for n in reading.nodes} == {
        "node1": 1.55, "node2": 4.06, "node3": 1.64,
    }  # fmt: skip
    assert reading.queries == 5 == len(prometheus.requests)


def test_missing_series_are_notes_naming_what_is_missing_not_a_failure(
    prometheus: Prometheus,
) -> None:
    notes = read(prometheus).notes
    base = f"Prometheus {prometheus.url}"
    assert f"{base}: no pod CPU series for 1 of 5 pods (bench/basic-tikv-2)" in notes
    assert (
        f"{base}: no network receive series for 2 of 5 pods (bench/basic-pd-0, bench/basic-tikv-2)"
        in notes
    )
    assert any(
        n.startswith(f"{base}: no node CPU series") and n.endswith("for node4") for n in notes
    )

    prometheus.answer = "empty"
    reading = read(prometheus)
    assert reading.unavailable is None
    assert all(p.cpu_cores is None and p.memory_bytes is None for p in reading.pods)
    assert f"{base}: no pod CPU series for 5 of 5 pods" in reading.notes[0]
    assert f"{base}: no network series (none recorded)" in reading.notes


def test_the_queries_are_cadvisors_containers_over_the_whole_window_at_its_end(
    prometheus: Prometheus,
) -> None:
    read(prometheus)
    cpu, memory, rx, _tx, node = prometheus.queries()
    pods = r"basic\\-pd\\-0|basic\\-tidb\\-0|basic\\-tikv\\-0|basic\\-tikv\\-1|basic\\-tikv\\-2"
    assert cpu == (
        "sum by (namespace, pod) (increase(container_cpu_usage_seconds_total{"
        f'namespace="bench", pod=~"{pods}", container!="", container!="POD"}}[180s])) / 180'
    )
    assert memory.startswith("max_over_time(sum by (namespace, pod) (container_memory_working_set")
    assert memory.endswith("[180s:3s])")
    assert rx.startswith("sum by (namespace, pod) (rate(container_network_receive_bytes_total{")
    assert node == (
        'sum by (node) (increase(container_cpu_usage_seconds_total{id="/", '
        'node=~"node1|node2|node3|node4"}[180s])) / 180'
    )
    assert all(f"time={T0 + 240}.000" in path for path, _ in prometheus.requests)


def test_the_process_cpu_source_reads_the_components_own_counter(prometheus: Prometheus) -> None:
    reading = read(prometheus, cpu_source="process")
    assert "process_cpu_seconds_total{" in prometheus.queries()[0]
    assert {p.name: p.cpu_cores for p in reading.pods}["basic-tidb-0"] == pytest.approx(1.4647)


def test_overrides_get_the_namespace_the_pods_regex_and_the_window_filled_in(
    prometheus: Prometheus,
) -> None:
    mine = PrometheusQueries(
        pod_cpu='sum by (namespace, pod) (rate(my_cpu{ns="$namespace", p=~"$pods$$"}[$window]))'
    )
    read(prometheus, queries=mine)
    assert prometheus.queries()[0] == (
        r'sum by (namespace, pod) (rate(my_cpu{ns="bench", p=~"basic\\-pd\\-0|basic\\-tidb\\-0|'
        r'basic\\-tikv\\-0|basic\\-tikv\\-1|basic\\-tikv\\-2$"}[180s]))'
    )
    assert names_regex(['we"ird\\', "a.b"]) == r"a\\.b|we\"ird\\\\"


def test_a_500_on_every_query_is_unavailable_in_our_words_without_the_body(
    prometheus: Prometheus,
) -> None:
    prometheus.answer = "500"
    reading = read(prometheus)
    assert reading.unavailable == (
        f"Prometheus {prometheus.url} answered HTTP 500 to the pod CPU query (internal)"
    )
    assert "HIDDEN" not in repr(reading) and "boom" not in repr(reading)
    assert reading.pods == () and reading.queries == 5


def test_one_query_failing_is_a_note_and_the_others_still_count(prometheus: Prometheus) -> None:
    prometheus.answer = "memory-500"
    reading = read(prometheus)
    assert reading.unavailable is None
    assert f"Prometheus {prometheus.url} answered HTTP 500 to the pod memory query" in reading.notes
    assert all(p.memory_bytes is None for p in reading.pods)
    assert {p.name: p.cpu_cores for p in reading.pods}["basic-tikv-1"] == pytest.approx(3.2)


def test_a_redirect_is_the_answer_and_is_not_followed(prometheus: Prometheus) -> None:
    prometheus.answer = "redirect"
    reading = read(prometheus)
    assert (
        reading.unavailable == f"Prometheus {prometheus.url} answered HTTP 302 to the pod CPU query"
    )
    assert not any(path.startswith("/elsewhere") for path, _ in prometheus.requests)


def test_a_slow_answer_times_out_once_and_the_other_queries_are_not_sent(
    prometheus: Prometheus,
) -> None:
    prometheus.answer = "slow"
    began = time.monotonic()
    reading = read(prometheus, timeout=0.5)
    assert time.monotonic() - began < 1.5
    assert reading.unavailable == (
        f"Prometheus {prometheus.url} did not answer the pod CPU query: "
        "no answer within 0.5 s (timed out)"
    )
    assert reading.queries == 1


def test_a_huge_answer_is_cut_at_the_cap_and_refused(prometheus: Prometheus) -> None:
    prometheus.answer = "huge"
    reading = read(prometheus)
    assert reading.unavailable == (
        f"Prometheus {prometheus.url}: the pod CPU query's answer: the answer is over the 8 MiB cap"
    )


def test_the_bearer_token_is_sent_and_never_reaches_the_reading_even_when_echoed(
    prometheus: Prometheus,
) -> None:
    prometheus.answer = "echo"
    reading = read(prometheus, token=TOKEN)
    assert {h.get("Authorization") for _, h in prometheus.requests} == {f"Bearer {TOKEN}"}
    assert TOKEN not in repr(reading)
    assert reading.unavailable is None  # the echoing series are not the pods asked about
    assert all(p.cpu_cores is None for p in reading.pods)


def test_a_token_that_is_no_header_value_sends_nothing_and_is_not_quoted(
    prometheus: Prometheus,
) -> None:
    reading = read(prometheus, token="abc\r\nX-Evil: 1")
    assert reading.unavailable is not None and "abc" not in reading.unavailable
    assert "not a valid HTTP header value" in reading.unavailable
    assert prometheus.requests == []


def test_nan_values_are_ignored_with_a_note(prometheus: Prometheus) -> None:
    nan = (DATA / "nan.json").read_bytes()
    assert b'"NaN"' in nan and parse_vector(nan) == ([], 4)
    prometheus.answer = "nan"
    reading = read(prometheus)
    assert reading.unavailable is None and all(p.cpu_cores is None for p in reading.pods)
    assert f"Prometheus {prometheus.url}: 20 value(s) not finite (NaN or Inf), ignored" in (
        reading.notes
    )


def test_a_query_prometheus_refuses_is_named_by_its_error_type_never_its_text(
    prometheus: Prometheus,
) -> None:
    prometheus.answer = "bad-data"
    reading = read(prometheus, queries=PrometheusQueries(pod_cpu="rate(x[$window]"))
    assert reading.unavailable == (
        f"Prometheus {prometheus.url} answered HTTP 400 to the pod CPU query (bad_data: the "
        "query is not valid PromQL; check spec.metrics.queries)"
    )
    assert "parenthesis" not in repr(reading)


def test_answers_that_are_not_instant_vectors_are_refused_in_our_words() -> None:
    for body, expected in (
        (b'{"status":"success","data":{"resultType":"matrix","result":[]}}', "instant vector"),
        (
            b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{},'
            b'"value":[1,2]}]}}',
            "not {metric, value",
        ),
        (
            b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":1},'
            b'"value":[1,"2"]}]}}',
            "not {metric, value",
        ),
        (
            b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{},'
            b'"value":[1,"two"]}]}}',
            "not a number",
        ),
        (b"<html>", "not JSON"),
        (b"[" * 100_000, "not JSON"),
    ):
        with pytest.raises(ValueError, match=expected) as info:
            parse_vector(body)
        assert "two" not in str(info.value) and "html" not in str(info.value)


def test_nothing_listening_is_unavailable_saying_so() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    reading = PrometheusUsageSource(f"http://127.0.0.1:{port}/").read(PODS, NODES, START, END)
    assert reading.unavailable == (
        f"Prometheus http://127.0.0.1:{port} did not answer the pod CPU query: "
        "connection refused (nothing listens on that host and port)"
    )
    assert reading.queries == 1
