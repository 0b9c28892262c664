"""The node agent's cAdvisor series from /proc, its burner, and the test's /proc sampler."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from testbed.burner import cpu_quantity
from testbed.cadvisor import BURN_ANNOTATION, CPU_OF_ANNOTATION, Cadvisor
from testbed.procstat import CpuSampler, burner_pids, read_stat

#: A container's main process that spins a child for a while, then lets it exit.
SPIN = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c",
    "import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.4: pass"])
child.wait()
time.sleep(60)
"""


def pod(uid: str, name: str, node: str, annotations: dict[str, str] | None = None,
        limit: str | None = None) -> Any:  # fmt: skip
    """The parts of a V1Pod the exporter reads."""
    resources = SimpleNamespace(limits={"cpu": limit} if limit else None)
    container = SimpleNamespace(name="tikv", image="pingcap/tikv:v8.1.0", resources=resources)
    return SimpleNamespace(
        metadata=SimpleNamespace(uid=uid, name=name, namespace="ns", annotations=annotations),
        spec=SimpleNamespace(node_name=node, containers=[container]),
    )


def series(text: str) -> dict[tuple[str, str, str], float]:
    """(metric, pod, id) -> value of an exposition, parsed by prometheus_client's parser."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, s.labels.get("pod", ""), s.labels["id"])] = s.value
    return out


def test_a_containers_cpu_keeps_the_seconds_of_a_child_that_exited_and_its_node_sums_it() -> None:
    exporter = Cadvisor(Path("/nonexistent"), lambda: ["node1", "node2"])
    main = subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=True)
    try:
        exporter.started(pod("u1", "runner", "node2"), "tikv", main.pid)
        samples = []
        for _ in range(12):  # the child spins 0.4 s of CPU, then exits
            exporter.sample()
            samples.append(exporter.containers[("u1", "tikv")].counter.seconds)
            time.sleep(0.1)
        text = exporter.render()
    finally:
        main.kill()
        main.wait()
    assert samples == sorted(samples), "a counter never goes down"
    got = series(text)
    cpu = got[("container_cpu_usage_seconds_total", "runner", "/kubepods/podu1/tikv")]
    # The child's 0.4 s whole: reaped by the main process, they are in its cutime.
    assert cpu >= 0.39, "the exited child's seconds are kept"
    assert got[("container_cpu_usage_seconds_total", "runner", "/kubepods/podu1")] == cpu
    assert got[("container_cpu_usage_seconds_total", "", "/")] >= cpu  # node2's root
    assert ("container_memory_working_set_bytes", "runner", "/kubepods/podu1/tikv") in got

    exporter.forget("u1")
    after = series(exporter.render())
    assert ("container_cpu_usage_seconds_total", "runner", "/kubepods/podu1/tikv") not in after
    roots = [v for (m, p, i), v in after.items() if i == "/" and m.startswith("container_cpu")]
    assert max(roots) == pytest.approx(cpu), "the departed pod's seconds stay in its node's"


def spin(seconds: float) -> None:
    """Use `seconds` of this process's CPU."""
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass


def test_a_standin_bound_to_a_pid_file_counts_that_process_from_the_binding_on(
    tmp_path: Path,
) -> None:
    exporter = Cadvisor(tmp_path, lambda: ["node3"])
    (tmp_path / "mariadb.pid").write_text(str(os.getpid()))
    bound = pod("u2", "basic-tidb-0", "node3", {CPU_OF_ANNOTATION: "mariadb"})
    exporter.sync_standin(bound)
    exporter.sync_standin(pod("u3", "basic-pd-0", "node3"))
    spin(0.3)
    got = series(exporter.render())
    tidb = got[("container_cpu_usage_seconds_total", "basic-tidb-0", "/kubepods/podu2/tikv")]
    # This process's CPU since the binding, not its whole life (as a container's counter).
    assert 0.28 <= tidb < 0.4  # clock ticks: 10 ms
    assert got[("container_cpu_usage_seconds_total", "basic-pd-0", "/kubepods/podu3/tikv")] == 0

    # Unbound, the seconds stay and this process's CPU no longer counts; bound again, the
    # gap's CPU stays out.
    exporter.sync_standin(pod("u2", "basic-tidb-0", "node3", {}))
    spin(0.3)
    exporter.sample()
    unbound = exporter.containers[("u2", "tikv")].counter.seconds
    assert tidb - 1e-6 <= unbound < tidb + 0.05  # the exposition rounds to 1 µs
    exporter.sync_standin(bound)
    spin(0.2)
    exporter.sample()
    again = exporter.containers[("u2", "tikv")].counter.seconds
    assert unbound + 0.18 <= again < unbound + 0.3


