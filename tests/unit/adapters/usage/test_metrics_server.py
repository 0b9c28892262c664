"""The metrics-server usage source on recorded resource metrics API bodies.

tests/data/metrics-server/ holds PodMetricsList and NodeMetricsList answers of
/apis/metrics.k8s.io/v1beta1 in metrics-server's shape (items[].metadata, timestamp, window,
containers[].usage in nanocores and KiB), three scrapes 15 s apart.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tidb_bench_operator.adapters.usage import MetricsServerSource
from tidb_bench_operator.adapters.usage.metrics_server import FORBIDDEN, NOT_SERVED
from tidb_bench_operator.domain.objects import JSON
from tidb_bench_operator.domain.resources.usage import PodKey
from tidb_bench_operator.errors import KubeError, KubeForbidden

DATA = Path(__file__).parents[3] / "data" / "metrics-server"
PODS = [PodKey("bench", n) for n in ("basic-tidb-0", "basic-tikv-0", "basic-tikv-1", "basic-pd-0")]
START = datetime(2025, 12, 3, 0, 1, 0, tzinfo=UTC)
END = datetime(2025, 12, 3, 0, 1, 45, tzinfo=UTC)


def body(name: str) -> JSON:
    return dict(json.loads((DATA / f"{name}.json").read_text()))


class RecordedMetricsAPI:
    """Answers the metrics API's paths with the recorded scrapes, the next one on each call
    (the last one again at the end), or fails as the Kubernetes adapter does."""

    def __init__(self, fail: Exception | None = None, absent: bool = False) -> None:
        self.calls: list[str] = []
        self.shift = timedelta(0)  # added to the recorded timestamps
        self.scrape = {"pods": 0, "nodes": 0}
        self.fail = fail
        self.absent = absent

    def metrics_api(self, path: str) -> JSON | None:
        self.calls.append(path)
        if self.fail is not None:
            raise self.fail
        if self.absent:
            return None
        kind = "nodes" if path == "nodes" else "pods"
        assert path in ("nodes", "namespaces/bench/pods")
        self.scrape[kind] = min(self.scrape[kind] + 1, 3)
        doc = body(f"{kind}-{self.scrape[kind]}")
        for item in doc["items"]:
            stamp = datetime.fromisoformat(item["timestamp"]) + self.shift
            item["timestamp"] = stamp.isoformat().replace("+00:00", "Z")
        return doc


def cores(nanocores: list[int]) -> float:
    return sum(nanocores) / len(nanocores) / 1e9


def test_samples_during_the_window_are_averaged_and_the_memory_peak_kept() -> None:
    kube = RecordedMetricsAPI()
    source = MetricsServerSource(kube)
    for second in (8, 23, 38):
        source.sample(PODS, START + timedelta(seconds=second))
    reading = source.read(PODS, ["node2", "node3"], START, END)
    assert reading.unavailable is None and reading.source == "metrics-server"
    usage = {p.name: p for p in reading.pods}
    # tidb's two containers summed at each scrape, then averaged over the three
    tidb = [1498232171 + 104211, 1521004410 + 98713, 1480511309 + 101002]
    assert usage["basic-tidb-0"].cpu_cores == pytest.approx(cores(tidb))
    assert usage["basic-tidb-0"].memory_bytes == (902344 + 4880) * 1024
    assert usage["basic-tikv-1"].cpu_cores == pytest.approx(3.1995883, rel=1e-6)
    assert {n.name: round(n.cpu_cores, 3) for n in reading.nodes} == {
        "node2": 4.061,
        "node3": 1.641,
    }
    assert reading.notes == ("metrics-server: 3 samples during the window",)
    assert reading.queries == 6 and len(kube.calls) == 6


def test_an_answer_repeated_until_the_next_scrape_is_one_sample() -> None:
    kube = RecordedMetricsAPI()
    source = MetricsServerSource(kube)
    source.sample(PODS, START + timedelta(seconds=8))
    kube.scrape = {"pods": 0, "nodes": 0}  # metrics-server answers its last scrape again
    source.sample(PODS, START + timedelta(seconds=10))
    reading = source.read(PODS, [], START, END)
    assert reading.notes == ("metrics-server: 1 sample during the window",)


def test_without_samples_one_is_taken_at_the_end_and_the_reading_says_so() -> None:
    kube = RecordedMetricsAPI()
    source = MetricsServerSource(kube, clock=lambda: END + timedelta(seconds=1))
    reading = source.read(PODS, ["node1"], START, END)
    assert reading.unavailable is None
    assert reading.notes == (
        "metrics-server: sampled once at step end (metrics-server keeps no history)",
    )
    assert {p.name: p.cpu_cores for p in reading.pods}["basic-pd-0"] == pytest.approx(0.201987654)
    assert [n.name for n in reading.nodes] == ["node1"]
    assert kube.calls == ["namespaces/bench/pods", "nodes"] and reading.queries == 2


def test_samples_outside_the_window_do_not_count() -> None:
    kube = RecordedMetricsAPI()
    source = MetricsServerSource(kube, clock=lambda: END)
    source.sample(PODS, START)  # the scrape of 00:01:07, before this window
    source.sample(PODS, START + timedelta(seconds=15))  # the scrape of 00:01:22, inside
    later = START + timedelta(seconds=10)
    reading = source.read(PODS, [], later, END)
    assert reading.notes == ("metrics-server: 1 sample during the window",)
    tikv = {p.name: p.cpu_cores for p in reading.pods}["basic-tikv-0"]
    assert tikv == pytest.approx(0.798876543)
    early = source.read(PODS, [], START - timedelta(minutes=5), START)
    assert "sampled once at step end" in early.notes[0]


def test_samples_older_than_ten_minutes_are_dropped() -> None:
    kube = RecordedMetricsAPI()
    source = MetricsServerSource(kube, clock=lambda: END)
    source.sample(PODS, START)  # stamped 00:01:07
    kube.shift = timedelta(minutes=11)
    source.sample(PODS, START + timedelta(minutes=11, seconds=30))  # stamped 00:12:22
    reading = source.read(PODS, [], START, START + timedelta(seconds=10))
    assert reading.notes[0].startswith("metrics-server: sampled once at step end")


def test_a_pod_the_api_does_not_list_is_named_in_a_note() -> None:
    pods = [*PODS, PodKey("bench", "basic-tikv-2")]
    source = MetricsServerSource(RecordedMetricsAPI())
    source.sample(pods, START)
    reading = source.read(pods, [], START, END)
    assert "metrics-server: no metrics for 1 pods (bench/basic-tikv-2)" in reading.notes
    assert {p.name: p.cpu_cores for p in reading.pods}["basic-tikv-2"] is None


@pytest.mark.parametrize(
    ("kube", "expected"),
    [
        (RecordedMetricsAPI(absent=True), NOT_SERVED),
        (
            RecordedMetricsAPI(KubeForbidden("reading the resource metrics API (nodes): HTTP 403")),
            FORBIDDEN,
        ),
        (
            RecordedMetricsAPI(KubeError("reading the resource metrics API (nodes): HTTP 503")),
            "the resource metrics API (metrics.k8s.io) could not be read: reading the resource "
            "metrics API (nodes): HTTP 503",
        ),
    ],
)
def test_an_api_absent_forbidden_or_failing_is_unavailable_saying_what_to_do(
    kube: RecordedMetricsAPI, expected: str
) -> None:
    source = MetricsServerSource(kube)
    source.sample(PODS, START)
    reading = source.read(PODS, ["node1"], START, END)
    assert reading.unavailable == expected
    assert reading.pods == ()


def test_the_not_served_text_names_both_remedies() -> None:
    assert NOT_SERVED == (
        "the resource metrics API (metrics.k8s.io) is not served: install metrics-server, or "
        "name a Prometheus in spec.metrics"
    )


def test_a_broken_answer_is_no_sample_not_a_crash() -> None:
    class Broken(RecordedMetricsAPI):
        def metrics_api(self, path: str) -> JSON | None:
            self.calls.append(path)
            items: list[object] = [
                None,
                {"metadata": {"name": "basic-pd-0", "namespace": "bench"}, "containers": [
                    {"usage": {"cpu": "lots", "memory": "1Ki"}}]},
                {"metadata": {"name": 7}, "containers": []},
            ]  # fmt: skip
            return {"items": items}

    source = MetricsServerSource(Broken())
    reading = source.read(PODS, ["node1"], START, END)
    pd = {p.name: p for p in reading.pods}["basic-pd-0"]
    assert pd.cpu_cores is None and pd.memory_bytes == 1024


def test_looks_closer_than_five_seconds_sample_once_and_a_refusing_api_is_left_alone() -> None:
    kube = RecordedMetricsAPI()
    source = MetricsServerSource(kube)
    for tenth in range(0, 60, 5):  # a look every half second for six seconds
        source.sample(PODS, START + timedelta(seconds=tenth / 10))
    assert len(kube.calls) == 4, "two samples (at 0 s and 5 s), two requests each"
    absent = RecordedMetricsAPI(absent=True)
    refused = MetricsServerSource(absent)
    for second in range(0, 120, 6):  # every 6 s for two minutes
        refused.sample(PODS, START + timedelta(seconds=second))
    assert len(absent.calls) == 2, "asked at 0 s and again once BACK_OFF (60 s) had passed"
