"""The unit tests' one in-memory stand-in for adapters.k8s.Kube: dicts keyed by (namespace, name).

It serves every consumer's Protocol (tests/conformance.py checks them): the run
reconciler's RunKube, the preflight gate's ClusterReader, PD's PodLister and the schedule
reconciler's ScheduleKube. It behaves like the API server where they depend on it: objects
come back as fresh copies (mutating a result changes nothing stored), creating an existing
Job or run returns the stored one, Jobs and runs get a uid and a creationTimestamp from the
shared clock, status patches are merge patches, and pods of a Job carry the
`controller-uid` label the Job controller sets. Tests play the part of the Job controller
and the scheduler with `finish_job`, `leave_unschedulable` and `schedule`; `asked` lists
the cluster reads in order, and `nodes_error` makes listing nodes fail.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from tidb_bench_operator.errors import KubeError, KubeForbidden

JSON = dict[str, Any]
Key = tuple[str, str]


class FakeClock:
    """A clock that moves only when told to (shared by the reconciler and FakeKube)."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2024, 6, 1, 2, 0, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


def rfc3339(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _terms(selector: str) -> list[str]:
    """The selector's terms: split at commas outside `in (a,b)` sets."""
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(selector):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            terms.append(selector[start:i])
            start = i + 1
    terms.append(selector[start:])
    return [t.strip() for t in terms if t.strip()]


def matches(labels: dict[str, str] | None, selector: str) -> bool:
    """Label selector: `k=v,k2==v2,k3!=v3,k4,k5 in (a,b)` (what the reconciler sends)."""
    labels = labels or {}
    for term in _terms(selector):
        if " in (" in term:
            k, values = term.split(" in (", 1)
            if labels.get(k.strip()) not in {v.strip() for v in values.rstrip(")").split(",")}:
                return False
        elif "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k.strip()) == v.strip():
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k.strip()) != v.strip():
                return False
        elif term not in labels:
            return False
    return True


