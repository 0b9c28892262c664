"""A stand-in of TiDB Operator v1's reaction to a TidbCluster patch, for the test bed.

It watches (polls, every `interval` s) the TidbClusters of the namespaces it is given and
does, one step per component per pass, what TiDB Operator v1.6's member managers and their
StatefulSets do, so that where a new pod lands is decided by the bed's real scheduler:

- **replicas up**: pods `<tc>-<component>-<i>` for the missing ordinals are created without
  a nodeName (the StatefulSet's Parallel pod management: all at once), carrying TiDB
  Operator's labels, the spec's labels and annotations, and the pod placement TiDB
  Operator builds from the spec (`component_spec.go`, BuildPodSpec): nodeSelector (the
  cluster's merged with the component's), tolerations, affinity and
  topologySpreadConstraints (the component's, else the cluster's), each constraint
  `whenUnsatisfiable: DoNotSchedule`, maxSkew from the spec (default 1), and a
  labelSelector of the component's four labels (name, managed-by, instance, component) or
  the constraint's own `matchLabels`. The scheduler places them; the node agent marks them
  Running and Ready. `minDomains` and `nodeAffinityPolicy` are passed on, and the 1.20 API
  server drops them (it has no such fields).
- **replicas down**: the highest ordinal is deleted, one at a time.
- **rolling restart**: the pod template's revision is a hash of what would change the
  StatefulSet's template (image/version, config, annotations, labels, placement). When it
  changes, pods are replaced one at a time, highest ordinal first; the next is deleted only
  when every pod is Ready and has been for `min_ready_seconds` (a StatefulSet's
  minReadySeconds; the bed's stand-ins are Ready at once, a real TiKV is not). Components
  restart in TiDB Operator's order: TiKV's waits while PD is upgrading, TiDB's while PD or
  TiKV is (a change of `spec.version` rolls PD, then TiKV, then TiDB).
- **status** (no status subresource on the v1 CRD: a merge patch of the object):
  `status.<component>.phase` is `Scale` while pods are added or removed, `Upgrade` while a
  rolling restart runs, `Normal` when done (scaling before upgrading, as TiDB Operator
  does); `status.<component>.statefulSet` has replicas, readyReplicas, currentReplicas,
  updatedReplicas and the revisions; `status.<component>.image`; a `Ready` condition.

Pods of a cluster that exist without a revision label (made by
`testbed.kube.create_standin_cluster`) are adopted at first sight: labelled with the current
revision, not restarted. Not emulated: PD's member and store bookkeeping (`status.tikv.stores`),
TiKV leader eviction before a restart, failover, PVCs. v1 only (not TiDB Operator v2's groups).

Run it in a thread (`StandinOperator(...).start()` / `.stop()`) or as a process:
`python -m testbed.standin_operator --namespace NS [--namespace NS2 ...]` with KUBECONFIG set.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import hashlib
import json
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client, config
from kubernetes.client.rest import ApiException

from testbed.agent import EXEC_ANNOTATION

log = logging.getLogger("testbed.standin_operator")

GROUP, VERSION, PLURAL = "pingcap.com", "v1alpha1", "tidbclusters"
COMPONENTS = ("pd", "tikv", "tidb")
REVISION_LABEL = "controller-revision-hash"  # the label a StatefulSet's pods carry
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
NORMAL, SCALE, UPGRADE = "Normal", "Scale", "Upgrade"


def component_labels(cluster: str, component: str) -> dict[str, str]:
    """TiDB Operator v1's labels of a component's pods (pkg/apis/label/label.go)."""
    return {
        "app.kubernetes.io/name": "tidb-cluster",
        "app.kubernetes.io/managed-by": "tidb-operator",
        "app.kubernetes.io/instance": cluster,
        "app.kubernetes.io/component": component,
    }


def spread_constraints(
    spec: Mapping[str, Any], component: str, cluster: str
) -> list[dict[str, Any]] | None:
    """The pod's topologySpreadConstraints as TiDB Operator v1 builds them from the spec."""
    comp = spec.get(component) or {}
    tscs = comp.get("topologySpreadConstraints") or spec.get("topologySpreadConstraints")
    if not tscs:
        return None
    out = []
    for tsc in tscs:
        c: dict[str, Any] = {
            "maxSkew": int(tsc.get("maxSkew") or 1),
            "topologyKey": tsc["topologyKey"],
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {
                "matchLabels": dict(tsc.get("matchLabels") or component_labels(cluster, component))
            },
        }
        for key in ("minDomains", "nodeAffinityPolicy"):
            if tsc.get(key) is not None:
                c[key] = tsc[key]
        out.append(c)
    return out


