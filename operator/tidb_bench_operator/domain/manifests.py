"""Pure builders of the Kubernetes manifests the controller creates (Jobs, ConfigMaps, Events).

Why over 500 lines: every object the controller creates is built here, because they share
the names, labels, owner references and the run's resolved endpoint; split by object, each
part would import the others' helpers.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tidb_bench_operator.domain.api import load_shape
from tidb_bench_operator.domain.api.common import API_VERSION
from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
from tidb_bench_operator.domain.api.run_status import ResolvedEndpoint
from tidb_bench_operator.domain.cluster.tls import mount_mysql_tls, tls_runner_args
from tidb_bench_operator.domain.cluster.view import V1_KIND, ClusterView, anti_affinity_selector
from tidb_bench_operator.domain.sysbench.custom import WORKLOADS_DIR

DEFAULT_IMAGE = "ghcr.io/tidb-bench/tidb-bench-operator:0.1.0"
# The node name label the kubelet sets (docs/tidb-operator.md); the labels TiDB Operator
# puts on a cluster's pods live with the cluster view (domain/cluster_view.py).
LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_RUN = "tidbbench.io/run"
LABEL_STEP = "tidbbench.io/step"
LABEL_CLIENT = "tidbbench.io/client"
#: Which trial of its step a Job measures (spec.repeats: every step once per round).
LABEL_ROUND = "tidbbench.io/round"
LABEL_ROLE = "tidbbench.io/role"
#: On every runner pod: what it holds while it runs, as JSON (`holds_annotation`), so that a
#: restarted controller finds the cluster a deleted run's pods still hold (domain/queue.py,
#: ghosts_left): there is no run left to read it from.
ANNOTATION_HOLDS = "tidbbench.io/holds"
MANAGED_BY = {
    "app.kubernetes.io/name": "tidb-bench",
    "app.kubernetes.io/managed-by": "tidb-bench-operator",
}
# Benchmark pods run as this ServiceAccount: nothing is bound to it and no token is mounted,
# so a compromised runner holds no Kubernetes credentials (deploy/ grants it nothing).
RUNNER_SERVICE_ACCOUNT = "tidb-bench-runner"
PASSWORD_ENV = "TIDB_BENCH_PASSWORD"
#: The runner's user and group; a TLS Secret volume's files are readable by that group only.
RUNNER_UID = 65532
USER_ENV = "TIDB_BENCH_USER"
# Seconds between creating a step's Jobs and the start time their pods wait for: long
# enough for the scheduler and image pulls on a warm node, short enough not to waste time.
START_LEAD_SECONDS = 8
#: Seconds a benchmark pod gets between SIGTERM and SIGKILL: the runner stops sysbench at
#: once (runner.Stopper), so a deleted run's load ends within seconds, not half a minute.
RUNNER_GRACE_SECONDS = 10
# A client that starts more than this after the agreed start makes the step invalid.
MAX_START_SKEW_SECONDS = 3


@dataclass(frozen=True)
class RunRef:
    """The BenchmarkRun a manifest belongs to (for names, labels and the owner reference)."""

    name: str
    namespace: str
    uid: str


@dataclass(frozen=True)
class Endpoint:
    """Where the database and PD are, derived from `cluster` or taken from `target`."""

    host: str
    port: int
    pd_url: str | None
    cluster_name: str | None
    cluster_namespace: str
    # TidbCluster (TiDB Operator v1) or Cluster (v2): whose labels the cluster's pods carry.
    cluster_kind: str | None = None
    # v2: the TiDBGroup whose Service `host` is (None when target.host overrides it).
    tidb_group: str | None = None
    # Client certificate Secrets (domain/tls.py); None: that connection is plain.
    pd_tls_secret: str | None = None
    mysql_tls_secret: str | None = None
    # v2.1: the Secret with PD's CA when the cluster keeps it apart from the cert/key pair.
    pd_tls_ca_secret: str | None = None


def compute_endpoint(
    spec: BenchmarkRunSpec, run_namespace: str, view: ClusterView | None = None
) -> Endpoint:
    """TiDB and PD addresses: `target` wins, else the cluster's, from `view` when read.

    Without a view (the cluster not read yet) the addresses are TiDB Operator v1's
    Service names for a TidbCluster.
    """
    cluster_ns = run_namespace
    cluster_name = None
    kind = tidb_group = None
    host, port, pd_url = "", 4000, None
    if spec.cluster is not None:
        cluster_name = spec.cluster.name
        cluster_ns = spec.cluster.namespace or run_namespace
        kind = spec.cluster.kind
        # `<tc>-tidb` exists only when spec.tidb.service is set (docs/tidb-operator.md); the
        # namespace-qualified name works from the run's namespace too.
        host = f"{cluster_name}-tidb.{cluster_ns}"
        pd_url = f"http://{cluster_name}-pd.{cluster_ns}:2379"
        if view is not None:
            kind, pd_url, host = view.kind, view.pd_url, ""
            if view.tidb is not None:  # a v2 Cluster may have no TiDBGroup at all
                host, port, tidb_group = view.tidb.host, view.tidb.port, view.tidb.group
    if spec.target is not None:
        if spec.target.host:
            host, port, tidb_group = spec.target.host, spec.target.port, None
        else:
            port = spec.target.port if "port" in spec.target.model_fields_set else port
        pd_url = spec.target.pd_url or pd_url
    return Endpoint(host, port, pd_url, cluster_name, cluster_ns, kind, tidb_group)


def resolved_endpoint(endpoint: Endpoint) -> ResolvedEndpoint:
    """The endpoint as status.endpoint keeps it, so later reconciles need not read again."""
    return ResolvedEndpoint(
        cluster_kind=endpoint.cluster_kind,
        host=endpoint.host,
        port=endpoint.port,
        pd_url=endpoint.pd_url,
        tidb_group=endpoint.tidb_group,
        pd_tls_secret=endpoint.pd_tls_secret,
        mysql_tls_secret=endpoint.mysql_tls_secret,
        pd_tls_ca_secret=endpoint.pd_tls_ca_secret,
    )


def endpoint_of(
    spec: BenchmarkRunSpec, run_namespace: str, resolved: ResolvedEndpoint | None
) -> Endpoint:
    """The run's endpoint: as resolved into status.endpoint, else computed from the spec."""
    if resolved is None:
        return compute_endpoint(spec, run_namespace)
    base = compute_endpoint(spec, run_namespace)
    return Endpoint(
        resolved.host,
        resolved.port,
        resolved.pd_url,
        base.cluster_name,
        base.cluster_namespace,
        resolved.cluster_kind,
        resolved.tidb_group,
        resolved.pd_tls_secret,
        resolved.mysql_tls_secret,
        resolved.pd_tls_ca_secret,
    )


