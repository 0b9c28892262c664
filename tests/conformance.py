"""The tests' hand-written fakes, checked by mypy against the Protocols they stand in for.

Nothing here runs: `make types` type-checks this module (mypy --strict), so a fake whose
methods drift from what its consumer needs (a renamed method, another signature) fails the
build instead of silently testing something else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from testbed.fake_kube import FakeKube
    from tidb_bench_operator.adapters.pd import PodLister
    from tidb_bench_operator.controller.wiring import Discovery
    from tidb_bench_operator.reconcile.run import RunKube
    from tidb_bench_operator.reconcile.run.gate import ClusterReader
    from tidb_bench_operator.reconcile.schedule.reconciler import ScheduleKube
    from unit.controller.test_wiring import Discovery as FakeDiscovery
    from unit.reconcile.run.test_gate import InMemoryKube
    from unit.reconcile.schedule.test_reconciler import Clock
    from unit.reconcile.schedule.test_reconciler import ScheduleKube as FakeScheduleKube

    def _fakes_conform(clock: Clock) -> None:
        run_kube: RunKube = FakeKube()
        cluster_reader: ClusterReader = FakeKube()
        pod_lister: PodLister = FakeKube()
        gate_reader: ClusterReader = InMemoryKube([], [])
        schedule_kube: ScheduleKube = FakeScheduleKube(clock)
        discovery: Discovery = FakeDiscovery(set())
        _ = (run_kube, cluster_reader, pod_lister, gate_reader, schedule_kube, discovery)
