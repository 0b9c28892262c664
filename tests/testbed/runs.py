"""Helpers for e2e tests of BenchmarkRuns: manifests against the MariaDB stand-in, waiting."""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from testbed.kube import BENCH_LABEL, create_standin_cluster
from testbed.tidb_proxy import TidbProxy

GROUP, VERSION, PLURAL = "tidbbench.io", "v1alpha1", "benchmarkruns"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BENCH_PLACEMENT = {
    "nodeSelector": {BENCH_LABEL: "true"},
    "tolerations": [
        {
            "key": "node-role.kubernetes.io/control-plane",
            "operator": "Exists",
            "effect": "NoSchedule",
        }
    ],
}


def database_of(mariadb: dict[str, Any]) -> dict[str, str]:
    """spec.database for the stand-in: none for its default `sbtest`, else the pytest-xdist
    worker's own (e2e/conftest.py's `mariadb`)."""
    name = str(mariadb.get("database") or "sbtest")
    return {} if name == "sbtest" else {"database": name}


def run_manifest(
    name: str, mariadb: dict[str, Any], *, pd_url: str | None = None, **spec: Any
) -> dict[str, Any]:
    """A small, fast BenchmarkRun against the MariaDB stand-in on the bench node.

    `pd_url`: the PD the run reads (spec.target.pdURL), e.g. a FakePD's.
    """
    body: dict[str, Any] = {
        "target": {"host": str(mariadb["host"]), "port": int(mariadb["port"])},
        **database_of(mariadb),
        "credentials": {"secretRef": {"name": "db"}},
        "workloads": ["oltp_point_select"],
        "threads": [2, 4],
        "durationSeconds": 3,
        "reportIntervalSeconds": 1,
        "dataset": {"tables": 1, "tableSize": 1000},
        "placement": copy.deepcopy(BENCH_PLACEMENT),
        "preflight": {"policy": "Off"},
    }
    body.update(spec)
    if pd_url is not None:
        body["target"]["pdURL"] = pd_url
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "BenchmarkRun",
        "metadata": {"name": name},
        "spec": body,
    }


def add_db_secret(core: client.CoreV1Api, namespace: str, mariadb: dict[str, Any]) -> None:
    """The Secret `db` with the MariaDB stand-in's user and password (what run_manifest names)."""
    core.create_namespaced_secret(
        namespace,
        {
            "metadata": {"name": "db"},
            "stringData": {"user": str(mariadb["user"]), "password": str(mariadb["password"])},
        },
    )