def object_name(*parts: str, limit: int = 63) -> str:
    """A DNS-label name from parts; long names keep a hash suffix so they stay unique."""
    name = "-".join(parts)
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: limit - 9].rstrip('-')}-{digest}"


def label_value(name: str) -> str:
    """A run or schedule name as a label value: names may have 253 characters, labels 63.

    Longer names keep their beginning and a hash, like object names, so selectors stay exact.
    """
    return object_name(name)


def owner_name(metadata: Mapping[str, Any], kind: str) -> str | None:
    """The name of the object's first owner of `kind` (labels may hold a shortened one)."""
    owners = metadata.get("ownerReferences")
    for owner in owners if isinstance(owners, list) else []:
        # Saved files are read too (`tidb-bench report`): skip entries of the wrong shape.
        if isinstance(owner, Mapping) and owner.get("kind") == kind and owner.get("name"):
            return str(owner["name"])
    return None


def step_job_name(run: str, step: int, client: int, round_: int = 0, attempt: int = 0) -> str:
    """Deterministic Job name: re-creating after a controller restart finds the same Job.

    Round 0 keeps the name it had before repeats existed; later rounds add `r<round>`.
    A retried step's Jobs get the attempt in their names (`-a1`), so they never meet the
    Jobs of the attempt before, which may still be going away.
    """
    parts = [f"s{step}"]
    if round_:
        parts.append(f"r{round_}")
    parts.append(f"c{client}")
    if attempt:
        parts.append(f"a{attempt}")
    return object_name(run, *parts)


