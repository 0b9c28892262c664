"""A custom workload through the reconciler: refused by default, its ConfigMap and script key
checked at Pending creating nothing, and its Jobs mounting the ConfigMap (docs/workloads.md)."""

from __future__ import annotations

import json

import pytest

from tidb_bench_operator.domain.sysbench.custom import WORKLOADS_DIR, CustomScript
from tidb_bench_operator.domain.trust.reach import Reach
from unit.reconcile.run.support import NS, Bed, result_doc, run_spec, series_log

ORDERS = {
    "name": "orders",
    "configMapRef": {"name": "order-entry"},
    "script": "orders.lua",
    "options": {"warehouses": "int"},
    "args": ["--warehouses=2"],
}
ALLOWED = Reach(any_namespace=True, custom_workloads=True)


def spec(**changes: object) -> dict[str, object]:
    return run_spec(workloads=["oltp_point_select", "orders"], customWorkloads=[ORDERS], **changes)


def with_configmap(bed: Bed, data: dict[str, str] | None = None) -> Bed:
    files = {"orders.lua": "-- x", "order_common.lua": "-- y"} if data is None else data
    bed.kube.upsert_configmap({"metadata": {"name": "order-entry", "namespace": NS}, "data": files})
    return bed


def container(bed: Bed, job: str) -> dict[str, object]:
    pod = bed.kube.job(NS, job)["spec"]["template"]["spec"]
    return {"pod": pod, **pod["containers"][0]}


def test_by_default_a_custom_workload_fails_at_pending_reading_nothing() -> None:
    bed = with_configmap(Bed(spec(), reach=Reach(any_namespace=True)))
    bed.reconcile()
    st = bed.failed_with("CustomWorkloadNotAllowed")
    assert "TIDB_BENCH_ALLOW_CUSTOM_WORKLOADS=true" in st["message"]
    assert "(orders)" in st["message"]
    assert bed.kube.asked == [] and bed.kube.create_job_calls == []
    assert bed.kube.service_accounts == {}


@pytest.mark.parametrize(
    ("data", "reason", "said"),
    [
        (None, "WorkloadConfigMapNotFound",
         "spec.customWorkloads[0].configMapRef.name: ConfigMap 'order-entry' of custom workload "
         f"'orders' not found in namespace '{NS}'; create it from the script and the files it "
         f"requires: kubectl -n {NS} create configmap order-entry --from-file=orders.lua "
         "--from-file=<each file it requires>"),
        ({"order_common.lua": "-- y"}, "WorkloadKeyMissing",
         f"spec.customWorkloads[0].script: ConfigMap {NS}/order-entry has no key 'orders.lua' "
         "(it has: order_common.lua); add the script to it (--from-file=orders.lua) or set "
         "script to one of its .lua keys"),
    ],
    ids=["configmap-missing", "key-missing"],
)  # fmt: skip
def test_a_missing_configmap_or_key_fails_at_pending_creating_nothing(
    data: dict[str, str] | None, reason: str, said: str
) -> None:
    bed = Bed(spec(), reach=ALLOWED)
    if data is not None:
        with_configmap(bed, data)
    bed.reconcile()
    st = bed.failed_with(reason)
    assert st["message"] == said
    assert bed.kube.create_job_calls == [] and bed.kube.service_accounts == {}


def test_the_jobs_mount_the_configmap_and_carry_the_script_not_the_extra_args() -> None:
    bed = with_configmap(Bed(spec(extraArgs=["--range-size=5"], threads=[8]), reach=ALLOWED))
    bed.to_running()
    # The dataset Job: the sbtest tables for the built-in test, and the custom prepare.
    prepare = container(bed, "sweep-prepare")
    customs = [a for a in prepare["args"] if a.startswith("--custom=")]  # type: ignore[attr-defined]
    script = CustomScript.from_arg(customs[0].removeprefix("--custom="))
    assert script.path == f"{WORKLOADS_DIR}/orders/orders.lua"
    assert script.configmap == f"{NS}/order-entry" and script.args == ["--warehouses=2"]
    assert "--workload=oltp_point_select" in prepare["args"]  # type: ignore[operator]
    volumes = prepare["pod"]["volumes"]  # type: ignore[index]
    assert {"name": "workload-orders", "configMap": {"name": "order-entry"}} in volumes
    assert {"name": "workload-orders", "mountPath": f"{WORKLOADS_DIR}/orders",
            "readOnly": True} in prepare["volumeMounts"]  # type: ignore[operator]  # fmt: skip
    # The built-in step gets extraArgs and no ConfigMap; the custom step the reverse.
    first = container(bed, "sweep-s0-c0")
    assert "--sysbench-arg=--range-size=5" in first["args"]  # type: ignore[operator]
    assert not any(v["name"] == "workload-orders" for v in first["pod"]["volumes"])  # type: ignore[index]
    assert bed.status["steps"][1]["workload"] == "orders"
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 9000.0, 2.0), log=series_log([9000.0]))
    bed.clock.advance(40)
    for _ in range(5):
        bed.reconcile()
        if "sweep-s1-c0" in bed.kube.job_names(NS):
            break
    second = container(bed, "sweep-s1-c0")
    args = second["args"]
    assert "--workload=orders" in args  # type: ignore[operator]
    assert not any(a.startswith("--sysbench-arg") for a in args)  # type: ignore[attr-defined]
    custom = json.loads(next(a for a in args if a.startswith("--custom="))[9:])  # type: ignore[attr-defined]
    assert custom["name"] == "orders" and custom["options"] == {"warehouses": "int"}