def example_manifest(file: str, mariadb: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """An examples/ run pointed at the stand-in: target, Secret and bench placement replaced."""
    doc = yaml.safe_load((EXAMPLES / file).read_text())
    spec = doc["spec"]
    spec.pop("cluster", None)
    spec["target"] = {"host": str(mariadb["host"]), "port": int(mariadb["port"])}
    spec["credentials"] = {"secretRef": {"name": "db"}}
    spec["placement"] = copy.deepcopy(BENCH_PLACEMENT)
    spec.update(database_of(mariadb))
    spec.update(overrides)
    doc["metadata"] = {"name": doc["metadata"]["name"]}
    return dict(doc)


def fast_example(file: str, mariadb: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """`example_manifest` cut to a few seconds: two short steps, no warm-up, a small table."""
    fast: dict[str, Any] = {
        "threads": [2, 4],
        "durationSeconds": 3,
        "warmupSeconds": 0,
        "reportIntervalSeconds": 1,
        "dataset": {"tables": 1, "tableSize": 1000},
    }
    return example_manifest(file, mariadb, **{**fast, **overrides})


def create_run(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    return dict(
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, body
        )
    )


def get_run(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    return dict(
        client.CustomObjectsApi(api).get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name
        )
    )


def wait_run(
    api: client.ApiClient,
    namespace: str,
    name: str,
    phases: tuple[str, ...] = ("Succeeded", "Failed"),
    timeout: float = 180,
) -> dict[str, Any]:
    """Poll until the run's phase is one of `phases`; the last object on timeout in the error.

    A 5xx from the API server is polled through (the regression test plants a CPU hog that
    once starved the 2-core test bed's etcd into a 504), and named if the wait times out.
    """
    deadline = time.monotonic() + timeout
    run: dict[str, Any] = {}
    server_errors: list[str] = []
    while time.monotonic() < deadline:
        try:
            run = get_run(api, namespace, name)
        except ApiException as exc:
            if exc.status is None or exc.status < 500:
                raise
            server_errors.append(f"{exc.status} {exc.reason}")
            time.sleep(1)
            continue
        if (run.get("status") or {}).get("phase") in phases:
            return run
        time.sleep(0.5)
    raise TimeoutError(
        f"run {namespace}/{name} not in {phases} after {timeout}s: {run.get('status')}"
        + (f" (API server errors meanwhile: {server_errors})" if server_errors else "")
        + controller_log_tail()
    )


#: Set by the e2e session's controller (e2e/conftest.py) to the file it logs to.
CONTROLLER_LOG_ENV = "TIDB_BENCH_E2E_CONTROLLER_LOG"
#: kopf's lines at every (re)start: they say nothing about why a run did not move.
_STARTUP_NOISE = ("authentication", "login_via_client", "Activity 'configure'")


def controller_log_tail(lines: int = 15) -> str:
    """The last lines of the session controller's log, for a timeout's message: the test
    bed (and its logs) is gone once CI has run, and pytest's output is all that is kept."""
    path = os.environ.get(CONTROLLER_LOG_ENV)
    if not path or not os.path.exists(path):
        return ""
    with open(path, errors="replace") as f:
        kept = [line.rstrip()[:300] for line in f if not any(n in line for n in _STARTUP_NOISE)]
    return f"\n-- the last lines of {os.path.basename(path)}:\n" + "\n".join(kept[-lines:])


def run_events(core: client.CoreV1Api, namespace: str, name: str) -> list[Any]:
    evs = core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name},involvedObject.kind=BenchmarkRun"
    ).items
    # etcd revisions grow monotonically: creation order even within one second.
    return sorted(evs, key=lambda e: int(e.metadata.resource_version))


def jobs_of(api: client.ApiClient, namespace: str, run: str) -> list[Any]:
    return list(
        client.BatchV1Api(api)
        .list_namespaced_job(namespace, label_selector=f"tidbbench.io/run={run}")
        .items
    )


def tidb_bench_report(kubeconfig: Path, *args: str) -> str:
    """`tidb-bench report ARGS` against the test bed (the installed command, as users run
    it); its Markdown. Fails with the command's stderr when it exits non-zero."""
    import subprocess
    import sys

    command = [str(Path(sys.executable).parent / "tidb-bench"), "report", *args]
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}: {done.stderr}"
    return done.stdout


def disturbances_of(run: dict[str, Any]) -> list[str]:
    """Every disturbance the guard recorded on the run's steps and trials, as text."""
    out = []
    for step in (run.get("status") or {}).get("steps") or []:
        found = list(step.get("disturbances") or [])
        for trial in step.get("trials") or []:
            found += trial.get("disturbances") or []
        out += [
            f"step {step['index'] + 1}: {d['what']} {d['object']}: {d['message']}" for d in found
        ]
    return out


def assert_quiet(run: dict[str, Any]) -> None:
    """A run nothing disturbed: the guard recorded no disturbance on any step (no false alarm)."""
    found = disturbances_of(run)
    assert found == [], f"the guard flagged a quiet run: {found}"


