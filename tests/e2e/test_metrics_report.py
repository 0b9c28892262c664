"""The metrics endpoint and `tidb-bench report` against a real run on the test bed."""

from __future__ import annotations

import os
import re
import secrets
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from e2e.conftest import Controller
from testbed.cluster import Testbed
from testbed.kube import delete_namespace, has_default_service_account, namespace_exists, wait_for
from testbed.runs import add_db_secret, assert_quiet, create_run, get_run, run_manifest, wait_run

pytestmark = pytest.mark.e2e

TIDB_BENCH = str(Path(sys.executable).parent / "tidb-bench")
# This file's controller watches only its own namespaces (not the session controller's), so
# it can be started with a metrics port of its choosing.
PREFIX = "m" + secrets.token_hex(2)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def metrics_env(
    testbed: Testbed, crds: None, core: client.CoreV1Api, mariadb: dict[str, Any]
) -> Iterator[tuple[str, int]]:
    """A namespace with the Secret `db`, and `tidb-bench operator` watching it with
    TIDB_BENCH_METRICS_PORT set; yields (namespace, metrics port).

    The namespace exists before the controller starts (it is found in the first listing),
    and is deleted while the controller still runs, so kopf's finalizers come off its runs:
    a run left Running would hold the shared MariaDB target for every other suite.
    """
    ns = f"{PREFIX}-{secrets.token_hex(3)}"
    core.create_namespace({"metadata": {"name": ns}})
    wait_for(lambda: has_default_service_account(core, ns), 30, f"ServiceAccount default in {ns}")
    add_db_secret(core, ns, mariadb)
    port = free_port()
    ctl = Controller(
        testbed,
        testbed.kubeconfig,
        testbed.logs / f"controller-{PREFIX}.log",
        {
            "TIDB_BENCH_METRICS_PORT": str(port),
            "TIDB_BENCH_LIVENESS": "",
            "TIDB_BENCH_SCHEDULING_TIMEOUT_SECONDS": "20",
        },
        namespaces=(f"{PREFIX}-*",),
    )
    ctl.start()
    try:
        assert f"metrics on :{port}/metrics" in ctl.log.read_text()
        yield ns, port
    finally:
        try:
            delete_namespace(core, ns)
            wait_for(lambda: not namespace_exists(core, ns), 60, f"namespace {ns} gone")
        finally:
            ctl.stop()


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The exposition as {(metric, labels): value}."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for line in text.splitlines():
        match = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$", line)
        if match:
            labels = frozenset(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
            samples[(match.group(1), labels)] = float(match.group(3))
    return samples


def value(samples: dict[Any, float], metric: str, **labels: str) -> float | None:
    found = [v for (m, ls), v in samples.items() if m == metric and set(labels.items()) <= ls]
    assert len(found) <= 1, f"{metric}{labels} is ambiguous: {found}"
    return found[0] if found else None


def test_the_metrics_endpoint_serves_a_finished_runs_numbers_and_forgets_a_deleted_run(
    api: client.ApiClient, mariadb: dict[str, Any], metrics_env: tuple[str, int]
) -> None:
    ns, port = metrics_env
    create_run(api, ns, run_manifest("scraped", mariadb))
    run = wait_run(api, ns, "scraped", timeout=180)
    assert run["status"]["phase"] == "Succeeded"
    assert_quiet(run)

    def with_run() -> dict[Any, float] | None:
        samples = scrape(port)
        return samples if value(samples, "tidb_bench_run_peak_qps", run="scraped") else None

    samples = wait_for(with_run, 10, "the run's peak QPS on /metrics")
    for step in run["status"]["steps"]:
        labels = {"namespace": ns, "run": "scraped", "threads": str(step["threads"])}
        assert value(samples, "tidb_bench_step_qps", **labels) == step["qps"]
        assert value(samples, "tidb_bench_step_tps", **labels) == step["tps"]
        assert value(samples, "tidb_bench_step_valid", **labels) == 1.0  # the guard's verdict
        assert value(samples, "tidb_bench_step_disturbances", **labels) == 0.0
        latency = value(samples, "tidb_bench_step_latency_seconds", percentile="95", **labels)
        assert latency == pytest.approx(step["latencyMs"]["value"] / 1000)
        print(f"\n/metrics: threads {step['threads']}: qps {step['qps']} p95 {latency}s")
    assert (
        value(samples, "tidb_bench_run_peak_qps", namespace=ns, run="scraped")
        == (run["status"]["summary"]["peakQps"])
    )
    cluster = f"{mariadb['host']}:{mariadb['port']}"
    assert value(samples, "tidb_bench_step_qps", run="scraped", threads="2", cluster=cluster)
    assert (
        value(samples, "tidb_bench_runs_finished_total", namespace=ns, outcome="Succeeded") == 1.0
    )

    client.CustomObjectsApi(api).delete_namespaced_custom_object(
        "tidbbench.io", "v1alpha1", ns, "benchmarkruns", "scraped"
    )
    wait_for(
        lambda: not any(("run", "scraped") in labels for _, labels in scrape(port)),
        20,
        "the deleted run's series gone",
    )


def test_report_renders_a_live_run_and_its_saved_yaml_with_both_curves(
    api: client.ApiClient,
    testbed: Testbed,
    mariadb: dict[str, Any],
    metrics_env: tuple[str, int],
    tmp_path: Path,
) -> None:
    ns, _ = metrics_env
    create_run(api, ns, run_manifest("reported", mariadb, threads=[2, 4, 8]))
    run = wait_run(api, ns, "reported", timeout=180)
    assert run["status"]["phase"] == "Succeeded"
    env = {**os.environ, "KUBECONFIG": str(testbed.kubeconfig)}
    svg = tmp_path / "reported.svg"
    live = subprocess.run(
        [TIDB_BENCH, "report", "reported", "--namespace", ns, "--svg", str(svg)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    print("\n" + live.stdout)
    assert "# BenchmarkRun reported" in live.stdout
    for step in run["status"]["steps"]:
        assert f"| {step['threads']} | {step['qps']:,.0f} |" in live.stdout
    text = svg.read_text()
    assert 'class="qps"' in text and 'class="latency"' in text
    assert ">threads (log scale" in text and ">QPS<" in text and "p95 latency (ms)" in text
    # The live run's interval series came from its results ConfigMap: QPS over time per step.
    assert text.count('class="interval-qps"') == len(run["status"]["steps"])
    html = tmp_path / "reported.html"
    subprocess.run(
        [TIDB_BENCH, "report", "reported", "--namespace", ns, "--html", str(html)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    page = html.read_text()
    assert page.count("<svg") == 1 and "<table>" in page

    saved = tmp_path / "reported.yaml"
    saved.write_text(yaml.safe_dump(get_run(api, ns, "reported")))
    offline = subprocess.run(
        [TIDB_BENCH, "report", str(saved), "--compare", "reported", "--namespace", ns],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert "## Compared with reported" in offline.stdout
    assert "+0.0%" in offline.stdout

    # Rendered once to PNG for a person to look at (and to prove the SVG parses).
    # rsvg-convert comes with the test bed's packages (scripts/testbed/install-deps.sh).
    png = testbed.logs / "report-e2e.png"
    subprocess.run(["rsvg-convert", "-o", str(png), str(svg)], check=True)
    assert png.stat().st_size > 1000
    print(f"PNG: {png}")
