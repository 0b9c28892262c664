"""The experiment reconciler over a FakeKube: the order of its writes, the finalizer, refusals.

The stand-in "operator" here settles a TidbCluster at once (phases Normal, one Ready pod per
replica); the bed's stand-in TiDB Operator and real scheduler are tests/e2e/test_experiment.py.
"""

from __future__ import annotations

import copy
from typing import Any

from testbed.fake_kube import FakeClock, FakeKube
from tidb_bench_operator.reconcile.experiment.reconciler import FINALIZER, ExperimentReconciler

NS = "tidb"
RUN: dict[str, Any] = {
    "cluster": {"name": "basic"},
    "credentials": {"secretRef": {"name": "db"}},
    "workloads": ["oltp_point_select"],
    "threads": [1],
}


def tidbcluster(tikv: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "pingcap.com/v1alpha1",
        "kind": "TidbCluster",
        "metadata": {"name": "basic", "namespace": NS},
        "spec": {
            "version": "v8.1.0",
            "pd": {"replicas": 1}, "tikv": {"replicas": tikv}, "tidb": {"replicas": 1},
        },
    }  # fmt: skip


def settle(kube: FakeKube) -> None:
    """TiDB Operator and the kubelet at once: phases Normal, one Ready pod per replica."""
    tc = kube.tidbclusters[(NS, "basic")]
    tc["status"] = {c: {"phase": "Normal"} for c in ("pd", "tikv", "tidb")}
    kube.pod_store = {k: v for k, v in kube.pod_store.items() if k[0] != NS}
    for comp in ("pd", "tikv", "tidb"):
        for i in range(tc["spec"][comp]["replicas"]):
            kube.add_pod({
                "metadata": {"name": f"basic-{comp}-{i}", "namespace": NS, "labels": {
                    "app.kubernetes.io/instance": "basic", "app.kubernetes.io/component": comp,
                    "app.kubernetes.io/name": "tidb-cluster",
                    "app.kubernetes.io/managed-by": "tidb-operator"}},
                "spec": {"nodeName": "node2"},
                "status": {"phase": "Running",
                           "conditions": [{"type": "Ready", "status": "True"}]},
            })  # fmt: skip


def experiment(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "what-if", "namespace": NS, "uid": "u-1", "generation": 1},
        "spec": {
            "cluster": {"name": "basic", "namespace": NS, "kind": "TidbCluster"},
            "run": copy.deepcopy(RUN),
            "variants": [{"name": "tikv-3", "patch": {"tikv": {"replicas": 3}}}],
            **spec,
        },
    }


def world(**spec: Any) -> tuple[FakeKube, ExperimentReconciler]:
    kube = FakeKube(FakeClock())
    kube.add_tidb_cluster(tidbcluster())
    settle(kube)
    kube.add_experiment(experiment(**spec))
    return kube, ExperimentReconciler(kube, clock=kube.clock)


#: A finished run as the controller writes it: one step, its resources and its summary.
SUCCEEDED: dict[str, Any] = {
    "phase": "Succeeded",
    "summary": {"workload": "oltp_point_select", "peakQps": 1000.0, "peakThreads": 1,
                "peakLatencyMs": 2.5},
    "steps": [{
        "index": 0, "workload": "oltp_point_select", "threads": 1, "phase": "Succeeded",
        "qps": 1000.0, "valid": True,
        "resources": {
            "source": "cAdvisor", "serverCores": 0.5, "qpsPerCore": 2000.0, "cpuMsPerQuery": 0.5,
            "bottleneck": {"kind": "component", "subject": "basic-tidb-0",
                           "message": "tidb `basic-tidb-0` at 95% of its 0.5-core limit"},
        },
    }],
}  # fmt: skip


def finish_runs(kube: FakeKube, preflight: list[dict[str, Any]] | None = None) -> None:
    """Every run not yet finished Succeeds, or (given `preflight`) waits in its preflight."""
    for run in kube.runs.values():
        st = run.setdefault("status", {})
        if st.get("phase") in (None, "Pending"):
            if preflight is not None:
                run["status"] = {"phase": "Preflight", "preflight": {"checks": preflight}}
            else:
                run["status"] = SUCCEEDED