class FakeKube:
    """The reconciler's `kube`: the same methods as adapters.k8s.Kube, kept in dicts."""

    def __init__(self, clock: Callable[[], datetime] | None = None) -> None:
        self.clock = clock or (lambda: datetime.now(UTC).replace(microsecond=0))
        self.secrets: dict[Key, dict[str, str]] = {}
        self.node_list: list[JSON] = []
        self.pod_store: dict[Key, JSON] = {}
        self.job_store: dict[Key, JSON] = {}
        self.configmaps: dict[Key, JSON] = {}
        self.runs: dict[Key, JSON] = {}
        self.tidbclusters: dict[Key, JSON] = {}
        # TiDB Operator v2: Clusters, and PD/TiKV/TiDB groups (any kind) by (namespace, name).
        self.v2_clusters: dict[Key, JSON] = {}
        self.v2_group_store: dict[tuple[str, str, str], JSON] = {}
        self.logs: dict[tuple[str, str, str], str] = {}
        self.events: list[JSON] = []
        self.service_accounts: dict[Key, JSON] = {}
        # Every create_job call, and the names of Jobs actually created or deleted.
        self.create_job_calls: list[str] = []
        self.created_jobs: list[str] = []
        self.deleted_jobs: list[str] = []
        self.deleted_runs: list[str] = []
        # The cluster reads, in order ("nodes", "pods NS SELECTOR", "tidbcluster NS/NAME", ...).
        self.asked: list[str] = []
        #: Raised by nodes() when set: the API server failing mid-read.
        self.nodes_error: Exception | None = None
        self.experiments: dict[Key, JSON] = {}
        #: Kinds whose patch is refused (403), as without deploy/overlays/experiments.
        self.forbidden_kinds: set[str] = set()
        #: The experiment's writes in order: "status PHASE", "patch KIND {...}", "finalizers".
        self.writes: list[str] = []

    # ---- arranging the world ------------------------------------------------------------
    def add_secret(self, namespace: str, name: str, data: dict[str, str]) -> None:
        self.secrets[(namespace, name)] = dict(data)

    def add_node(
        self,
        name: str,
        labels: dict[str, str] | None = None,
        taints: list[dict[str, str]] | None = None,
    ) -> None:
        meta = {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}}
        spec = {} if taints is None else {"taints": copy.deepcopy(taints)}
        self.node_list.append({"metadata": meta, "spec": spec})

    def add_run(self, body: JSON) -> None:
        meta = body["metadata"]
        self.runs[(meta["namespace"], meta["name"])] = copy.deepcopy(body)

    def add_tidb_cluster(self, body: JSON) -> None:
        meta = body["metadata"]
        self.tidbclusters[(meta["namespace"], meta["name"])] = copy.deepcopy(body)

    def add_v2(self, *objects: JSON) -> None:
        """Store v2 objects: a Cluster, or a PDGroup/TiKVGroup/TiDBGroup."""
        for body in objects:
            meta = body["metadata"]
            if body["kind"] == "Cluster":
                self.v2_clusters[(meta["namespace"], meta["name"])] = copy.deepcopy(body)
            else:
                key = (meta["namespace"], body["kind"], meta["name"])
                self.v2_group_store[key] = copy.deepcopy(body)

    def add_pod(self, pod: JSON) -> None:
        meta = pod["metadata"]
        self.pod_store[(meta["namespace"], meta["name"])] = copy.deepcopy(pod)

    # ---- playing the Job controller and the scheduler ------------------------------------
    def job(self, namespace: str, name: str) -> JSON:
        return copy.deepcopy(self.job_store[(namespace, name)])

    def job_names(self, namespace: str | None = None) -> list[str]:
        return sorted(n for (ns, n) in self.job_store if namespace in (None, ns))

    def pod_of(self, namespace: str, job_name: str) -> JSON | None:
        return self.pod_store.get((namespace, f"{job_name}-pod"))

    def _pod_for(self, namespace: str, job_name: str) -> JSON:
        """The Job's single pod (backoffLimit 0), created from its template when missing."""
        job = self.job_store[(namespace, job_name)]
        key = (namespace, f"{job_name}-pod")
        if key not in self.pod_store:
            labels = {
                **(job["spec"]["template"]["metadata"].get("labels") or {}),
                "controller-uid": job["metadata"]["uid"],
                "job-name": job_name,
            }
            self.pod_store[key] = {
                "metadata": {
                    "name": key[1],
                    "namespace": namespace,
                    "labels": labels,
                    "annotations": dict(
                        job["spec"]["template"]["metadata"].get("annotations") or {}
                    ),
                    "creationTimestamp": rfc3339(self.clock()),
                },
                "spec": copy.deepcopy(job["spec"]["template"]["spec"]),
                "status": {"phase": "Pending"},
            }
        return self.pod_store[key]

    def leave_unschedulable(
        self,
        namespace: str,
        job_name: str,
        message: str = "0/3 nodes are available: 3 node(s) didn't match Pod's node "
        "affinity/selector.",
    ) -> None:
        """The scheduler could not place the Job's pod: PodScheduled=False, Unschedulable."""
        pod = self._pod_for(namespace, job_name)
        pod["spec"].pop("nodeName", None)
        pod["status"] = {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                    "lastTransitionTime": rfc3339(self.clock()),
                }
            ],
        }

    def schedule(self, namespace: str, job_name: str, node: str = "bench-1") -> None:
        """The Job's pod is bound to `node` and running."""
        pod = self._pod_for(namespace, job_name)
        pod["spec"]["nodeName"] = node
        pod["status"] = {
            "phase": "Running",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": "runner", "state": {"running": {}}}],
        }

    def finish_job(
        self,
        namespace: str,
        job_name: str,
        document: JSON | str | None,
        *,
        exit_code: int | None = None,
        node: str = "bench-1",
        log: str = "",
    ) -> None:
        """The runner exited: `document` (a result dict, or raw text) is its termination message.

        The Job succeeds when the exit code (default: 0 for an ok document, else 1) is 0.
        """
        if exit_code is None:
            exit_code = 0 if isinstance(document, dict) and document.get("ok") else 1
        self.schedule(namespace, job_name, node)
        pod = self._pod_for(namespace, job_name)
        terminated: JSON = {
            "exitCode": exit_code,
            "reason": "Completed" if exit_code == 0 else "Error",
        }
        if document is not None:
            terminated["message"] = document if isinstance(document, str) else json.dumps(document)
        pod["status"] = {
            "phase": "Succeeded" if exit_code == 0 else "Failed",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": "runner", "state": {"terminated": terminated}}],
        }
        self.logs[(namespace, pod["metadata"]["name"], "runner")] = log
        job = self.job_store[(namespace, job_name)]
        if exit_code == 0:
            job["status"] = {
                "succeeded": 1,
                "conditions": [{"type": "Complete", "status": "True"}],
            }
        else:
            job["status"] = {
                "failed": 1,
                "conditions": [
                    {
                        "type": "Failed",
                        "status": "True",
                        "reason": "BackoffLimitExceeded",
                        "message": "Job has reached the specified backoff limit",
                    }
                ],
            }

    def container_waiting(self, namespace: str, job_name: str, reason: str, message: str) -> None:
        """The kubelet cannot start the Job's container (ErrImagePull, ImagePullBackOff, ...)."""
        self.schedule(namespace, job_name)
        pod = self._pod_for(namespace, job_name)
        image = pod["spec"]["containers"][0]["image"]
        pod["status"] = {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [
                {"name": "runner", "image": image,
                 "state": {"waiting": {"reason": reason, "message": message}}}
            ],
        }  # fmt: skip

    def kill_pod(
        self, namespace: str, job_name: str, *, reason: str, evicted: bool = False
    ) -> None:
        """The Job's pod was killed without a result: OOMKilled (137), or evicted by its node.

        The Job fails (backoffLimit 0), as the Job controller would mark it.
        """
        self.finish_job(namespace, job_name, None, exit_code=137)
        pod = self._pod_for(namespace, job_name)
        term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        term["reason"] = reason
        if evicted:
            pod["status"]["reason"] = "Evicted"
            pod["status"]["message"] = "The node was low on resource: memory."
            pod["status"]["containerStatuses"] = []

    def delete_pod(self, namespace: str, job_name: str) -> None:
        """Someone deleted the Job's pod (the Job controller has not replaced it yet)."""
        self.pod_store.pop((namespace, f"{job_name}-pod"), None)

    # ---- the Kube interface: reads -------------------------------------------------------
    def secret_keys(self, namespace: str, name: str) -> set[str] | None:
        data = self.secrets.get((namespace, name))
        return None if data is None else set(data)

    def secret_value(self, namespace: str, name: str, key: str) -> str | None:
        return (self.secrets.get((namespace, name)) or {}).get(key)

    def nodes(self) -> list[JSON]:
        self.asked.append("nodes")
        if self.nodes_error is not None:
            raise self.nodes_error
        return copy.deepcopy(self.node_list)

    def pods(self, namespace: str | None, selector: str) -> list[JSON]:
        self.asked.append(f"pods {namespace} {selector}")
        return _select(self.pod_store, namespace, selector)

    def jobs(self, namespace: str, selector: str) -> list[JSON]:
        return _select(self.job_store, namespace, selector)

    def pod_log(self, namespace: str, name: str, container: str) -> str | None:
        return self.logs.get((namespace, name, container))

    def benchmark_runs(self) -> list[JSON]:
        return [copy.deepcopy(r) for _, r in sorted(self.runs.items())]

    def benchmark_runs_in(self, namespace: str, selector: str) -> list[JSON]:
        return _select(self.runs, namespace, selector)

    def tidb_cluster(self, namespace: str, name: str) -> JSON | None:
        self.asked.append(f"tidbcluster {namespace}/{name}")
        tc = self.tidbclusters.get((namespace, name))
        return None if tc is None else copy.deepcopy(tc)

    def v2_cluster(self, namespace: str, name: str) -> JSON | None:
        self.asked.append(f"cluster {namespace}/{name}")
        found = self.v2_clusters.get((namespace, name))
        return None if found is None else copy.deepcopy(found)

    def v2_groups(self, namespace: str) -> list[JSON]:
        return [
            copy.deepcopy(g)
            for (ns, _, _), g in sorted(self.v2_group_store.items())
            if ns == namespace
        ]

    # ---- the Kube interface: writes ------------------------------------------------------
    def create_job(self, body: JSON) -> JSON:
        ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
        self.create_job_calls.append(name)
        if (ns, name) not in self.job_store:
            job = copy.deepcopy(body)
            job["metadata"]["uid"] = str(uuid.uuid4())
            job["metadata"]["creationTimestamp"] = rfc3339(self.clock())
            job["status"] = {}
            self.job_store[(ns, name)] = job
            self.created_jobs.append(name)
        return copy.deepcopy(self.job_store[(ns, name)])

    def delete_jobs(self, namespace: str, selector: str) -> int:
        doomed = [k for k, j in self.job_store.items() if _in(k, j, namespace, selector)]
        for key in doomed:
            uid = self.job_store.pop(key)["metadata"]["uid"]
            self.deleted_jobs.append(key[1])
            # Background propagation: the garbage collector removes the Job's pods.
            for pod_key, pod in list(self.pod_store.items()):
                if (pod["metadata"].get("labels") or {}).get("controller-uid") == uid:
                    del self.pod_store[pod_key]
        return len(doomed)

    def configmap(self, namespace: str, name: str) -> JSON | None:
        found = self.configmaps.get((namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def upsert_configmap(self, body: JSON) -> None:
        meta = body["metadata"]
        self.configmaps[(meta["namespace"], meta["name"])] = copy.deepcopy(body)

    def ensure_service_account(self, body: JSON) -> None:
        self.service_accounts.setdefault(
            (body["metadata"]["namespace"], body["metadata"]["name"]), copy.deepcopy(body)
        )

    def create_event(self, body: JSON) -> None:
        self.events.append(copy.deepcopy(body))

    def create_benchmark_run(self, body: JSON) -> tuple[JSON, bool]:
        """(the stored run, True), or (the run already stored under that name, False)."""
        meta = body["metadata"]
        key = (meta["namespace"], meta["name"])
        if key in self.runs:
            return copy.deepcopy(self.runs[key]), False
        run = copy.deepcopy(body)
        run["metadata"]["uid"] = str(uuid.uuid4())
        run["metadata"]["creationTimestamp"] = rfc3339(self.clock())
        self.runs[key] = run
        return copy.deepcopy(run), True

    def delete_benchmark_run(self, namespace: str, name: str) -> bool:
        self.deleted_runs.append(name)
        return self.runs.pop((namespace, name), None) is not None

    def patch_benchmark_run_status(self, namespace: str, name: str, status: JSON) -> JSON:
        """A merge patch of the stored run's status (None values remove keys); the run after."""
        run = self.runs[(namespace, name)]
        run["status"] = merge_patch(run.get("status") or {}, status)
        return copy.deepcopy(run)

    def json_patch_benchmark_run_status(self, namespace: str, name: str, ops: list[JSON]) -> JSON:
        """A JSON patch (RFC 6902: add, replace, test) of the stored run; the run after."""
        run = self.runs[(namespace, name)]
        run["status"] = json_patch(run.get("status") or {}, ops, "/status")
        return copy.deepcopy(run)

    # ---- BenchmarkExperiments and the cluster objects they patch -------------------------
    def add_experiment(self, body: JSON) -> None:
        meta = body["metadata"]
        meta.setdefault("resourceVersion", "1")
        self.experiments[(meta["namespace"], meta["name"])] = copy.deepcopy(body)

    def experiment(self, namespace: str, name: str) -> JSON:
        return copy.deepcopy(self.experiments[(namespace, name)])

    def _bumped(self, obj: JSON) -> JSON:
        obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
        return copy.deepcopy(obj)

    def patch_benchmark_experiment_status(self, namespace: str, name: str, status: JSON) -> JSON:
        obj = self.experiments[(namespace, name)]
        obj["status"] = merge_patch(obj.get("status") or {}, status)
        self.writes.append(f"status {obj['status'].get('phase')}")
        return self._bumped(obj)

    def set_benchmark_experiment_finalizers(
        self, namespace: str, name: str, finalizers: list[str], resource_version: str
    ) -> JSON:
        obj = self.experiments[(namespace, name)]
        if obj["metadata"]["resourceVersion"] != resource_version:
            raise KubeError(f"patching {namespace}/{name}: 409 Conflict")
        obj["metadata"]["finalizers"] = list(finalizers)
        self.writes.append(f"finalizers {finalizers}")
        return self._bumped(obj)

    def patch_cluster_object(
        self, kind: str, namespace: str, name: str, spec_patch: JSON, *, dry_run: bool = False
    ) -> JSON:
        if kind in self.forbidden_kinds:
            raise KubeForbidden(f"patching {kind} {namespace}/{name}: 403 forbidden")
        store: dict[Any, JSON] = self.tidbclusters if kind == "TidbCluster" else self.v2_group_store
        key: Any = (namespace, name) if kind == "TidbCluster" else (namespace, kind, name)
        obj = store[key]
        if dry_run:
            return copy.deepcopy(obj)
        obj["spec"] = merge_patch(obj.get("spec") or {}, spec_patch)
        self.writes.append(f"patch {kind} {json.dumps(spec_patch, sort_keys=True)}")
        return copy.deepcopy(obj)

    # ---- reading what happened -----------------------------------------------------------
    def event_reasons(self, kind: str | None = None) -> list[str]:
        """The Events' reasons in order; of one involved kind (BenchmarkSchedule...) if given."""
        return [e["reason"] for e in self.events if kind in (None, e["involvedObject"]["kind"])]

    def events_of(self, reasons: Iterable[str]) -> list[JSON]:
        wanted = set(reasons)
        return [e for e in self.events if e["reason"] in wanted]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386, as the API server applies a status merge patch (null removes a key)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: JSON, ops: list[JSON], root: str) -> JSON:
    """RFC 6902's add, remove, replace and test under `root`, as the API server applies
    them; a failed test or a missing path raises ValueError (the API server answers 422)."""
    doc = copy.deepcopy(target)
    for op in ops:
        path = op["path"]
        if not path.startswith(root + "/"):
            raise ValueError(f"{path}: outside {root}")
        *parents, last = [
            p.replace("~1", "/").replace("~0", "~") for p in path[len(root) + 1 :].split("/")
        ]
        node: Any = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        key: Any = int(last) if isinstance(node, list) else last
        if op["op"] == "test":
            if node[key] != op["value"]:
                raise ValueError(f"test {path}: {node[key]!r} != {op['value']!r}")
        elif op["op"] == "replace":
            exists = 0 <= key < len(node) if isinstance(node, list) else key in node
            if not exists:
                raise ValueError(f"replace {path}: no such element")
            node[key] = copy.deepcopy(op["value"])
        elif op["op"] == "add":
            node[key] = copy.deepcopy(op["value"])
        elif op["op"] == "remove":
            if key not in node:
                raise ValueError(f"remove {path}: no such member")
            del node[key]
        else:
            raise ValueError(f"op {op['op']!r} not supported here")
    return doc


def _in(key: Key, obj: JSON, namespace: str | None, selector: str) -> bool:
    return namespace in (None, key[0]) and matches(obj["metadata"].get("labels"), selector)


def _select(store: dict[Key, JSON], namespace: str | None, selector: str) -> list[JSON]:
    return [copy.deepcopy(o) for k, o in sorted(store.items()) if _in(k, o, namespace, selector)]