def owner_reference(run: RunRef) -> dict[str, Any]:
    """Owner reference to the run: deleting the run garbage-collects what it created."""
    return {
        "apiVersion": API_VERSION,
        "kind": "BenchmarkRun",
        "name": run.name,
        "uid": run.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def build_affinity(
    spec: BenchmarkRunSpec, endpoint: Endpoint, run: RunRef, step_label: str
) -> dict[str, Any]:
    """Pod anti-affinity: away from the cluster's database pods, and one client per node."""
    terms: list[dict[str, Any]] = []
    if endpoint.cluster_name is not None:
        kind = endpoint.cluster_kind or V1_KIND
        terms.append(
            {
                "labelSelector": anti_affinity_selector(kind, endpoint.cluster_name),
                "namespaces": [endpoint.cluster_namespace],
                "topologyKey": LABEL_HOSTNAME,
            }
        )
    # Clients of one step on one node would share its CPU and measure the node, not TiDB.
    clients_apart = {
        "labelSelector": {
            "matchLabels": {LABEL_RUN: label_value(run.name), LABEL_STEP: step_label}
        },
        "topologyKey": LABEL_HOSTNAME,
    }
    mode = spec.placement.anti_affinity
    if mode == "Off":
        return {}
    if mode == "Preferred":
        return {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 100, "podAffinityTerm": t} for t in [*terms, clients_apart]
                ]
            }
        }
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [*terms, clients_apart]
        }
    }


def _security_context() -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _credential_env(spec: BenchmarkRunSpec) -> list[dict[str, Any]]:
    """The user and password come only from the Secret, by env: never in args or status."""
    ref = spec.credentials
    return [
        {
            "name": USER_ENV,
            "valueFrom": {"secretKeyRef": {"name": ref.secret_ref.name, "key": ref.user_key}},
        },
        {
            "name": PASSWORD_ENV,
            "valueFrom": {"secretKeyRef": {"name": ref.secret_ref.name, "key": ref.password_key}},
        },
    ]


def holds_annotation(run: RunRef, queue: str, step_seconds: int | None) -> str:
    """The ANNOTATION_HOLDS value: the run (namespace, name, uid), its queue key and, for a
    step's pod, how long after its start its sysbench has stopped by itself (the common
    start's lead, warm-up and duration: what queue.ghost_release_at counts from a step)."""
    found: dict[str, Any] = {"run": f"{run.namespace}/{run.name}", "uid": run.uid, "queue": queue}
    if step_seconds is not None:
        found["stepSeconds"] = step_seconds
    return json.dumps(found, separators=(",", ":"), sort_keys=True)


def build_runner_job(
    run: RunRef,
    spec: BenchmarkRunSpec,
    endpoint: Endpoint,
    *,
    name: str,
    role: str,
    runner_args: list[str],
    queue: str,
    step: int | None = None,
    client: int | None = None,
    round_: int | None = None,
    active_deadline_seconds: int,
    image: str | None = None,
    workloads: Sequence[str] = (),
) -> dict[str, Any]:
    """A one-shot Job running `tidb-bench runner ...` on a bench node; `queue` is the queue
    key of its cluster (domain/queue.py), kept on its pod (ANNOTATION_HOLDS). The
    ConfigMaps of the custom workloads among `workloads` are mounted read-only."""
    labels = {**MANAGED_BY, LABEL_RUN: label_value(run.name), LABEL_ROLE: role}
    step_label = "prepare" if step is None else str(step)
    if step is not None:
        labels[LABEL_STEP] = str(step)
    if round_ is not None:
        labels[LABEL_ROUND] = str(round_)
    if client is not None:
        labels[LABEL_CLIENT] = str(client)
    resources: dict[str, Any] = {}
    if spec.resources.requests:
        resources["requests"] = dict(spec.resources.requests)
    if spec.resources.limits:
        resources["limits"] = dict(spec.resources.limits)
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": RUNNER_GRACE_SECONDS,
        # The runner needs no Kubernetes API access at all.
        "serviceAccountName": RUNNER_SERVICE_ACCOUNT,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "nodeSelector": dict(spec.placement.node_selector),
        "tolerations": [
            t.model_dump(by_alias=True, exclude_none=True) for t in spec.placement.tolerations
        ],
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUNNER_UID,
            "runAsGroup": RUNNER_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {
                "name": "runner",
                "image": spec.image or image or DEFAULT_IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "command": ["tidb-bench", "runner"],
                "args": runner_args,
                "env": _credential_env(spec),
                "resources": resources,
                "securityContext": _security_context(),
                "terminationMessagePolicy": "FallbackToLogsOnError",
                "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
            }
        ],
        "volumes": [{"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}}],
    }
    step_seconds = START_LEAD_SECONDS + spec.warmup_seconds + spec.duration_seconds
    if endpoint.mysql_tls_secret:
        mount_mysql_tls(pod_spec, endpoint.mysql_tls_secret, RUNNER_UID)
    mount_custom_workloads(pod_spec, spec, workloads)
    # Dataset Jobs keep away from the database pods too: they load the same node.
    affinity = build_affinity(spec, endpoint, run, step_label)
    if affinity:
        pod_spec["affinity"] = affinity
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": run.namespace,
            "labels": labels,
            "ownerReferences": [owner_reference(run)],
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": active_deadline_seconds,
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {
                        ANNOTATION_HOLDS: holds_annotation(
                            run, queue, None if step is None else step_seconds
                        )
                    },
                },
                "spec": pod_spec,
            },
        },
    }


