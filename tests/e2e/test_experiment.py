"""BenchmarkExperiment on the test bed: docs/field-story.md's "TiKV 2 -> 3", put back (#27).

A stand-in TiDB Operator (testbed.standin_operator) answers the experiment's patches as TiDB
Operator v1 does: the new TiKV pod is created without a node and the bed's real scheduler
places it, with the cluster's maxSkew-1 spread, tolerations and affinity. The runs' SQL goes
to MariaDB and their PD reads to a FakePD; their preflight (Enforce) judges where the pods
really are. Each test has its own namespace, stand-in operator and cluster; a controller of
this module's namespaces (killed and restarted by one test) serves them.
"""

from __future__ import annotations

import copy
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client

from e2e.conftest import SESSION, Controller, module_controller
from testbed.cadvisor import CPU_OF_ANNOTATION
from testbed.cluster import Testbed
from testbed.fake_pd import FakePD
from testbed.kube import (
    CONTROL_PLANE_TAINT,
    delete_namespace,
    has_default_service_account,
    tidbcluster_manifest,
    wait_for,
)
from testbed.runs import RunBed, add_db_secret, tidb_bench_report
from testbed.standin_operator import GROUP, PLURAL, VERSION, StandinOperator

pytestmark = pytest.mark.e2e

PREFIX = f"ex{SESSION}"
TOLERATE_BENCH_NODE = [{"key": CONTROL_PLANE_TAINT["key"], "operator": "Exists",
                        "effect": "NoSchedule"}]  # fmt: skip
#: What a production TiKV carries on Kubernetes < 1.25 (docs/experiments.md): the taint keeps
#: it off the benchmark node, and this takes the node out of its spread's domains.
OFF_BENCH_NODE = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [
        {"key": "tidbbench.io/bench-node", "operator": "DoesNotExist"}]}]}}}  # fmt: skip
EXPERIMENT_TIMEOUT = 240


@dataclass
class ExpBed:
    """A namespace with the Secret `db`, its stand-in TiDB Operator, and a FakePD."""

    runs: RunBed
    custom: client.CustomObjectsApi
    pd: FakePD

    @property
    def namespace(self) -> str:
        return self.runs.namespace

    def cluster(self, **tikv: Any) -> dict[str, Any]:
        """`basic`: PD 1, TiKV 2 (maxSkew 1, plus `tikv`), TiDB 1, settled; its spec."""
        tc = tidbcluster_manifest(
            "basic", self.namespace, replicas={"pd": 1, "tikv": 2, "tidb": 1}, spread={"tikv": 1}
        )
        tc["spec"]["tikv"].update(tikv)
        self.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL, tc)
        self.settled(2)
        return self.tc()["spec"]

    def tc(self) -> dict[str, Any]:
        return dict(
            self.custom.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, "basic"
            )
        )

    def settled(self, tikv: int, timeout: float = 60) -> None:
        def done() -> bool:
            status = self.tc().get("status") or {}
            phases = {c: (status.get(c) or {}).get("phase") for c in ("pd", "tikv", "tidb")}
            sts = (status.get("tikv") or {}).get("statefulSet") or {}
            return set(phases.values()) == {"Normal"} and sts.get("readyReplicas") == tikv

        wait_for(done, timeout, f"TiKV {tikv} settled")

    def tikv_nodes(self) -> dict[str, str]:
        pods = self.runs.core.list_namespaced_pod(
            self.namespace, label_selector="app.kubernetes.io/component=tikv"
        ).items
        return {
            p.metadata.name: p.spec.node_name for p in pods if not p.metadata.deletion_timestamp
        }

    def experiment(
        self,
        name: str,
        variants: list[dict[str, Any]],
        run_settings: dict[str, Any] | None = None,
        **spec: Any,
    ) -> None:
        run = self.runs.manifest(
            "template", pd_url=self.pd.url, cluster={"name": "basic"}, threads=[2, 4],
            durationSeconds=3, preflight={"policy": "Enforce", "timeoutSeconds": 60},
            **(run_settings or {}),
        )["spec"]  # fmt: skip
        body = {
            "apiVersion": "tidbbench.io/v1alpha1",
            "kind": "BenchmarkExperiment",
            "metadata": {"name": name},
            "spec": {
                "cluster": {"name": "basic", "namespace": self.namespace, "kind": "TidbCluster"},
                "run": run,
                "variants": variants,
                **spec,
            },
        }
        self.custom.create_namespaced_custom_object(
            "tidbbench.io", "v1alpha1", self.namespace, "benchmarkexperiments", body
        )

    def get(self, name: str) -> dict[str, Any]:
        return dict(
            self.custom.get_namespaced_custom_object(
                "tidbbench.io", "v1alpha1", self.namespace, "benchmarkexperiments", name
            )
        )

    def wait(self, name: str, timeout: float = EXPERIMENT_TIMEOUT) -> dict[str, Any]:
        def done() -> dict[str, Any] | None:
            exp = self.get(name)
            phase = (exp.get("status") or {}).get("phase")
            return exp if phase in ("Succeeded", "Failed", "Cancelled") else None

        return dict(wait_for(done, timeout, f"experiment {name} finished", interval=0.5))

    def phase(self, name: str) -> str | None:
        return (self.get(name).get("status") or {}).get("phase")


