"""Debian's Prometheus on the test bed: scrapes the controller pod and the node agent's
cAdvisor, evaluates deploy/'s alerts.

It listens on loopback only, on a port derived from the test bed's port base (base+5; a
pytest-xdist worker n past the first: base+20+n, `slot`), keeps its data in the test bed's
state dir, and is stopped with the rest of the test bed (its pid file is there) or alone
(`stop`, as a test does mid-run). Its jobs:
- `scrape_config`: what the Prometheus Operator makes of
  deploy/overlays/monitoring/servicemonitor.yaml: job = the Service's name, the endpoint's
  path, the pod's port the Service's `metrics` targetPort names — with a 2 s interval
  instead of 60 s so a test waits seconds, not minutes;
- `kubelet_job`: kube-prometheus's kubelet ServiceMonitor's cAdvisor endpoint (job
  `kubelet`, path /metrics/cadvisor, honorLabels, the `metrics_path` label) on the node
  agent's exporter (testbed.cadvisor), every second.
The alert rules are the PrometheusRule's spec.
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.parse
import urllib.request
from typing import Any

import yaml

from testbed.cluster import REPO_ROOT, Testbed, TestbedError, port_in_use, tail

MONITORING = REPO_ROOT / "deploy" / "overlays" / "monitoring"
#: Offset from the port base (the control plane uses base .. base+4).
PORT_OFFSET = 5
SCRAPE_INTERVAL = "2s"
KUBELET_INTERVAL = "1s"


def slot(worker: str | None) -> tuple[str, int]:
    """Prometheus's state name and port offset for a pytest-xdist worker (`gw1`, ...): one
    pytest without xdist (or its first worker) keeps `prometheus` on base+5."""
    n = int(worker[2:]) if worker and worker.startswith("gw") and worker[2:].isdigit() else 0
    return ("prometheus", PORT_OFFSET) if n == 0 else (f"prometheus-{n}", 20 + n)


def port(tb: Testbed, worker: str | None = None) -> int:
    return tb.ports.base + slot(worker)[1]


def scrape_config(pod_ip: str, pod_name: str, metrics_port: int) -> dict[str, Any]:
    """The scrape job of the ServiceMonitor (and Service) in deploy/, for one pod."""
    monitor = yaml.safe_load((MONITORING / "servicemonitor.yaml").read_text())
    service = yaml.safe_load((REPO_ROOT / "deploy" / "base" / "service.yaml").read_text())
    (endpoint,) = monitor["spec"]["endpoints"]
    return {
        "job_name": service["metadata"]["name"],
        "metrics_path": endpoint["path"],
        "honor_labels": bool(endpoint.get("honorLabels", False)),
        "scrape_interval": SCRAPE_INTERVAL,
        "scrape_timeout": "1s",
        "static_configs": [
            {
                "targets": [f"{pod_ip}:{metrics_port}"],
                "labels": {
                    "namespace": monitor["spec"]["namespaceSelector"]["matchNames"][0],
                    "service": service["metadata"]["name"],
                    "pod": pod_name,
                },
            }
        ],
    }


def kubelet_job(tb: Testbed) -> dict[str, Any]:
    """The scrape job kube-prometheus's kubelet ServiceMonitor makes of its cAdvisor endpoint,
    on the node agent's exporter: its series carry `node` themselves (honor_labels), where
    the Operator relabels it from the endpoint's Node."""
    return {
        "job_name": "kubelet",
        "metrics_path": "/metrics/cadvisor",
        "honor_labels": True,
        "honor_timestamps": False,
        "scrape_interval": KUBELET_INTERVAL,
        "scrape_timeout": "1s",
        "static_configs": [
            {
                "targets": [f"127.0.0.1:{tb.ports.cadvisor}"],
                "labels": {"service": "kubelet", "endpoint": "https-metrics"},
            }
        ],
        "relabel_configs": [
            {"source_labels": ["__metrics_path__"], "target_label": "metrics_path"}
        ],
    }


def start(tb: Testbed, *jobs: dict[str, Any], worker: str | None = None) -> str:
    """Start Prometheus with `jobs` and the PrometheusRule's alerts; returns its base URL.

    `worker`: the pytest-xdist worker (PYTEST_XDIST_WORKER), whose own Prometheus it is."""
    exe = shutil.which("prometheus")
    if exe is None:
        raise TestbedError("`prometheus` is not installed: run `make deps`")
    name = slot(worker)[0]
    listen = port(tb, worker)
    if port_in_use(listen):
        raise TestbedError(
            f"port {listen} (Prometheus) is in use on 127.0.0.1: another test bed may be up, "
            "or set TIDB_BENCH_TESTBED_PORT_BASE to another base port"
        )
    home = tb.state / name
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    rule = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    (home / "rules.yaml").write_text(yaml.safe_dump(rule["spec"]))
    config = {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
        "rule_files": [str(home / "rules.yaml")],
        "scrape_configs": list(jobs),
    }
    (home / "prometheus.yml").write_text(yaml.safe_dump(config))
    tb._spawn(
        name,
        [
            exe,
            f"--config.file={home / 'prometheus.yml'}",
            f"--storage.tsdb.path={home / 'data'}",
            f"--web.listen-address=127.0.0.1:{listen}",
            "--web.enable-lifecycle",
            "--log.level=warn",
        ],
    )
    url = f"http://127.0.0.1:{listen}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        tb._alive_or_raise(name)
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                if r.status == 200:
                    return url
        except OSError:
            pass
        time.sleep(0.3)
    raise TestbedError(
        f"Prometheus not ready in 30 s; log: {tb.log_of(name)}\n" + tail(tb.log_of(name))
    )


def stop(tb: Testbed, worker: str | None = None) -> None:
    """Stop that Prometheus (its data stays until the next start)."""
    from testbed.cluster import stop_pidfile

    stop_pidfile(tb.state / f"{slot(worker)[0]}.pid")


def api(url: str, path: str, **params: str) -> Any:
    """GET /api/v1/<path>; the `data` of a success, else an AssertionError with the error."""
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    with urllib.request.urlopen(f"{url}/api/v1/{path}{query}", timeout=10) as r:
        body = json.loads(r.read())
    if body.get("status") != "success":
        raise AssertionError(f"Prometheus {path} {params}: {body}")
    return body["data"]


def query(url: str, expr: str) -> list[dict[str, Any]]:
    """An instant query's result vector (or matrix/scalar as Prometheus returns it)."""
    data = api(url, "query", query=expr)
    result = data["result"]
    if data["resultType"] == "scalar":
        return [{"metric": {}, "value": result}]
    return list(result)


def firing(url: str, alertname: str) -> list[dict[str, Any]]:
    """Alerts of that name in state `firing` (GET /api/v1/alerts)."""
    return [
        a
        for a in api(url, "alerts")["alerts"]
        if a["labels"].get("alertname") == alertname and a["state"] == "firing"
    ]