def image_of(spec: Mapping[str, Any], component: str) -> str:
    """`image`, else `<baseImage>:<version>` (the component's version, else the cluster's)."""
    comp = spec.get(component) or {}
    if comp.get("image"):
        return str(comp["image"])
    base = comp.get("baseImage") or f"pingcap/{component}"
    version = comp.get("version") or spec.get("version") or "latest"
    return f"{base}:{version}"


def pod_template(
    tc: Mapping[str, Any], component: str, extra_annotations: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The pod template (metadata and spec, no name) a component's StatefulSet would hold."""
    spec = tc.get("spec") or {}
    comp = spec.get(component) or {}
    name = tc["metadata"]["name"]
    labels = {**(spec.get("labels") or {}), **(comp.get("labels") or {})}
    labels.update(component_labels(name, component))
    annotations = {**(spec.get("annotations") or {}), **(comp.get("annotations") or {})}
    annotations.update(extra_annotations or {})
    pod_spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": component, "image": image_of(spec, component)}],
    }
    selector = {**(spec.get("nodeSelector") or {}), **(comp.get("nodeSelector") or {})}
    if selector:
        pod_spec["nodeSelector"] = selector
    for key in ("tolerations", "affinity"):
        value = comp.get(key) or spec.get(key)
        if value:
            pod_spec[key] = copy.deepcopy(value)
    tscs = spread_constraints(spec, component, name)
    if tscs:
        pod_spec["topologySpreadConstraints"] = tscs
    return {"metadata": {"labels": labels, "annotations": annotations}, "spec": pod_spec}