@pytest.fixture(scope="module")
def exp_controller(testbed: Testbed, crds: None) -> Iterator[Controller]:
    """A controller of this module's namespaces (one test kills it)."""
    yield from module_controller(testbed, PREFIX, {})


def exp_bed(
    prefix: str,
    api: client.ApiClient,
    core: client.CoreV1Api,
    mariadb: dict[str, Any],
    fake_pd: FakePD,
    min_ready_seconds: float = 1.0,
) -> Iterator[ExpBed]:
    """A namespace `<prefix>-<random>` with its Secret and stand-in TiDB Operator, for a
    fixture to `yield from`; what the RunBed started is stopped, the namespace deleted."""
    ns = f"{prefix}-{secrets.token_hex(3)}"
    core.create_namespace({"metadata": {"name": ns}})
    wait_for(lambda: has_default_service_account(core, ns), 30, f"ServiceAccount in {ns}")
    add_db_secret(core, ns, mariadb)
    operator = StandinOperator(api, [ns], interval=0.2, min_ready_seconds=min_ready_seconds).start()
    runs = RunBed(api, core, ns, mariadb)
    try:
        yield ExpBed(runs, client.CustomObjectsApi(api), fake_pd)
    finally:
        runs.close()
        operator.stop()
        delete_namespace(core, ns)


@pytest.fixture
def exp(
    api: client.ApiClient, core: client.CoreV1Api, mariadb: dict[str, Any], fake_pd: FakePD
) -> Iterator[ExpBed]:
    yield from exp_bed(PREFIX, api, core, mariadb, fake_pd)


def variant_entry(status: dict[str, Any], name: str) -> dict[str, Any]:
    return next(v for v in status["variants"] if v["name"] == name)


def test_unprotected_the_third_tikv_lands_on_the_benchmark_node_is_not_measured_and_is_put_back(
    exp: ExpBed, exp_controller: Controller
) -> None:
    found = exp.cluster()
    assert sorted(exp.tikv_nodes().values()) == ["node2", "node3"]
    # The home lab's node1 without its taint: the variant lets TiKV onto it and adds one.
    exp.experiment("story", [{"name": "tikv-3", "patch": {
        "tikv": {"replicas": 3, "tolerations": TOLERATE_BENCH_NODE}}}])  # fmt: skip
    seen: dict[str, str] = {}

    def landed() -> bool:
        seen.update(exp.tikv_nodes())
        return (exp.phase("story") or "") in ("Succeeded", "Failed", "Cancelled")

    wait_for(landed, EXPERIMENT_TIMEOUT, "the experiment to end", interval=0.3)
    st = exp.get("story")["status"]
    print(f"\n{st['message']}\nvariants: {[(v['name'], v['phase']) for v in st['variants']]}")
    assert seen.get("basic-tikv-2") == "node1", seen  # where the real scheduler put it
    assert st["phase"] == "Succeeded", st
    assert variant_entry(st, "baseline")["phase"] == "Succeeded", st
    tikv3 = variant_entry(st, "tikv-3")
    assert tikv3["phase"] == "Skipped", st
    assert "basic-tikv-2" in tikv3["skippedReason"] and "node1" in tikv3["skippedReason"], tikv3
    assert tikv3.get("summary") is None, tikv3
    # Put back: TiKV 2, no toleration, the new pod gone; the restore waited for it.
    assert st["restored"]["settled"] is True, st
    exp.settled(2)
    assert exp.tc()["spec"] == found
    assert sorted(exp.tikv_nodes().values()) == ["node2", "node3"]
    assert [d.get("summary", {}).get("peakQps", 0) > 0 for d in st["variants"]] == [True, False]