def mount_custom_workloads(
    pod_spec: dict[str, Any], spec: BenchmarkRunSpec, workloads: Sequence[str]
) -> None:
    """A read-only ConfigMap volume per custom workload among `workloads`: every key a file
    in WORKLOADS_DIR/<name>/, so a script's `require` finds its siblings (custom.py)."""
    for name in workloads:
        custom = spec.custom_workload(name)
        if custom is None:
            continue
        volume = f"workload-{name}"
        pod_spec["volumes"].append(
            {"name": volume, "configMap": {"name": custom.config_map_ref.name}}
        )
        pod_spec["containers"][0]["volumeMounts"].append(
            {"name": volume, "mountPath": f"{WORKLOADS_DIR}/{name}", "readOnly": True}
        )


#: The dataset Job's --workload when the run has no built-in test: no sbtest tables.
NO_BUILTIN = "none"


def _workload_args(spec: BenchmarkRunSpec, namespace: str, workload: str) -> list[str]:
    """A custom workload's `--custom=` (its script, source, options and args); a built-in
    test's spec.extraArgs (which never apply to a custom workload)."""
    custom = spec.custom_workload(workload)
    if custom is not None:
        return [f"--custom={custom.script_for(namespace).to_arg()}"]
    return [f"--sysbench-arg={a}" for a in spec.extra_args]


