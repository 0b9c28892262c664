"""The stand-in TiDB Operator: where the real scheduler puts a new TiKV, rolls, scale-in, phases.

docs/field-story.md's experiment on the bed: TiKV 2 -> 3 with a maxSkew-1 spread over the
three nodes, node1 being the tainted benchmark node. Each test has its own namespace and its
own stand-in operator watching only it, and changes nothing outside it (a cluster that
tolerates the taint plays the home lab's node1 without its taint), so it runs in parallel.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client

from testbed.kube import BENCH_LABEL, CONTROL_PLANE_TAINT, tidbcluster_manifest, wait_for
from testbed.standin_operator import GROUP, PLURAL, VERSION, StandinOperator, pod_ready

TOLERATE_BENCH_NODE = [{"key": CONTROL_PLANE_TAINT["key"], "operator": "Exists",
                        "effect": "NoSchedule"}]  # fmt: skip


@dataclass
class PodLife:
    name: str
    created: float
    node: str | None = None
    scheduled: float | None = None
    ready: float | None = None
    deleted: float | None = None


@dataclass
class Recorder:
    """What the API shows, every 0.1 s: each pod's life (by uid) and each component's phase."""

    core: client.CoreV1Api
    custom: client.CustomObjectsApi
    namespace: str
    pods: dict[str, PodLife] = field(default_factory=dict)
    phases: dict[str, list[tuple[float, str]]] = field(default_factory=dict)
    #: The namespace's stand-in operator(s), stopped at the end (a test replaces one).
    operators: list[StandinOperator] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(0.1)

    def sample(self) -> None:
        now = time.monotonic()
        seen = set()
        for p in self.core.list_namespaced_pod(self.namespace).items:
            uid = p.metadata.uid
            seen.add(uid)
            life = self.pods.setdefault(uid, PodLife(p.metadata.name, now))
            if p.spec.node_name and life.node is None:
                life.node, life.scheduled = p.spec.node_name, now
            if pod_ready(p) and life.ready is None:
                life.ready = now
            if p.metadata.deletion_timestamp is not None and life.deleted is None:
                life.deleted = now
        for uid, life in self.pods.items():
            if life.deleted is None and uid not in seen:
                life.deleted = now
        for tc in self.custom.list_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL)[
            "items"
        ]:
            for comp, st in (tc.get("status") or {}).items():
                if isinstance(st, dict) and "phase" in st:
                    seq = self.phases.setdefault(comp, [])
                    if not seq or seq[-1][1] != st["phase"]:
                        seq.append((now, st["phase"]))

    def stop(self) -> None:
        self._stop.set()

    def live(self, prefix: str) -> dict[str, str | None]:
        """Pod name -> node of the pods not deleted whose name starts with `prefix`."""
        return {
            lf.name: lf.node
            for lf in self.pods.values()
            if lf.deleted is None and lf.name.startswith(prefix)
        }

    def phase_names(self, comp: str, since: float = 0.0) -> list[str]:
        return [p for t, p in self.phases.get(comp, []) if t >= since]


@pytest.fixture
def bed_op(
    api: client.ApiClient, core: client.CoreV1Api, namespace: str
) -> Iterator[tuple[client.CustomObjectsApi, Recorder]]:
    """This namespace's stand-in operator (pods Ready 1 s before the next is replaced) and a
    recorder of what the API shows."""
    custom = client.CustomObjectsApi(api)
    rec = Recorder(core, custom, namespace)
    rec.operators.append(_operator(api, namespace))
    t = threading.Thread(target=rec.run, daemon=True)
    t.start()
    yield custom, rec
    rec.stop()
    t.join(timeout=5)
    for op in rec.operators:
        op.stop()


def _operator(api: client.ApiClient, namespace: str) -> StandinOperator:
    return StandinOperator(api, [namespace], interval=0.2, min_ready_seconds=1.0).start()


def _create(custom: client.CustomObjectsApi, ns: str, **tikv: Any) -> None:
    tc = tidbcluster_manifest("basic", ns, replicas={"pd": 1, "tikv": 2, "tidb": 1},
                              spread={"tikv": 1})  # fmt: skip
    tc["spec"]["tikv"].update(tikv)
    custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, tc)


def _patch(custom: client.CustomObjectsApi, ns: str, tikv: dict[str, Any]) -> float:
    custom.patch_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "basic",
                                          {"spec": {"tikv": tikv}})  # fmt: skip
    return time.monotonic()


def _tikv_status(custom: client.CustomObjectsApi, ns: str) -> dict[str, Any]:
    tc = custom.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "basic")
    return dict((tc.get("status") or {}).get("tikv") or {})


def _settled(
    custom: client.CustomObjectsApi, ns: str, replicas: int, timeout: float, old_rev: str = ""
) -> None:
    """Wait for TiKV's phase Normal with `replicas` pods, all Ready and updated (to a revision
    other than `old_rev`); then give the recorder (0.1 s) time to have seen it too."""

    def done() -> bool:
        st = _tikv_status(custom, ns)
        sts = st.get("statefulSet") or {}
        if sts.get("updateRevision") == old_rev:
            return False
        return st.get("phase") == "Normal" and all(
            sts.get(k) == replicas for k in ("replicas", "readyReplicas", "updatedReplicas")
        )

    wait_for(done, timeout, f"TiKV {replicas} Normal")
    time.sleep(0.3)


def _two_tikv_off_the_bench_node(
    custom: client.CustomObjectsApi, rec: Recorder, namespace: str
) -> None:
    """The cluster `basic` with TiKV 2 (maxSkew 1) Normal: the scheduler put them on node2
    and node3, the taint keeps node1 free."""
    _create(custom, namespace)
    _settled(custom, namespace, 2, 30)
    assert sorted(rec.live("basic-tikv-").values()) == ["node2", "node3"]


def test_with_the_benchmark_node_protected_the_third_tikv_stays_pending_on_kubernetes_1_20(
    bed_op: tuple[client.CustomObjectsApi, Recorder], core: client.CoreV1Api, namespace: str
) -> None:
    custom, rec = bed_op
    _two_tikv_off_the_bench_node(custom, rec, namespace)

    t0 = _patch(custom, namespace, {"replicas": 3})
    # node1 still counts as a topology domain with 0 TiKV (1.20's PodTopologySpread ignores
    # taints; nodeTaintsPolicy came in 1.25, unset = Ignore), so node2 and node3 would make the skew 2, and
    # the taint keeps the pod off node1: it stays Pending, the phase stays Scale.
    why = wait_for(
        lambda: [e.message for e in core.list_namespaced_event(namespace).items
                 if e.reason == "FailedScheduling" and e.involved_object.name == "basic-tikv-2"],
        30, "FailedScheduling of basic-tikv-2",
    )  # fmt: skip
    print(f"FailedScheduling of basic-tikv-2 seen +{time.monotonic() - t0:.1f}s: {why[0]}")
    assert "didn't match pod topology spread constraints" in why[0]
    assert "had taint {node-role.kubernetes.io/control-plane: }" in why[0]
    time.sleep(3)
    pod = core.read_namespaced_pod("basic-tikv-2", namespace)
    assert pod.spec.node_name is None and pod.status.phase == "Pending"
    st = _tikv_status(custom, namespace)
    assert st["phase"] == "Scale"
    assert (st["statefulSet"]["replicas"], st["statefulSet"]["readyReplicas"]) == (3, 2)

    _patch(custom, namespace, {"replicas": 2})
    _settled(custom, namespace, 2, 30)
    assert sorted(rec.live("basic-tikv-").values()) == ["node2", "node3"]
    assert rec.phase_names("tikv", t0) == ["Scale", "Normal"]


def test_unprotected_the_third_tikv_lands_on_the_benchmark_node_and_rolls_one_at_a_time(
    bed_op: tuple[client.CustomObjectsApi, Recorder], core: client.CoreV1Api, namespace: str
) -> None:
    custom, rec = bed_op
    _two_tikv_off_the_bench_node(custom, rec, namespace)
    pod = core.read_namespaced_pod("basic-tikv-0", namespace)
    tsc = pod.spec.topology_spread_constraints[0]
    assert (tsc.max_skew, tsc.topology_key, tsc.when_unsatisfiable) == (
        1, "kubernetes.io/hostname", "DoNotSchedule")  # fmt: skip
    assert tsc.label_selector.match_labels == {
        "app.kubernetes.io/name": "tidb-cluster", "app.kubernetes.io/managed-by": "tidb-operator",
        "app.kubernetes.io/instance": "basic", "app.kubernetes.io/component": "tikv",
    }  # fmt: skip

    # The home lab: node1's taint gone and TiKV 2 -> 3. Here the cluster tolerates the taint
    # (so nothing outside this namespace changes); a toleration changes the pod template too,
    # so after scaling (first, as TiDB Operator does) the old TiKVs are restarted.
    rev = _tikv_status(custom, namespace)["statefulSet"]["updateRevision"]
    t_scale = _patch(custom, namespace, {"replicas": 3, "tolerations": TOLERATE_BENCH_NODE})
    _settled(custom, namespace, 3, 60, old_rev=rev)
    placed = rec.live("basic-tikv-")
    assert placed["basic-tikv-2"] == "node1", placed  # the benchmark node
    assert sorted(placed.values()) == ["node1", "node2", "node3"]
    # Created without a node, bound by the scheduler, then marked Ready by the node agent.
    pod = core.read_namespaced_pod("basic-tikv-2", namespace)
    assert pod_ready(pod) and pod.status.phase == "Running"
    assert f"Successfully assigned {namespace}/basic-tikv-2 to node1" in [
        e.message for e in core.list_namespaced_event(namespace).items if e.reason == "Scheduled"
    ]
    assert rec.phase_names("tikv", t_scale) == ["Scale", "Upgrade", "Normal"]
    assert rec.phase_names("tidb", t_scale) == []  # TiDB untouched: Normal throughout
    assert rec.phase_names("tidb")[-1] == "Normal"

    rev = _tikv_status(custom, namespace)["statefulSet"]["updateRevision"]
    t_conf = _patch(custom, namespace, {"config": {"raftstore": {"apply-pool-size": 4}}})
    _settled(custom, namespace, 3, 60, old_rev=rev)
    roll = sorted(
        (lf for lf in rec.pods.values() if lf.name.startswith("basic-tikv-") and lf.created > t_conf),
        key=lambda lf: lf.created,
    )  # fmt: skip
    old = sorted(
        (lf for lf in rec.pods.values()
         if lf.name.startswith("basic-tikv-") and lf.deleted and lf.deleted > t_conf),
        key=lambda lf: lf.deleted or 0,
    )  # fmt: skip
    assert [lf.name for lf in old] == ["basic-tikv-2", "basic-tikv-1", "basic-tikv-0"]
    assert [lf.name for lf in roll] == ["basic-tikv-2", "basic-tikv-1", "basic-tikv-0"]
    for new, next_old in zip(roll, old[1:], strict=False):
        assert new.ready is not None and next_old.deleted is not None
        # One at a time: the next is deleted only after the new one has been Ready 1 s
        # (less the recorder's 0.1 s sampling).
        assert next_old.deleted - new.ready >= 0.85, (new, next_old)
    for o, n in zip(old, roll, strict=True):
        print(f"{o.name}: deleted +{(o.deleted or 0) - t_conf:.1f}s from {o.node}; new pod "
              f"+{n.created - t_conf:.1f}s, on {n.node} +{(n.scheduled or 0) - t_conf:.1f}s, "
              f"Ready +{(n.ready or 0) - t_conf:.1f}s")  # fmt: skip
    assert rec.phase_names("tikv", t_conf) == ["Upgrade", "Normal"]
    assert rec.live("basic-tikv-")["basic-tikv-2"] == "node1"

    t_in = _patch(custom, namespace, {"replicas": 2})
    _settled(custom, namespace, 2, 30)
    assert sorted(rec.live("basic-tikv-")) == ["basic-tikv-0", "basic-tikv-1"]
    assert "node1" not in rec.live("basic-tikv-").values()
    assert rec.phase_names("tikv", t_in) == ["Scale", "Normal"]
    print(f"roll of 3 TiKV: {max(n.ready or 0 for n in roll) - t_conf:.1f} s; scale-in "
          f"{time.monotonic() - t_in:.1f} s")  # fmt: skip


def test_a_node_affinity_off_the_bench_node_takes_node1_out_of_the_domains_and_tikv_3_schedules(
    bed_op: tuple[client.CustomObjectsApi, Recorder], core: client.CoreV1Api, namespace: str
) -> None:
    custom, rec = bed_op
    off_bench = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": BENCH_LABEL, "operator": "DoesNotExist"}]}]}}}  # fmt: skip
    _create(custom, namespace, affinity=off_bench)
    _settled(custom, namespace, 2, 30)
    assert sorted(rec.live("basic-tikv-").values()) == ["node2", "node3"]
    # 1.20's PodTopologySpread counts only nodes that pass the pod's node affinity: the
    # domains are node2 and node3, so a third TiKV may go beside either (skew 1).
    t0 = _patch(custom, namespace, {"replicas": 3})
    _settled(custom, namespace, 3, 30)
    placed = rec.live("basic-tikv-")
    assert placed["basic-tikv-2"] in ("node2", "node3"), placed
    assert rec.phase_names("tikv", t0) == ["Scale", "Normal"]


def test_a_restart_annotation_rolls_only_tidb_and_a_new_version_rolls_pd_then_tikv_then_tidb(
    bed_op: tuple[client.CustomObjectsApi, Recorder], namespace: str
) -> None:
    custom, rec = bed_op
    tc = tidbcluster_manifest("basic", namespace, replicas={"pd": 1, "tikv": 2, "tidb": 2})
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, tc)
    _settled(custom, namespace, 2, 30)
    wait_for(lambda: rec.phase_names("tidb")[-1:] == ["Normal"], 10, "TiDB Normal")

    def deletions(since: float) -> list[str]:
        gone = [lf for lf in rec.pods.values() if lf.deleted and lf.deleted > since]
        return [lf.name for lf in sorted(gone, key=lambda lf: lf.deleted or 0)]

    def all_normal() -> bool:
        got = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "basic")
        st = got.get("status") or {}
        return all(
            st[c]["phase"] == "Normal" and st[c]["statefulSet"]["updatedReplicas"] == n
            for c, n in (("pd", 1), ("tikv", 2), ("tidb", 2))
        )

    # TiDB Operator's documented restart: an annotation on the component's pods.
    t_ann = time.monotonic()
    custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "basic", {"spec": {
        "tidb": {"annotations": {"tidb.pingcap.com/restartedAt": "2026-12-03T06:50"}}}})  # fmt: skip
    wait_for(lambda: deletions(t_ann) == ["basic-tidb-1", "basic-tidb-0"] and all_normal(),
             30, "TiDB rolled")  # fmt: skip
    time.sleep(0.3)
    assert rec.phase_names("tidb", t_ann) == ["Upgrade", "Normal"]
    assert rec.phase_names("tikv", t_ann) == rec.phase_names("pd", t_ann) == []

    t_ver = time.monotonic()
    custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "basic",
                                          {"spec": {"version": "v8.1.1"}})  # fmt: skip
    order = ["basic-pd-0", "basic-tikv-1", "basic-tikv-0", "basic-tidb-1", "basic-tidb-0"]
    wait_for(lambda: deletions(t_ver) == order and all_normal(), 60, "PD, TiKV, TiDB rolled")
    got = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "basic")
    assert {c: got["status"][c]["image"] for c in ("pd", "tikv", "tidb")} == {
        c: f"pingcap/{c}:v8.1.1" for c in ("pd", "tikv", "tidb")
    }
    # One component after the other: TiKV's first restart after PD is Normal again.
    pd_done = next(t for t, p in rec.phases["pd"] if p == "Normal" and t > t_ver)
    tikv_start = next(t for t, p in rec.phases["tikv"] if p == "Upgrade" and t > t_ver)
    assert tikv_start >= pd_done


def test_a_stand_in_operator_started_anew_mid_roll_finishes_the_roll_in_order(
    bed_op: tuple[client.CustomObjectsApi, Recorder], api: client.ApiClient, namespace: str
) -> None:
    custom, rec = bed_op
    _create(custom, namespace, replicas=3, tolerations=TOLERATE_BENCH_NODE)
    _settled(custom, namespace, 3, 30)
    rev = _tikv_status(custom, namespace)["statefulSet"]["updateRevision"]
    t0 = _patch(custom, namespace, {"config": {"storage": {"reserve-space": "0MB"}}})
    wait_for(lambda: any(lf.name == "basic-tikv-2" and lf.deleted for lf in rec.pods.values()),
             10, "basic-tikv-2 deleted")  # fmt: skip
    rec.operators[0].stop()  # the phase and revisions it left are in the TidbCluster's status
    time.sleep(2)
    assert _tikv_status(custom, namespace)["phase"] == "Upgrade"
    rec.operators.append(_operator(api, namespace))
    _settled(custom, namespace, 3, 60, old_rev=rev)
    gone = sorted((lf for lf in rec.pods.values() if lf.deleted and lf.deleted > t0),
                  key=lambda lf: lf.deleted or 0)  # fmt: skip
    assert [lf.name for lf in gone] == ["basic-tikv-2", "basic-tikv-1", "basic-tikv-0"]
    assert rec.phase_names("tikv", t0) == ["Upgrade", "Normal"]