def checks_of(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The run's preflight checks by name."""
    return {c["name"]: c for c in run["status"]["preflight"]["checks"]}


def assert_blocked_only_by(run: dict[str, Any], check: str) -> None:
    """The run's message names `check`, and every other preflight check passed."""
    assert check in run["status"]["message"]
    others = {n: c["status"] for n, c in checks_of(run).items() if n != check}
    assert set(others.values()) == {"Pass"}, others


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    """The object's status condition of that type; {} when it has none."""
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return dict(c)
    return {}


@dataclass(frozen=True)
class RunBed:
    """What an e2e test of a run works in: a fresh namespace holding the Secret `db` for the
    MariaDB stand-in, and builders for what goes in it (runs, stand-in TiDB clusters).

    The `bed` fixture (tests/e2e/conftest.py) makes one; the controller is a fixture of its
    own (`controller`, or a module's), so a test names the one it runs under.
    """

    api: client.ApiClient
    core: client.CoreV1Api
    namespace: str
    mariadb: dict[str, Any]
    #: What `close` undoes, last first (the `bed` fixture calls it at teardown).
    cleanups: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        while self.cleanups:
            self.cleanups.pop()()

    def tidb_proxy(
        self, cluster: str, *, migrate: bool = False, ready_seconds: float = 0.0
    ) -> TidbProxy:
        """A started testbed.tidb_proxy.TidbProxy in front of this bed's MariaDB for the TiDB
        stand-in pods of `cluster` in this namespace, stopped at teardown. A run's SQL goes
        through it with `target=proxy.target` (spec.target: 127.0.0.1 and the proxy's port).
        `migrate`, `ready_seconds`: as TidbProxy's (TiDB behind TiProxy)."""
        upstream = (str(self.mariadb["host"]), int(self.mariadb["port"]))
        proxy = TidbProxy(
            self.api, self.namespace, cluster, upstream, migrate=migrate,
            ready_seconds=ready_seconds,
        ).start()  # fmt: skip
        self.cleanups.append(proxy.stop)
        return proxy

    def manifest(self, name: str, **spec: Any) -> dict[str, Any]:
        """`run_manifest` against this bed's MariaDB (pd_url= and spec fields as there)."""
        return run_manifest(name, self.mariadb, **spec)

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        return create_run(self.api, self.namespace, body)

    def start(self, name: str, **spec: Any) -> dict[str, Any]:
        """Create `manifest(name, **spec)`."""
        return self.create(self.manifest(name, **spec))

    def get(self, name: str) -> dict[str, Any]:
        return get_run(self.api, self.namespace, name)

    def wait(
        self,
        name: str,
        phases: tuple[str, ...] = ("Succeeded", "Failed"),
        timeout: float = 180,
    ) -> dict[str, Any]:
        return wait_run(self.api, self.namespace, name, phases, timeout)

    def events(self, name: str) -> list[Any]:
        return run_events(self.core, self.namespace, name)

    def jobs(self, run: str) -> list[Any]:
        return jobs_of(self.api, self.namespace, run)

    def cluster(self, name: str, placement: dict[str, list[str]], **options: Any) -> list[str]:
        """A stand-in TiDB cluster in this namespace: testbed.kube.create_standin_cluster
        (placement maps a component to its replicas' nodes; spread=, exec_commands=, tls=)."""
        return create_standin_cluster(self.api, self.namespace, name, placement, **options)

    def annotate(self, pod: str, notes: dict[str, str | None]) -> None:
        """Set (None: remove) annotations of a pod in this namespace, e.g. a stand-in's
        `testbed.tidbbench.io/burn` or `cpu-of` (testbed.cadvisor), which the node agent
        applies to the live pod at once."""
        self.core.patch_namespaced_pod(pod, self.namespace, {"metadata": {"annotations": notes}})


def why_not(st: dict[str, Any]) -> str:
    """A run's outcome in a few lines: its conditions, then each step's validity, notes and
    disturbances (pytest cuts a whole status short before the part that says why)."""
    lines = [f"phase {st.get('phase')}"]
    lines += [
        f"{c.get('type')}={c.get('status')} {c.get('reason')}: {c.get('message')}"
        for c in st.get("conditions") or []
    ]
    for s in st.get("steps") or []:
        lines.append(
            f"step {s.get('index')} {s.get('phase')} valid={s.get('valid')} "
            f"attempt={s.get('attempt')} notes={s.get('notes')} "
            f"disturbances={[(d.get('what'), d.get('object'), d.get('message')) for d in s.get('disturbances') or []]}"
        )
    return "\n".join(lines)