def revision_of(template: Mapping[str, Any], config_: Any) -> str:
    """A short hash of the template and the component's config (its ConfigMap's content)."""
    text = json.dumps({"template": template, "config": config_}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def ordinal_of(pod_name: str, prefix: str) -> int | None:
    tail = pod_name[len(prefix) :] if pod_name.startswith(prefix) else ""
    return int(tail) if tail.isdigit() else None


def pod_ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


@dataclass
class Action:
    """One thing the stand-in operator did, for a test to read afterwards."""

    at: float  # time.monotonic()
    namespace: str
    cluster: str
    component: str
    verb: str  # create | delete | phase
    what: str  # a pod name, or the new phase


@dataclass
class StandinOperator:
    """TiDB Operator v1's reaction to TidbCluster changes in `namespaces` (see the module)."""

    api: client.ApiClient
    namespaces: Sequence[str]
    interval: float = 0.3
    min_ready_seconds: float = 0.0
    #: component -> exec map put on its pods (testbed.kube.pd_ctl_exec for PD, say).
    exec_commands: Mapping[str, Mapping[str, Sequence[str]]] = field(default_factory=dict)
    actions: list[Action] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _adopted: set[str] = field(default_factory=set)
    #: pod uid -> time.monotonic() this operator first saw it Ready (the condition's own
    #: lastTransitionTime has whole seconds only).
    _ready_seen: dict[str, float] = field(default_factory=dict)

    def start(self) -> StandinOperator:
        self._thread = threading.Thread(target=self.run, name="standin-operator", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def run(self) -> None:
        while not self._stop.is_set():
            for ns in self.namespaces:
                try:
                    self.sync_namespace(ns)
                except ApiException as exc:
                    log.warning("sync of %s: %s", ns, exc.reason)
                except Exception:  # keep going; the next pass repairs
                    log.exception("sync of %s failed", ns)
            self._stop.wait(self.interval)

    def sync_namespace(self, ns: str) -> None:
        custom = client.CustomObjectsApi(self.api)
        for tc in custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)["items"]:
            if tc["metadata"].get("deletionTimestamp"):
                continue
            self.sync_cluster(tc)

    def sync_cluster(self, tc: dict[str, Any]) -> None:
        ns, name = tc["metadata"]["namespace"], tc["metadata"]["name"]
        core = client.CoreV1Api(self.api)
        pods = core.list_namespaced_pod(
            ns, label_selector=f"app.kubernetes.io/instance={name}"
        ).items
        status: dict[str, Any] = {}
        all_normal = True
        for comp in COMPONENTS:
            if not (tc.get("spec") or {}).get(comp):
                continue
            mine = [p for p in pods if (p.metadata.labels or {}).get(
                "app.kubernetes.io/component") == comp]  # fmt: skip
            # TiDB Operator upgrades PD, then TiKV, then TiDB: a component's restart waits
            # while one before it is upgrading (its upgraders requeue until then).
            st = self.sync_component(tc, comp, mine, held=any(
                s["phase"] == UPGRADE for s in status.values()))  # fmt: skip
            status[comp] = st
            all_normal = all_normal and st["phase"] == NORMAL
        self._adopted.add(f"{ns}/{name}")
        ready = all_normal and all(
            s["statefulSet"]["readyReplicas"] == s["statefulSet"]["replicas"]
            for s in status.values()
        )
        status["conditions"] = [_ready_condition(tc, ready)]
        old = tc.get("status") or {}
        if any(old.get(k) != v for k, v in status.items() if k != "conditions") or (
            _cond_status(old) != status["conditions"][0]["status"]
        ):
            client.CustomObjectsApi(self.api).patch_namespaced_custom_object(
                GROUP, VERSION, ns, PLURAL, name, {"status": status}
            )

    def sync_component(
        self, tc: dict[str, Any], comp: str, pods: list[Any], held: bool = False
    ) -> dict[str, Any]:
        """One step towards the spec for one component; returns its new status. `held`: a
        component before it is upgrading, so this one's restart does not start yet."""
        ns, name = tc["metadata"]["namespace"], tc["metadata"]["name"]
        spec = tc["spec"]
        extra = {}
        if comp in self.exec_commands:
            extra[EXEC_ANNOTATION] = json.dumps(
                {k: list(v) for k, v in self.exec_commands[comp].items()}
            )
        template = pod_template(tc, comp, extra)
        revision = revision_of(template, (spec.get(comp) or {}).get("config"))
        want = int((spec.get(comp) or {}).get("replicas") or 0)
        prefix = f"{name}-{comp}-"
        old_phase = ((tc.get("status") or {}).get(comp) or {}).get("phase") or NORMAL
        core = client.CoreV1Api(self.api)
        live: dict[int, Any] = {}
        terminating = False
        for p in pods:
            o = ordinal_of(p.metadata.name, prefix)
            if o is None:
                continue
            if p.metadata.deletion_timestamp is not None:
                terminating = True
                continue
            live[o] = p
        if f"{ns}/{name}" not in self._adopted:
            for p in live.values():
                if REVISION_LABEL not in (p.metadata.labels or {}):
                    core.patch_namespaced_pod(
                        p.metadata.name, ns, {"metadata": {"labels": {REVISION_LABEL: revision}}}
                    )
                    p.metadata.labels = {**(p.metadata.labels or {}), REVISION_LABEL: revision}
        phase = old_phase
        surplus = sorted(o for o in live if o >= want)
        missing = [o for o in range(want) if o not in live]
        outdated = sorted(o for o, p in live.items() if o < want and _revision(p) != revision)
        if terminating:
            pass  # a deleted pod is still going: wait, as a StatefulSet does
        elif surplus:
            phase = SCALE
            self._delete(ns, name, comp, live.pop(surplus[-1]))
        elif missing:
            # A pod deleted for a rolling restart comes back under Upgrade; others are Scale.
            phase = UPGRADE if old_phase == UPGRADE else SCALE
            for o in missing:
                self._create(ns, name, comp, o, template, revision)
        elif not self._all_ready(live.values()) or (outdated and held and old_phase != UPGRADE):
            pass  # wait: a pod not Ready (long enough), or a component before this upgrading
        elif outdated:
            phase = UPGRADE
            self._delete(ns, name, comp, live.pop(outdated[-1]))
        else:
            phase = NORMAL
        if phase != old_phase:
            self._record(ns, name, comp, "phase", phase)
        update = f"{name}-{comp}-{revision}"
        old_set = ((tc.get("status") or {}).get(comp) or {}).get("statefulSet") or {}
        # As a StatefulSet's: the current revision is the old one until the rollout is done.
        current = update if phase == NORMAL else old_set.get("currentRevision") or update
        return {
            "phase": phase,
            "image": image_of(spec, comp),
            "statefulSet": {
                "replicas": len(live),
                "readyReplicas": sum(1 for p in live.values() if pod_ready(p)),
                "currentReplicas": sum(
                    1 for p in live.values() if f"{prefix}{_revision(p)}" == current
                ),
                "updatedReplicas": sum(1 for p in live.values() if _revision(p) == revision),
                "currentRevision": current,
                "updateRevision": update,
            },
        }

    def _all_ready(self, pods: Any) -> bool:
        """Every pod Ready, and for `min_ready_seconds` at least."""
        now = time.monotonic()
        ok = True
        for p in pods:
            if not pod_ready(p):
                self._ready_seen.pop(p.metadata.uid, None)
                ok = False
                continue
            since = self._ready_seen.setdefault(p.metadata.uid, now)
            ok = ok and now - since >= self.min_ready_seconds
        return ok

    def _create(
        self, ns: str, name: str, comp: str, ordinal: int, template: Any, revision: str
    ) -> None:
        pod_name = f"{name}-{comp}-{ordinal}"
        meta = copy.deepcopy(template["metadata"])
        meta["labels"].update({REVISION_LABEL: revision, POD_NAME_LABEL: pod_name})
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod_name, "namespace": ns, **meta},
            "spec": copy.deepcopy(template["spec"]),
        }
        try:
            client.CoreV1Api(self.api).create_namespaced_pod(ns, body)
        except ApiException as exc:
            if exc.status != 409:  # the old one of that name not gone yet: next pass
                raise
            return
        self._record(ns, name, comp, "create", pod_name)

    def _delete(self, ns: str, name: str, comp: str, pod: Any) -> None:
        with contextlib.suppress(ApiException):
            client.CoreV1Api(self.api).delete_namespaced_pod(pod.metadata.name, ns)
        self._record(ns, name, comp, "delete", pod.metadata.name)

    def _record(self, ns: str, name: str, comp: str, verb: str, what: str) -> None:
        self.actions.append(Action(time.monotonic(), ns, name, comp, verb, what))
        log.info("%s/%s %s: %s %s", ns, name, comp, verb, what)


