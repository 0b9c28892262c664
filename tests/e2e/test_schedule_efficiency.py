"""A schedule's efficiency verdict (#26) on real CPU: CPU per query against its baseline.

Nightly runs of a schedule measure the stand-in cluster `basic`, whose TiDB pod is bound to
MariaDB (the process that answers the SQL), through the test's Prometheus. On the planted
night a CPU burner is bound to the same TiDB pod: the server spends more CPU on the same
queries, and the efficiency verdict must say Regressed with its effect and interval, while
the quiet night says NoChange. Serial: the TiDB pod's CPU is MariaDB's, which every other
suite's runs would share.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from e2e.conftest import Controller
from testbed.cadvisor import BURN_ANNOTATION, CPU_OF_ANNOTATION
from testbed.kube import wait_for
from testbed.runs import GROUP, VERSION, RunBed, condition, why_not

pytestmark = [pytest.mark.e2e, pytest.mark.serial]

LABEL = "tidbbench.io/schedule"
#: The schedule's minimum effect (regression.maxQpsDropPercent, the efficiency verdict's too).
MIN_EFFECT = 50
#: 3 trials at 2 threads: the verdict is a rank test over trials (test_schedule.py says why
#: not 1 thread on this machine).
STEPS: dict[str, Any] = {
    "threads": [2],
    "durationSeconds": 3,
    "warmupSeconds": 1,
    "repeats": 3,
}
#: Two baseline nights of 3 trials: 3 against 6 trials can reach p 0.024 (a rank test), and
#: one night fewer keeps the serial phase short.
BASELINE_RUNS = 2
#: What the planted burner adds to the TiDB pod (on top of MariaDB's own CPU).
BURN = "1.0"


def schedule(name: str, template: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "BenchmarkSchedule",
        "metadata": {"name": name},
        "spec": {
            "schedule": "0 3 * * *",
            "suspend": True,
            "template": template,
            "successfulRunsHistoryLimit": 5,
            "regression": {"baselineRuns": BASELINE_RUNS, "maxQpsDropPercent": MIN_EFFECT},
        },
    }


def test_a_burner_bound_to_the_tidb_pod_on_the_planted_night_regresses_cpu_per_query(
    bed: RunBed, kubelet_prometheus: str, controller: Controller
) -> None:
    bed.cluster("basic", {"pd": ["node2"], "tikv": ["node2", "node3"], "tidb": ["node3"]})
    bed.annotate("basic-tidb-0", {CPU_OF_ANNOTATION: "mariadb"})
    template = bed.manifest(
        "unused", cluster={"name": "basic"}, metrics={"prometheusURL": kubelet_prometheus},
        **STEPS,
    )["spec"]  # fmt: skip
    custom = client.CustomObjectsApi(bed.api)
    custom.create_namespaced_custom_object(
        GROUP, VERSION, bed.namespace, "benchmarkschedules", schedule("nightly", template)
    )

    def night(name: str) -> dict[str, Any]:
        bed.create({
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "BenchmarkRun",
            "metadata": {"name": name, "labels": {LABEL: "nightly"}}, "spec": template,
        })  # fmt: skip
        run = bed.wait(name, timeout=300)
        assert run["status"]["phase"] == "Succeeded", why_not(run["status"])

        def judged() -> dict[str, Any] | None:
            got = bed.get(name)
            return got if condition(got, "EfficiencyRegressed") else None

        run = wait_for(judged, 30, f"the efficiency verdict on {name}", interval=1.0)
        eff = run["status"].get("efficiency") or {}
        cpu = [s["resources"].get("cpuMsPerQuery") for s in run["status"]["steps"]]
        print(
            f"\n{name}: QPS {[s['qps'] for s in run['status']['steps']]}, CPU ms per query "
            f"{cpu}, efficiency {eff.get('verdict')}: {eff.get('message')}"
        )
        return run

    for i in range(1, BASELINE_RUNS + 1):
        night(f"base-{i}")
    quiet = night("quiet")
    assert quiet["status"]["efficiency"]["verdict"] == "NoChange", quiet["status"]["efficiency"]
    assert condition(quiet, "EfficiencyRegressed")["status"] == "False"

    bed.annotate("basic-tidb-0", {BURN_ANNOTATION: BURN})
    try:
        planted = night("planted")
    finally:
        bed.annotate("basic-tidb-0", {BURN_ANNOTATION: None})
    eff = planted["status"]["efficiency"]
    assert eff["verdict"] == "Regressed", eff
    step = eff["steps"][0]
    assert step["verdict"] == "Regressed", eff
    assert step["intervalLowPercent"] <= step["effectPercent"] <= step["intervalHighPercent"]
    assert step["effectPercent"] >= MIN_EFFECT, eff
    assert condition(planted, "EfficiencyRegressed")["status"] == "True"
    print(
        f"planted: {step['medianQps']:.4f} vs {step['baselineMedianQps']:.4f} CPU ms per "
        f"query, {step['effectPercent']:+.1f}% (95% CI {step['intervalLowPercent']:+.1f}% … "
        f"{step['intervalHighPercent']:+.1f}%), p {step['pValue']:.4f}"
    )

    def schedule_says() -> dict[str, Any] | None:
        st = (
            custom.get_namespaced_custom_object(
                GROUP, VERSION, bed.namespace, "benchmarkschedules", "nightly"
            ).get("status")
            or {}
        )
        return st if st.get("efficiency") == "Regressed" else None

    st = wait_for(schedule_says, 30, "the schedule's efficiency Regressed", interval=1.0)
    assert [h.get("efficiency") for h in st["history"]][-2:] == ["NoChange", "Regressed"], st
