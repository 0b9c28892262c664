"""Kubernetes adapter: the one module that talks to the API server (plain dicts in and out).

Why over 500 lines: every call the controller makes is here, with the one error conversion
(`_converted`) they share; a second adapter module would have to duplicate it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from types import TracebackType
from typing import Any, NoReturn, Self

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from urllib3 import BaseHTTPResponse, Retry
from urllib3.connectionpool import ConnectionPool
from urllib3.exceptions import HTTPError as Urllib3Error
from urllib3.exceptions import ReadTimeoutError

from tidb_bench_operator.domain.api.common import GROUP, VERSION
from tidb_bench_operator.domain.cluster.view import API_VERSION as V2_API_VERSION
from tidb_bench_operator.domain.cluster.view import V2_API_GROUP, V2_GROUP_PLURALS
from tidb_bench_operator.domain.manifests import LABEL_ROLE, LABEL_RUN, label_value
from tidb_bench_operator.domain.objects import JSON
from tidb_bench_operator.errors import KubeError, KubeForbidden

METRICS_API = "/apis/metrics.k8s.io/v1beta1"
# Seconds for any single API call: a hung API server must not hang a reconcile forever.
TIMEOUT = 20
#: What the Kubernetes client raises: the API server's answers, and the connection's failures.
CLIENT_ERRORS = (ApiException, Urllib3Error, OSError)


def _raise(action: str, exc: BaseException, *, from_body: bool = False) -> NoReturn:
    """Raise `exc` (a client error) as KubeError/KubeForbidden saying what was being done.

    The API server's own message (`from_body`) says why a write was refused; for reads the
    HTTP reason (Forbidden, Not Found, ...) says it shorter.
    """
    if isinstance(exc, ApiException):
        detail = _message(exc) if from_body else exc.reason
        kind = KubeForbidden if exc.status == 403 else KubeError
        raise kind(f"{action}: {exc.status} {detail}") from exc
    raise KubeError(f"{action}: {type(exc).__name__}: {exc}") from exc


@contextmanager
def _converted(action: str, *, from_body: bool = False) -> Iterator[None]:
    """Client errors inside become KubeError/KubeForbidden naming `action`."""
    try:
        yield
    except CLIENT_ERRORS as exc:
        _raise(action, exc, from_body=from_body)


def _listed(action: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> list[JSON]:
    """The items of a list call (raw camelCase dicts); client errors converted."""
    with _converted(action):
        resp = call(*args, _preload_content=False, _request_timeout=TIMEOUT, **kwargs)
        return list(_raw(resp).get("items", []))


def load_api_client(kubeconfig: str | None = None) -> Any:
    """In-cluster config when running in a pod, else the kubeconfig (KUBECONFIG or ~/.kube);
    a call waits for no answer longer than its timeout (OneReadTimeout)."""
    cfg: Any = config
    conf = client.Configuration()
    try:
        if kubeconfig is None:
            cfg.load_incluster_config(client_configuration=conf)
            return _client(conf)
    except config.ConfigException:
        pass
    cfg.load_kube_config(config_file=kubeconfig, client_configuration=conf)
    return _client(conf)


class OneReadTimeout(Retry):
    """urllib3's retries, except for a read that timed out: the client's default retried a
    GET whose answer never came three times, so a hung API server held a call four
    timeouts (80 s). Everything else is tried again as before: a connection refused, or a
    kept-alive connection the server had closed (urllib3 counts that as a read error too,
    so `Retry(read=0)` failed those GETs at once)."""

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: BaseHTTPResponse | None = None,
        error: Exception | None = None,
        _pool: ConnectionPool | None = None,
        _stacktrace: TracebackType | None = None,
    ) -> Self:
        if isinstance(error, ReadTimeoutError):
            raise error
        return super().increment(method, url, response, error, _pool, _stacktrace)


def _client(conf: Any) -> Any:
    conf.retries = OneReadTimeout(total=3, redirect=0)
    return client.ApiClient(conf)


def context_namespace(kubeconfig: str | None = None) -> str:
    """The namespace of the kubeconfig's current context (as kubectl uses it), else default."""
    cfg: Any = config
    try:
        _, current = cfg.list_kube_config_contexts(config_file=kubeconfig)
    except (config.ConfigException, OSError):
        return "default"
    return str(((current or {}).get("context") or {}).get("namespace") or "default")


