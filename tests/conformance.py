"""The tests' hand-written fakes, checked by mypy against the Protocols they stand in for.

Nothing here runs: `make types` type-checks this module (mypy --strict), so a fake whose
methods drift from what its consumer needs (a renamed method, another signature) fails the
build instead of silently testing something else. One FakeKube stands in for the
Kubernetes adapter wherever a unit test needs one.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from testbed.fake_kube import FakeClock, FakeKube
    from tidb_bench_operator.adapters.k8s import Kube
    from tidb_bench_operator.adapters.pd import PodLister
    from tidb_bench_operator.adapters.usage import MetricsAPI
    from tidb_bench_operator.controller.startup import Discovery
    from tidb_bench_operator.reconcile.experiment.reconciler import ExperimentKube
    from tidb_bench_operator.reconcile.run import RunKube
    from tidb_bench_operator.reconcile.run.gate import ClusterReader
    from tidb_bench_operator.reconcile.schedule.reconciler import ScheduleKube
    from unit.adapters.usage.test_metrics_server import RecordedMetricsAPI
    from unit.controller.test_startup import Discovery as FakeDiscovery

    def _fakes_conform() -> None:
        clock: Callable[[], datetime] = FakeClock()
        run_kube: RunKube = FakeKube(clock)
        cluster_reader: ClusterReader = FakeKube()
        pod_lister: PodLister = FakeKube()
        schedule_kube: ScheduleKube = FakeKube(clock)
        experiment_kube: ExperimentKube = FakeKube(clock)
        discovery: Discovery = FakeDiscovery(set())
        metrics_api: MetricsAPI = RecordedMetricsAPI()
        kube_metrics_api: MetricsAPI = Kube(None)
        _ = (run_kube, cluster_reader, pod_lister, schedule_kube, discovery, metrics_api)
        _ = (kube_metrics_api, experiment_kube)