def build_runner_service_account(namespace: str) -> dict[str, Any]:
    """The runner's ServiceAccount in a run's namespace: shared by every run there, no token."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": RUNNER_SERVICE_ACCOUNT,
            "namespace": namespace,
            "labels": dict(MANAGED_BY),
        },
        "automountServiceAccountToken": False,
    }


def build_step_runner_args(
    spec: BenchmarkRunSpec,
    endpoint: Endpoint,
    *,
    workload: str,
    threads: int,
    start_at: datetime | None,
    rate: int | None = None,
    namespace: str = "",
) -> list[str]:
    """Arguments of `tidb-bench runner step`: everything but the credentials.

    `start_at` is the rendezvous of a step's clients; None (one client) starts at once.
    `rate` is this client's share of a rate step's target (sysbench --rate).
    """
    args = [
        "step",
        f"--workload={workload}",
        f"--threads={threads}",
        f"--duration={spec.duration_seconds}",
        f"--warmup={spec.warmup_seconds}",
        f"--report-interval={spec.report_interval_seconds}",
        f"--percentile={spec.percentile}",
        f"--host={endpoint.host}",
        f"--port={endpoint.port}",
        f"--db={spec.database}",
        f"--tables={spec.dataset.tables}",
        f"--table-size={spec.dataset.table_size}",
    ]
    if start_at is not None:
        args += [f"--start-at={start_at.isoformat()}", f"--max-start-skew={MAX_START_SKEW_SECONDS}"]
    args += load_shape.runner_args(spec, workload, threads, rate)
    if spec.ignore_errors:
        args.append(f"--ignore-errors={spec.ignore_errors}")
    args.append(f"--auto-inc={'on' if spec.dataset.auto_inc else 'off'}")
    args += tls_runner_args(endpoint.mysql_tls_secret)
    args += _workload_args(spec, namespace, workload)
    return args


def build_dataset_runner_args(
    spec: BenchmarkRunSpec,
    endpoint: Endpoint,
    *,
    action: str,
    workload: str | None = None,
    namespace: str = "",
) -> list[str]:
    """Arguments of `tidb-bench runner prepare|cleanup` for the run's dataset: the sbtest
    tables when a built-in test is among spec.workloads (the first one's), and each custom
    workload's own prepare or cleanup (`--custom=`, one per workload)."""
    builtin = spec.builtin_workloads()
    workload = workload or (builtin[0] if builtin else NO_BUILTIN)
    args = [
        action,
        f"--workload={workload}",
        f"--host={endpoint.host}",
        f"--port={endpoint.port}",
        f"--db={spec.database}",
        f"--tables={spec.dataset.tables}",
        f"--table-size={spec.dataset.table_size}",
        f"--auto-inc={'on' if spec.dataset.auto_inc else 'off'}",
    ]
    if action == "prepare":
        args.append(f"--policy={spec.dataset.prepare}")
        args.append(f"--analyze={'on' if spec.dataset.analyze else 'off'}")
        args.append(f"--warm-up={'on' if spec.dataset.warm_up else 'off'}")
    args += tls_runner_args(endpoint.mysql_tls_secret)
    args += [f"--sysbench-arg={a}" for a in spec.extra_args]
    args += [f"--custom={w.script_for(namespace).to_arg()}" for w in spec.custom_workloads]
    return args


def build_results_configmap(run: RunRef, name: str, data: dict[str, str]) -> dict[str, Any]:
    """One ConfigMap of the run's results store (domain.results_store), owned by the run."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": run.namespace,
            "labels": {**MANAGED_BY, LABEL_RUN: label_value(run.name), LABEL_ROLE: "results"},
            "ownerReferences": [owner_reference(run)],
        },
        "data": data,
    }


def build_event(
    run: RunRef,
    *,
    reason: str,
    message: str,
    type_: str,
    now: datetime,
    name_suffix: str,
    component: str = "tidb-bench-operator",
    kind: str = "BenchmarkRun",
) -> dict[str, Any]:
    """A core/v1 Event about the run, or about a BenchmarkSchedule with kind=...

    Messages are capped at 1 KiB as kubectl shows them.
    """
    ts = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": object_name(run.name, name_suffix, limit=253),
            "namespace": run.namespace,
        },
        "involvedObject": {
            "apiVersion": API_VERSION,
            "kind": kind,
            "name": run.name,
            "namespace": run.namespace,
            "uid": run.uid,
        },
        "reason": reason,
        "message": message[:1024],
        "type": type_,
        "source": {"component": component},
        "firstTimestamp": ts,
        "lastTimestamp": ts,
        "count": 1,
    }


# --------------------------------------------------------------------------- schedules

LABEL_SCHEDULE = "tidbbench.io/schedule"
#: The fire time a scheduled run was made for (RFC 3339, UTC); absent on manual runs.
ANNOTATION_SCHEDULED_AT = "tidbbench.io/scheduled-at"


def build_scheduled_run(
    schedule: RunRef, run_name: str, scheduled_time: datetime | None, template: dict[str, Any]
) -> dict[str, Any]:
    """The BenchmarkRun a BenchmarkSchedule makes: its template as written, labelled and owned.

    The template is copied as the user wrote it (not re-serialised from the model) so the
    run shows exactly what Git holds; deleting the schedule garbage-collects its runs.
    """
    metadata: dict[str, Any] = {
        "name": run_name,
        "namespace": schedule.namespace,
        "labels": {**MANAGED_BY, LABEL_SCHEDULE: label_value(schedule.name)},
        "ownerReferences": [
            {
                "apiVersion": API_VERSION,
                "kind": "BenchmarkSchedule",
                "name": schedule.name,
                "uid": schedule.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if scheduled_time is not None:
        metadata["annotations"] = {
            ANNOTATION_SCHEDULED_AT: scheduled_time.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        }
    return {
        "apiVersion": API_VERSION,
        "kind": "BenchmarkRun",
        "metadata": metadata,
        "spec": json.loads(json.dumps(template)),
    }