def drive(kube: FakeKube, rec: ExperimentReconciler, looks: int = 40, **run: Any) -> dict[str, Any]:
    for _ in range(looks):
        out = rec.reconcile(kube.experiment(NS, "what-if"))
        settle(kube)
        finish_runs(kube, **run)
        if out.requeue_seconds is None:
            break
    return kube.experiment(NS, "what-if")


def test_the_stash_is_written_before_the_first_patch_and_the_finalizer_goes_after_the_restore() -> (
    None
):
    kube, rec = world()
    exp = drive(kube, rec)
    st = exp["status"]
    assert st["phase"] == "Succeeded", st
    assert [v["phase"] for v in st["variants"]] == ["Succeeded", "Succeeded"]
    first_patch = next(i for i, w in enumerate(kube.writes) if w.startswith("patch"))
    assert kube.writes[0] == f"finalizers ['{FINALIZER}']"
    assert "status Stashing" in kube.writes[:first_patch]
    patches = [w for w in kube.writes if w.startswith("patch")]
    assert patches == [
        'patch TidbCluster {"tikv": {"replicas": 3}}',
        'patch TidbCluster {"tikv": {"replicas": 2}}',
    ]
    assert kube.writes[-1] == "finalizers []"
    assert kube.tidbclusters[(NS, "basic")]["spec"] == tidbcluster()["spec"]
    assert sorted(n for _, n in kube.runs) == ["what-if-baseline", "what-if-tikv-3"]
    assert st["admitted"]["spec"], "the spec that governs from the stash on is kept"


def test_without_the_patch_rights_it_fails_before_changing_anything_naming_the_overlay() -> None:
    kube, rec = world()
    kube.forbidden_kinds.add("TidbCluster")
    exp = drive(kube, rec)
    st = exp["status"]
    assert st["phase"] == "Failed", st
    assert "deploy/overlays/experiments" in st["message"], st
    assert not [w for w in kube.writes if w.startswith("patch")]
    assert kube.runs == {}
    assert exp["metadata"]["finalizers"] == []


def test_a_variant_whose_preflight_finds_a_pod_on_the_bench_node_is_skipped_and_its_run_deleted() -> (
    None
):
    kube, rec = world(baseline=False)
    unfair = [{"name": "bench-node-isolation", "status": "Fail",
               "message": "tikv basic-tikv-2 is on benchmark node node1"}]  # fmt: skip
    exp = drive(kube, rec, preflight=unfair)
    st = exp["status"]
    assert st["phase"] == "Succeeded", st
    [entry] = st["variants"]
    assert entry["phase"] == "Skipped"
    assert "basic-tikv-2" in entry["skippedReason"] and "node1" in entry["skippedReason"]
    assert kube.deleted_runs == ["what-if-tikv-3"]
    assert kube.tidbclusters[(NS, "basic")]["spec"] == tidbcluster()["spec"]


def test_an_edit_of_the_spec_after_the_stash_does_not_change_what_is_restored() -> None:
    kube, rec = world(baseline=False)
    for _ in range(3):  # finalizer, stash, the first patch
        rec.reconcile(kube.experiment(NS, "what-if"))
    edited = kube.experiments[(NS, "what-if")]
    edited["spec"]["variants"] = [{"name": "tikv-3", "patch": {"tidb": {"replicas": 5}}}]
    edited["metadata"]["generation"] = 2
    exp = drive(kube, rec)
    assert exp["status"]["phase"] == "Succeeded", exp["status"]
    assert kube.tidbclusters[(NS, "basic")]["spec"] == tidbcluster()["spec"]
    assert not any("tidb" in w and "5" in w for w in kube.writes if w.startswith("patch"))


def test_each_measured_variant_keeps_its_peak_and_the_peak_steps_efficiency() -> None:
    kube, rec = world()
    exp = drive(kube, rec)
    assert exp["status"]["phase"] == "Succeeded", exp["status"]
    for variant in exp["status"]["variants"]:
        assert variant["summary"] == {
            "peakQps": 1000.0, "peakThreads": 1, "peakLatencyMs": 2.5, "qpsPerCore": 2000.0,
            "cpuMsPerQuery": 0.5, "bottleneck": "tidb `basic-tidb-0` at 95% of its 0.5-core limit",
        }, variant  # fmt: skip