def test_a_burner_is_capped_by_the_cpu_limit_and_stops_when_its_annotation_goes() -> None:
    exporter = Cadvisor(Path("/nonexistent"), lambda: [])
    capped = pod("u4", "capped", "node2", {BURN_ANNOTATION: "1"}, limit="100m")
    exporter.sync_standin(capped)
    try:
        assert exporter.burners["u4"][0] == pytest.approx(0.1)
        time.sleep(0.3)
        assert burner_pids("ns", "capped")
        with CpuSampler(lambda procs: burner_pids("ns", "capped", procs), interval=0.1) as s:
            time.sleep(2.0)
        cores = s.cores(s.samples[0][0], s.samples[-1][0])
        assert 0.05 < cores < 0.15, cores
    finally:
        exporter.sync_standin(pod("u4", "capped", "node2", {}, limit="100m"))
    assert "u4" not in exporter.burners
    assert burner_pids("ns", "capped") == []


@pytest.mark.parametrize(("text", "cores"), [("250m", 0.25), ("1", 1.0), ("1.5", 1.5)])
def test_cpu_quantities_read_as_kubernetes_writes_them(text: str, cores: float) -> None:
    assert cpu_quantity(text) == cores


def test_the_sampler_interpolates_between_samples_and_refuses_times_outside_them() -> None:
    sampler = CpuSampler(lambda procs: [])
    sampler.samples = [(100.0, 1.0), (102.0, 2.0), (104.0, 2.0)]
    assert sampler.cores(101.0, 103.0) == pytest.approx((2.0 - 1.5) / 2)
    with pytest.raises(ValueError):
        sampler.seconds_at(99.0)


def test_a_standin_bound_to_a_process_and_burning_too_reports_the_sum_of_both(
    tmp_path: Path,
) -> None:
    exporter = Cadvisor(tmp_path, lambda: [])
    (tmp_path / "mariadb.pid").write_text(str(os.getpid()))
    both = {CPU_OF_ANNOTATION: "mariadb", BURN_ANNOTATION: "0.2"}
    exporter.sync_standin(pod("u5", "basic-tidb-0", "node3", both))
    try:
        spin(0.3)
        time.sleep(0.5)
        exporter.sample()
        reported = exporter.containers[("u5", "tikv")].counter.seconds
        burner = [read_stat(p) for p in burner_pids("ns", "basic-tidb-0")]
        burnt = sum(b.cpu_seconds for b in burner if b is not None)
        assert burnt > 0.05
        # The burner from its start, this process from the binding on (0.3 s and a little).
        assert burnt + 0.28 <= reported < burnt + 0.45
    finally:
        exporter.forget("u5")
    assert burner_pids("ns", "basic-tidb-0") == []


def test_each_pytest_worker_has_its_own_prometheus_and_the_kubelet_job_reads_the_exporter() -> None:
    from testbed.cluster import Ports, Testbed
    from testbed.prometheus import kubelet_job, slot

    assert slot(None) == slot("gw0") == ("prometheus", 5)
    assert slot("gw1") == ("prometheus-1", 21)
    job = kubelet_job(Testbed(ports=Ports(base=17600)))
    assert (job["job_name"], job["metrics_path"], job["honor_labels"]) == (
        "kubelet",
        "/metrics/cadvisor",
        True,
    )
    assert job["static_configs"][0]["targets"] == ["127.0.0.1:17610"]