def _raw(resp: Any) -> JSON:
    """Decode a `_preload_content=False` response: camelCase keys exactly as on the wire."""
    return dict(json.loads(resp.data))


class Kube:
    """Narrow, synchronous Kubernetes operations the reconciler needs."""

    def __init__(self, api: Any) -> None:
        # Typed as Any: we send and receive plain camelCase dicts, not the client's models.
        self.api = api
        self.core: Any = client.CoreV1Api(api)
        self.batch: Any = client.BatchV1Api(api)
        self.custom: Any = client.CustomObjectsApi(api)
        self.version_api: Any = client.VersionApi(api)

    # ---- reads -------------------------------------------------------------------------
    def _read(self, what: str, namespace: str, name: str, call: Any) -> JSON | None:
        """One object by name, or None when it does not exist; other failures are precise.

        A 403 is KubeForbidden, so callers can tell "not allowed here" from "not there".
        """
        try:
            return _raw(call(_preload_content=False, _request_timeout=TIMEOUT))
        except ApiException as exc:
            if exc.status == 404:
                return None
            _raise(f"reading {what} {namespace}/{name}", exc)
        except CLIENT_ERRORS as exc:
            _raise(f"reading {what} {namespace}/{name}", exc)

    def _secret(self, namespace: str, name: str) -> JSON | None:
        return self._read(
            "Secret", namespace, name,
            lambda **kw: self.core.read_namespaced_secret(name, namespace, **kw),
        )  # fmt: skip

    def secret_keys(self, namespace: str, name: str) -> set[str] | None:
        """The keys a Secret holds (never its values), or None when it does not exist."""
        sec = self._secret(namespace, name)
        if sec is None:
            return None
        return set((sec.get("data") or {}).keys()) | set((sec.get("stringData") or {}).keys())

    def secret_value(self, namespace: str, name: str, key: str) -> str | None:
        """One decoded Secret value, for an in-memory connection only: never logged or stored."""
        sec = self._secret(namespace, name)
        value = None if sec is None else (sec.get("data") or {}).get(key)
        return None if value is None else base64.b64decode(value).decode()

    def nodes(self) -> list[JSON]:
        """All Nodes."""
        return _listed("listing Nodes", self.core.list_node)

    def pods(self, namespace: str | None, selector: str) -> list[JSON]:
        """Pods matching a label selector; namespace None means all namespaces."""
        if namespace is None:
            return _listed(
                f"listing pods {selector} in all namespaces",
                self.core.list_pod_for_all_namespaces,
                label_selector=selector,
            )
        return _listed(
            f"listing pods {selector} in namespace {namespace}",
            self.core.list_namespaced_pod,
            namespace,
            label_selector=selector,
        )

    def jobs(self, namespace: str, selector: str) -> list[JSON]:
        """Jobs in a namespace matching a label selector."""
        return _listed(
            f"listing Jobs {selector} in namespace {namespace}",
            self.batch.list_namespaced_job,
            namespace,
            label_selector=selector,
        )

    def pod_log(self, namespace: str, name: str, container: str) -> str | None:
        """A container's log, or None when the node cannot serve it (best effort only)."""
        try:
            return str(
                self.core.read_namespaced_pod_log(
                    name, namespace, container=container, _request_timeout=10
                )
            )
        except CLIENT_ERRORS:
            return None

    def tidb_cluster(self, namespace: str, name: str) -> JSON | None:
        return self._read(
            "TidbCluster", namespace, name,
            lambda **kw: self.custom.get_namespaced_custom_object(
                "pingcap.com", "v1alpha1", namespace, "tidbclusters", name, **kw
            ),
        )  # fmt: skip

    def v2_cluster(self, namespace: str, name: str) -> JSON | None:
        """A TiDB Operator v2 Cluster, or None if it (or the v2 CRD) does not exist."""
        return self._read(
            "Cluster", namespace, name,
            lambda **kw: self.custom.get_namespaced_custom_object(
                V2_API_GROUP, V2_API_VERSION, namespace, "clusters", name, **kw
            ),
        )  # fmt: skip

    def v2_groups(self, namespace: str) -> list[JSON]:
        """Every v2 group in the namespace (none without v2's CRDs).

        The group kinds are those API discovery serves (`*groups` of core.pingcap.com): the
        PD, TiKV and TiDB groups, v2.1's TiKVWorker groups, and kinds of later versions. A
        403 on a kind other than PD/TiKV/TiDB groups skips it (an older deploy/ without the
        rule): its pods are still found by their labels.
        """
        served = self.served_resources(V2_API_GROUP, V2_API_VERSION)
        core = [V2_GROUP_PLURALS[c] for c in ("pd", "tikv", "tidb")]
        others = sorted(r for r in served if r.endswith("groups") and "/" not in r)
        found: list[JSON] = []
        for plural in [p for p in core if p in served] + [p for p in others if p not in core]:
            try:
                resp = self.custom.list_namespaced_custom_object(
                    V2_API_GROUP, V2_API_VERSION, namespace, plural,
                    _preload_content=False, _request_timeout=TIMEOUT,
                )  # fmt: skip
            except ApiException as exc:
                if exc.status == 404 or (exc.status == 403 and plural not in core):
                    continue  # not served (any more), or a kind deploy/ does not grant
                raise (KubeForbidden if exc.status == 403 else KubeError)(
                    f"listing {plural}.{V2_API_GROUP} in {namespace}: {exc.status} {exc.reason}"
                ) from exc
            found.extend(_raw(resp).get("items", []))
        return found

    def server_version(self) -> str:
        """The API server's version, e.g. v1.20.2."""
        with _converted("reading the API server's version"):
            return str(self.version_api.get_code(_request_timeout=TIMEOUT).git_version)

    def served_resources(self, group: str, version: str) -> set[str]:
        """The resources API discovery lists for group/version; empty when it serves none."""
        try:
            found = self.custom.get_api_resources(group, version, _request_timeout=TIMEOUT)
        except ApiException as exc:
            if exc.status == 404:
                return set()
            _raise(f"API discovery of {group}/{version}", exc)
        except CLIENT_ERRORS as exc:
            _raise(f"API discovery of {group}/{version}", exc)
        return {str(r.name) for r in found.resources or []}

    def metrics_api(self, path: str) -> JSON | None:
        """GET <METRICS_API>/<path> (`nodes`, `namespaces/<ns>/pods`): the answer; None when
        not served (404); KubeForbidden on 403; KubeError, our words and the status, else."""
        action = f"reading the resource metrics API ({path})"
        try:
            request = self.api.param_serialize(
                "GET", f"{METRICS_API}/{path}",
                header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
            )  # fmt: skip
            resp = self.api.call_api(*request, _request_timeout=TIMEOUT)
            body = resp.read()  # read whatever the status: the connection goes back to the pool
            status = int(resp.status)
            found = json.loads(body) if status == 200 else None
            if isinstance(found, dict):
                return found
        except ApiException as exc:
            status = int(exc.status or 0)
        except CLIENT_ERRORS as exc:
            raise KubeError(f"{action}: {type(exc).__name__}") from None
        except ValueError:
            raise KubeError(f"{action}: the answer is not a JSON object") from None
        if status == 404:
            return None
        # The status alone: the reason text is the aggregated server's (metrics-server's).
        why = "the answer is not a JSON object" if status == 200 else f"HTTP {status}"
        raise (KubeForbidden if status == 403 else KubeError)(f"{action}: {why}")

    # ---- BenchmarkRuns of a schedule (schedules.ScheduleReconciler) ----------------------
    def benchmark_runs_in(self, namespace: str, selector: str) -> list[JSON]:
        """BenchmarkRuns in one namespace matching a label selector."""
        return _listed(
            f"listing BenchmarkRuns {selector} in namespace {namespace}",
            self.custom.list_namespaced_custom_object,
            GROUP, VERSION, namespace, "benchmarkruns", label_selector=selector,
        )  # fmt: skip

    def benchmark_run(self, namespace: str, name: str) -> JSON | None:
        """One BenchmarkRun, or None when it does not exist."""
        return self._read(
            "BenchmarkRun", namespace, name,
            lambda **kw: self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, "benchmarkruns", name, **kw
            ),
        )  # fmt: skip

    def benchmark_experiment(self, namespace: str, name: str) -> JSON | None:
        """One BenchmarkExperiment, or None when it does not exist."""
        return self._read(
            "BenchmarkExperiment", namespace, name,
            lambda **kw: self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, "benchmarkexperiments", name, **kw
            ),
        )  # fmt: skip

    def benchmark_schedule(self, namespace: str, name: str) -> JSON | None:
        """One BenchmarkSchedule, or None when it does not exist."""
        return self._read(
            "BenchmarkSchedule", namespace, name,
            lambda **kw: self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, "benchmarkschedules", name, **kw
            ),
        )  # fmt: skip

    def create_benchmark_run(self, body: JSON) -> tuple[JSON, bool]:
        """Create a BenchmarkRun; (the object, True) or, if the name exists, (that one, False)."""
        ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
        try:
            created = self.custom.create_namespaced_custom_object(
                GROUP, VERSION, ns, "benchmarkruns", body,
                _preload_content=False, _request_timeout=TIMEOUT,
            )  # fmt: skip
            return _raw(created), True
        except ApiException as exc:
            if exc.status != 409:
                _raise(f"creating BenchmarkRun {ns}/{name}", exc, from_body=True)
        except CLIENT_ERRORS as exc:
            _raise(f"creating BenchmarkRun {ns}/{name}", exc, from_body=True)
        # Listed by name rather than read: the controller's ClusterRole grants list, not get.
        items = _listed(
            f"listing BenchmarkRun {ns}/{name}",
            self.custom.list_namespaced_custom_object,
            GROUP, VERSION, ns, "benchmarkruns", field_selector=f"metadata.name={name}",
        )  # fmt: skip
        return dict((items or [body])[0]), False

    def delete_benchmark_run(self, namespace: str, name: str) -> bool:
        """Delete a BenchmarkRun (its Jobs, pods and ConfigMap follow by owner reference).

        Returns False when it was already gone.
        """
        try:
            self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, namespace, "benchmarkruns", name,
                propagation_policy="Background", _request_timeout=TIMEOUT,
            )  # fmt: skip
        except ApiException as exc:
            if exc.status == 404:
                return False
            _raise(f"deleting BenchmarkRun {namespace}/{name}", exc, from_body=True)
        except CLIENT_ERRORS as exc:
            _raise(f"deleting BenchmarkRun {namespace}/{name}", exc, from_body=True)
        return True

    def patch_benchmark_run_status(self, namespace: str, name: str, status: JSON) -> JSON:
        """Merge-patch a BenchmarkRun's status subresource (lists are replaced whole).

        Returns the object as the API server stored it.
        """
        return self._patch_status("BenchmarkRun", "benchmarkruns", namespace, name, status)

    def json_patch_benchmark_run_status(self, namespace: str, name: str, ops: list[JSON]) -> JSON:
        """JSON-patch (RFC 6902) a BenchmarkRun's status subresource: `ops` may replace one
        element of status.steps, which a merge patch cannot. Returns the stored object."""
        with _converted(f"patching BenchmarkRun {namespace}/{name} status", from_body=True):
            return _raw(
                self.custom.patch_namespaced_custom_object_status(
                    GROUP, VERSION, namespace, "benchmarkruns", name, ops,
                    _content_type="application/json-patch+json", _request_timeout=TIMEOUT,
                    _preload_content=False,
                )
            )  # fmt: skip

    def patch_benchmark_schedule_status(self, namespace: str, name: str, status: JSON) -> JSON:
        """Merge-patch a BenchmarkSchedule's status subresource; returns the stored object."""
        return self._patch_status(
            "BenchmarkSchedule", "benchmarkschedules", namespace, name, status
        )

    def _patch_status(
        self, kind: str, plural: str, namespace: str, name: str, status: JSON
    ) -> JSON:
        with _converted(f"patching {kind} {namespace}/{name} status", from_body=True):
            return _raw(
                self.custom.patch_namespaced_custom_object_status(
                    GROUP, VERSION, namespace, plural, name, {"status": status},
                    _content_type="application/merge-patch+json", _request_timeout=TIMEOUT,
                    _preload_content=False,
                )
            )  # fmt: skip

    # ---- BenchmarkExperiments and the cluster objects they patch (#27) -------------------
    def patch_benchmark_experiment_status(self, namespace: str, name: str, status: JSON) -> JSON:
        """Merge-patch a BenchmarkExperiment's status subresource; returns the stored object."""
        return self._patch_status(
            "BenchmarkExperiment", "benchmarkexperiments", namespace, name, status
        )

    def set_benchmark_experiment_finalizers(
        self, namespace: str, name: str, finalizers: list[str], resource_version: str
    ) -> JSON:
        """Replace the experiment's finalizers, only if it is still at `resource_version`."""
        body = {"metadata": {"finalizers": finalizers, "resourceVersion": resource_version}}
        with _converted(f"setting BenchmarkExperiment {namespace}/{name} finalizers"):
            return _raw(
                self.custom.patch_namespaced_custom_object(
                    GROUP, VERSION, namespace, "benchmarkexperiments", name, body,
                    _content_type="application/merge-patch+json", _request_timeout=TIMEOUT,
                    _preload_content=False,
                )
            )  # fmt: skip

    def patch_cluster_object(
        self, kind: str, namespace: str, name: str, spec_patch: JSON, *, dry_run: bool = False
    ) -> JSON:
        """Merge-patch the spec of a TidbCluster or a v2 group (`kind`: TidbCluster, TiKVGroup...).

        `dry_run`: the API server checks (RBAC included) and stores nothing.
        """
        if kind == "TidbCluster":
            group, version, plural = "pingcap.com", "v1alpha1", "tidbclusters"
        else:
            group, version, plural = V2_API_GROUP, V2_API_VERSION, kind.lower() + "s"
        extra = {"dry_run": "All"} if dry_run else {}
        with _converted(f"patching {kind} {namespace}/{name}", from_body=True):
            return _raw(
                self.custom.patch_namespaced_custom_object(
                    group, version, namespace, plural, name, {"spec": spec_patch},
                    _content_type="application/merge-patch+json", _request_timeout=TIMEOUT,
                    _preload_content=False, **extra,
                )
            )  # fmt: skip

    # ---- writes ------------------------------------------------------------------------
    def create_job(self, body: JSON) -> JSON:
        """Create a Job; if it exists already (re-created after a restart), return that one."""
        ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
        try:
            return _raw(
                self.batch.create_namespaced_job(
                    ns, body, _preload_content=False, _request_timeout=TIMEOUT
                )
            )
        except ApiException as exc:
            if exc.status != 409:
                _raise(f"creating Job {ns}/{name}", exc, from_body=True)
        except CLIENT_ERRORS as exc:
            _raise(f"creating Job {ns}/{name}", exc, from_body=True)
        with _converted(f"reading Job {ns}/{name}"):
            return _raw(
                self.batch.read_namespaced_job(
                    name, ns, _preload_content=False, _request_timeout=TIMEOUT
                )
            )

    def delete_jobs(self, namespace: str, selector: str) -> int:
        """Delete Jobs and (in the foreground of the GC) their pods; returns how many."""
        jobs = self.jobs(namespace, selector)
        for job in jobs:
            what = f"deleting Job {namespace}/{job['metadata']['name']}"
            try:
                self.batch.delete_namespaced_job(
                    job["metadata"]["name"], namespace, propagation_policy="Background",
                    _request_timeout=TIMEOUT,
                )  # fmt: skip
            except ApiException as exc:
                if exc.status != 404:
                    _raise(what, exc, from_body=True)
            except CLIENT_ERRORS as exc:
                _raise(what, exc, from_body=True)
        return len(jobs)

    def results_configmaps(self, namespace: str, run_name: str) -> list[JSON]:
        """A run's results ConfigMaps (domain.results_store), as plain dicts."""
        selector = f"{LABEL_RUN}={label_value(run_name)},{LABEL_ROLE}=results"
        return _listed(
            f"listing ConfigMaps {selector} in namespace {namespace}",
            self.core.list_namespaced_config_map,
            namespace,
            label_selector=selector,
        )

    def configmap(self, namespace: str, name: str) -> JSON | None:
        """One ConfigMap (a part of a run's results store), or None when it does not exist."""
        return self._read(
            "ConfigMap", namespace, name,
            lambda **kw: self.core.read_namespaced_config_map(name, namespace, **kw),
        )  # fmt: skip

    def upsert_configmap(self, body: JSON) -> None:
        """Create a ConfigMap, or replace the one of that name."""
        ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
        try:
            self.core.create_namespaced_config_map(ns, body, _request_timeout=TIMEOUT)
            return
        except ApiException as exc:
            if exc.status != 409:
                _raise(f"creating ConfigMap {ns}/{name}", exc, from_body=True)
        except CLIENT_ERRORS as exc:
            _raise(f"creating ConfigMap {ns}/{name}", exc, from_body=True)
        with _converted(f"replacing ConfigMap {ns}/{name}", from_body=True):
            self.core.replace_namespaced_config_map(name, ns, body, _request_timeout=TIMEOUT)

    def ensure_service_account(self, body: JSON) -> None:
        """Create a ServiceAccount unless it exists (read first: no POST on every reconcile)."""
        ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
        try:
            self.core.read_namespaced_service_account(
                name, ns, _preload_content=False, _request_timeout=TIMEOUT
            )
            return
        except ApiException as exc:
            if exc.status != 404:
                _raise(f"reading ServiceAccount {ns}/{name}", exc)
        except CLIENT_ERRORS as exc:
            _raise(f"reading ServiceAccount {ns}/{name}", exc)
        try:
            self.core.create_namespaced_service_account(
                ns, body, _preload_content=False, _request_timeout=TIMEOUT
            )
        except ApiException as exc:
            if exc.status != 409:  # created meanwhile by another reconcile: fine
                _raise(f"creating ServiceAccount {ns}/{name}", exc, from_body=True)
        except CLIENT_ERRORS as exc:
            _raise(f"creating ServiceAccount {ns}/{name}", exc, from_body=True)

    def create_event(self, body: JSON) -> None:
        """Post an Event; an Event that cannot be posted never fails a reconcile."""
        with suppress(*CLIENT_ERRORS):
            self.core.create_namespaced_event(
                body["metadata"]["namespace"], body, _request_timeout=TIMEOUT
            )


def _message(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body or "{}").get("message", exc.reason))
    except (TypeError, ValueError):
        return str(exc.reason)