def _revision(pod: Any) -> str | None:
    return (pod.metadata.labels or {}).get(REVISION_LABEL)


def _cond_status(status: Mapping[str, Any]) -> str | None:
    for c in status.get("conditions") or []:
        if c.get("type") == "Ready":
            return str(c.get("status"))
    return None


def _ready_condition(tc: Mapping[str, Any], ready: bool) -> dict[str, Any]:
    """TiDB Operator v1's Ready condition (its cluster condition updater's reasons)."""
    t = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if ready:
        reason, message = "Ready", "TiDB cluster is fully up and running"
    else:
        reason, message = "StatefulSetNotUpToDate", "Statefulset(s) are in progress"
    old = _cond_status(tc.get("status") or {})
    status = "True" if ready else "False"
    since = t
    if old == status:
        for c in (tc.get("status") or {}).get("conditions") or []:
            if c.get("type") == "Ready":
                since = c.get("lastTransitionTime") or t
    return {"type": "Ready", "status": status, "reason": reason, "message": message,
            "lastUpdateTime": t, "lastTransitionTime": since}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m testbed.standin_operator")
    parser.add_argument("--namespace", action="append", required=True)
    parser.add_argument("--interval", type=float, default=0.3)
    parser.add_argument("--min-ready-seconds", type=float, default=0.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    op = StandinOperator(
        config.new_client_from_config(), args.namespace, args.interval, args.min_ready_seconds
    )
    with contextlib.suppress(KeyboardInterrupt):
        op.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