def test_protected_the_third_tikv_is_measured_after_it_settles_and_compared_with_the_baseline(
    exp: ExpBed, exp_controller: Controller, testbed: Testbed, kubelet_prometheus: str
) -> None:
    found = exp.cluster(affinity=OFF_BENCH_NODE)
    # The TiDB stand-in shows MariaDB's CPU, read by the bed's Prometheus: server resources.
    exp.runs.annotate("basic-tidb-0", {CPU_OF_ANNOTATION: "mariadb"})
    exp.experiment(
        "protected", [{"name": "tikv-3", "patch": {"tikv": {"replicas": 3}}}],
        run_settings={"metrics": {"prometheusURL": kubelet_prometheus}},
    )  # fmt: skip
    seen: dict[str, str] = {}

    def ended() -> bool:
        seen.update(exp.tikv_nodes())
        return (exp.phase("protected") or "") in ("Succeeded", "Failed", "Cancelled")

    wait_for(ended, EXPERIMENT_TIMEOUT, "the experiment to end", interval=0.3)
    st = exp.get("protected")["status"]
    assert st["phase"] == "Succeeded", st
    assert seen.get("basic-tikv-2") in ("node2", "node3"), seen
    base, tikv3 = variant_entry(st, "baseline"), variant_entry(st, "tikv-3")
    assert (base["phase"], tikv3["phase"]) == ("Succeeded", "Succeeded"), st
    assert tikv3["settleSeconds"] > 0 and tikv3["settledAt"] >= tikv3["patchAppliedAt"], tikv3
    assert base["summary"]["peakQps"] > 0 and tikv3["summary"]["peakQps"] > 0, st
    # The variant's run measured the cluster with three TiKV (its environment says so).
    run = exp.runs.get(tikv3["run"])
    assert run["status"]["phase"] == "Succeeded"
    # Its summary keeps the peak step's efficiency, as the run's own step has it.
    peak = max((s for s in run["status"]["steps"] if s.get("valid")), key=lambda s: s["qps"])
    res = peak.get("resources") or {}
    assert res.get("qpsPerCore", 0) > 0, res
    assert tikv3["summary"]["qpsPerCore"] == res["qpsPerCore"], (tikv3, res)
    assert tikv3["summary"]["cpuMsPerQuery"] == res["cpuMsPerQuery"], (tikv3, res)
    exp.settled(2)
    assert exp.tc()["spec"] == found
    report = tidb_bench_report(testbed.kubeconfig, "experiment/protected", "-n", exp.namespace)
    print(report)
    assert "baseline" in report and "tikv-3" in report and "| QPS per core |" in report


def test_the_controller_killed_while_a_variant_is_applied_and_again_while_restoring_puts_it_back(
    exp: ExpBed, exp_controller: Controller
) -> None:
    found = exp.cluster(affinity=OFF_BENCH_NODE)
    exp.experiment(
        "killed",
        [{"name": "tikv-3", "patch": {"tikv": {"replicas": 3, "config": {"log-level": "warn"}}}}],
        baseline=False,
    )
    applied = wait_for(
        lambda: (exp.get("killed").get("status") or {}).get("applied"), 60, "the variant applied"
    )
    exp_controller.kill()
    phase_when_killed = exp.phase("killed")
    time.sleep(2)
    exp_controller.start()
    wait_for(lambda: exp.phase("killed") == "Restoring", 180, "the restore")
    exp_controller.kill()
    time.sleep(2)
    exp_controller.start()
    st = exp.wait("killed")["status"]
    print(f"\nkilled in {phase_when_killed} ({applied}) and in Restoring: {st['message']}")
    assert st["phase"] == "Succeeded", st
    assert st["restored"]["settled"] is True
    exp.settled(2)
    assert exp.tc()["spec"] == found
    assert variant_entry(st, "tikv-3")["phase"] == "Succeeded", st


def test_a_dry_run_writes_the_plan_and_changes_nothing(
    exp: ExpBed, exp_controller: Controller
) -> None:
    found = exp.cluster()
    exp.experiment("dry", [{"name": "tikv-4", "patch": {"tikv": {"replicas": 4}}}], dryRun=True)
    st = exp.wait("dry", timeout=60)["status"]
    assert st["phase"] == "Succeeded", st
    plan = "\n".join(st["plan"])
    print("\n" + plan)
    assert "tikv-4" in plan and '"replicas":4' in plan.replace(" ", ""), plan
    assert "replicas" in st["plan"][-1], plan  # the restore
    assert exp.tc()["spec"] == found
    runs = exp.custom.list_namespaced_custom_object(
        "tidbbench.io", "v1alpha1", exp.namespace, "benchmarkruns"
    )["items"]
    assert runs == []


def test_deleting_an_experiment_mid_variant_restores_the_cluster_before_it_goes(
    exp: ExpBed, exp_controller: Controller
) -> None:
    found = exp.cluster(affinity=OFF_BENCH_NODE)
    variant = copy.deepcopy({"name": "tikv-3", "patch": {"tikv": {"replicas": 3}}})
    exp.experiment("gone", [variant], baseline=False)
    wait_for(lambda: (exp.get("gone").get("status") or {}).get("applied"), 60, "applied")
    exp.custom.delete_namespaced_custom_object(
        "tidbbench.io", "v1alpha1", exp.namespace, "benchmarkexperiments", "gone"
    )

    def gone() -> bool:
        try:
            exp.get("gone")
        except client.ApiException as e:
            return e.status == 404
        return False

    wait_for(gone, 120, "the experiment gone after its restore")
    exp.settled(2)
    assert exp.tc()["spec"] == found


def test_one_experiment_or_run_per_cluster_each_waits_naming_the_other(
    exp: ExpBed, exp_controller: Controller
) -> None:
    found = exp.cluster(affinity=OFF_BENCH_NODE)
    # A run of someone else measures the cluster (the same target as the experiment's runs).
    exp.runs.create(exp.runs.manifest("nightly", cluster={"name": "basic"}, threads=[2],
                                      durationSeconds=12))  # fmt: skip
    wait_for(lambda: (exp.runs.get("nightly").get("status") or {}).get("phase") == "Running",
             60, "nightly running")  # fmt: skip
    exp.experiment("after", [{"name": "tikv-3", "patch": {"tikv": {"replicas": 3}}}],
                   baseline=False)  # fmt: skip
    waiting = wait_for(
        lambda: (exp.get("after").get("status") or {}).get("message") or "", 30, "a message"
    )
    assert exp.phase("after") in (None, "Pending"), waiting
    assert waiting == f"waiting: BenchmarkRun {exp.namespace}/nightly is measuring the cluster"
    assert exp.tc()["spec"] == found, "nothing changed while the run measured"
    # Once it has finished the experiment goes; a run created meanwhile waits for it.
    wait_for(lambda: exp.get("after").get("status", {}).get("applied"), 90, "tikv-3 applied")
    exp.runs.create(exp.runs.manifest("late", cluster={"name": "basic"}, threads=[2],
                                      durationSeconds=2))  # fmt: skip
    late = wait_for(lambda: exp.runs.get("late").get("status", {}).get("waitingFor"), 30, "late")
    assert late == f"BenchmarkExperiment {exp.namespace}/after", late
    st = exp.wait("after")["status"]
    assert st["phase"] == "Succeeded", st
    run = exp.runs.wait("late", timeout=120)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    # It started only after the cluster was put back.
    assert run["status"]["startedAt"] >= st["restored"]["at"], (run["status"], st["restored"])
