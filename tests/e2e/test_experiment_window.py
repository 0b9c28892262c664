"""An operations window through a rolling restart of the TiDB stand-in, on the test bed (#27).

The run's SQL goes through testbed.tidb_proxy.TidbProxy in migrate mode (TiDB behind
TiProxy): when the cluster's one TiDB stand-in pod is replaced, its connections are held
until the new pod is Ready and then go on, so the load dips instead of dying (Debian's
sysbench cannot reconnect: docs/testbed.md). The stand-in TiDB Operator rolls TiDB on the
operation's annotation, and again when the experiment puts the spec back. The experiment's
PD reads go to a FakePD. `TIDB_BENCH_SAVE_WINDOW=<file>` saves the experiment, its run and
the run's results ConfigMaps as a List (what `tidb-bench report` draws; the docs' chart).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from kubernetes import client

from e2e.conftest import SESSION, Controller, module_controller
from e2e.test_experiment import ExpBed, exp_bed
from testbed.cluster import Testbed
from testbed.fake_pd import FakePD
from testbed.kube import tidbcluster_manifest, wait_for
from testbed.runs import why_not
from testbed.standin_operator import GROUP, PLURAL, VERSION

pytestmark = pytest.mark.e2e

PREFIX = f"ew{SESSION}"
#: A StatefulSet's minReadySeconds for the stand-ins: each roll takes a few seconds to settle.
MIN_READY_SECONDS = 3.0
AFTER_SECONDS = 12
#: How long the new TiDB pod is Ready before the proxy routes to it: a TiDB's start and
#: TiProxy's health check, which a stand-in (Ready at once) does not take.
TIDB_START_SECONDS = 3.0
TOLERANCE_PERCENT = 10
#: The held load: a fixed rate (sysbench --rate, open loop) well under what the bed serves.
#: Closed-loop threads alone swing the one-second QPS by up to ~40% undisturbed on the bed's
#: two shared cores (6,346 to 15,881 around a level of 10,536 in one run), so a 10% band
#: would time that noise rather than the restart.
RATE = 2000
#: What the guard reports of the TiDB pods being replaced and of the TiDB phase.
ROLL_EVENTS = {"PodRecreated", "PodDeleted", "PodCreated", "ClusterPhase"}


@pytest.fixture(scope="module")
def window_controller(testbed: Testbed, crds: None) -> Iterator[Controller]:
    """A controller of this module's namespaces."""
    yield from module_controller(testbed, PREFIX, {})


@pytest.fixture
def exp(
    api: client.ApiClient, core: client.CoreV1Api, mariadb: dict[str, Any], fake_pd: FakePD
) -> Iterator[ExpBed]:
    yield from exp_bed(PREFIX, api, core, mariadb, fake_pd, MIN_READY_SECONDS)


def tidb_settled(exp: ExpBed) -> bool:
    status = exp.tc().get("status") or {}
    tidb = status.get("tidb") or {}
    sts = tidb.get("statefulSet") or {}
    return tidb.get("phase") == "Normal" and sts.get("readyReplicas") == 1


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def save_window(exp: ExpBed, name: str, path: str) -> None:
    """The experiment, its run and the run's results ConfigMaps as a List."""
    experiment = exp.get(name)
    run_name = experiment["status"]["window"]["run"]
    run = exp.runs.get(run_name)
    cms = exp.runs.core.list_namespaced_config_map(
        exp.namespace, label_selector=f"tidbbench.io/run={run_name},tidbbench.io/role=results"
    ).items
    configmaps = [exp.runs.api.sanitize_for_serialization(cm) for cm in cms]
    items = [experiment, run] + [{"apiVersion": "v1", "kind": "ConfigMap", **c} for c in configmaps]
    for item in items:
        item["metadata"].pop("managedFields", None)
    with open(path, "w") as f:
        json.dump({"apiVersion": "v1", "kind": "List", "items": items}, f, indent=1)
        f.write("\n")


def test_a_rolling_restart_of_tidb_under_load_records_the_dip_the_recovery_and_the_restart(
    exp: ExpBed, window_controller: Controller
) -> None:
    tc = tidbcluster_manifest("basic", exp.namespace, replicas={"pd": 1, "tikv": 1, "tidb": 1})
    exp.custom.create_namespaced_custom_object(GROUP, VERSION, exp.namespace, PLURAL, tc)
    wait_for(lambda: tidb_settled(exp), 60, "TiDB settled")
    found = exp.tc()["spec"]
    proxy = exp.runs.tidb_proxy("basic", migrate=True, ready_seconds=TIDB_START_SECONDS)
    run = exp.runs.manifest(
        "template", pd_url=exp.pd.url, cluster={"name": "basic"}, target=proxy.target,
        threads=[4], rates=[RATE], durationSeconds=35, warmupSeconds=0, reportIntervalSeconds=1,
    )["spec"]  # fmt: skip
    restart = {"tidb.pingcap.com/restartedAt": "2026-12-03T10:00"}
    body = {
        "apiVersion": "tidbbench.io/v1alpha1",
        "kind": "BenchmarkExperiment",
        "metadata": {"name": "roll"},
        "spec": {
            "cluster": {"name": "basic", "namespace": exp.namespace, "kind": "TidbCluster"},
            "run": run,
            "operation": {
                "name": "restart-tidb",
                "patch": {"tidb": {"annotations": restart}},
                "afterSeconds": AFTER_SECONDS,
                "tolerancePercent": TOLERANCE_PERCENT,
            },
        },
    }
    exp.custom.create_namespaced_custom_object(
        "tidbbench.io", "v1alpha1", exp.namespace, "benchmarkexperiments", body
    )
    st = exp.wait("roll", timeout=240)["status"]
    if os.environ.get("TIDB_BENCH_SAVE_WINDOW"):
        save_window(exp, "roll", os.environ["TIDB_BENCH_SAVE_WINDOW"])
    win = st.get("window") or {}
    numbers = {k: v for k, v in win.items() if k != "events"}
    print("\nstatus.window:", json.dumps(numbers, indent=1))
    for e in win.get("events") or []:
        print(f"  {e['at']} {e['source']:10} {e['what']:16} {e.get('object', '')}: {e['message']}")
    print("proxy:", {n: vars(c) for n, c in proxy.counts.items()})
    print("run:", why_not(exp.runs.get(win["run"])["status"]))
    assert st["phase"] == "Succeeded", st

    applied = at(win["appliedAt"])
    assert win["levelQps"] > 0, win
    assert win["dipPercent"] > TOLERANCE_PERCENT, win
    assert at(win["worstAt"]) > applied, win
    assert win["recoverySeconds"] is not None and win["recoverySeconds"] > 0, win
    assert at(win["recoveredAt"]) > at(win["worstAt"]), win
    events = win["events"]
    assert [at(e["at"]) for e in events] == sorted(at(e["at"]) for e in events), events
    whats = [e["what"] for e in events]
    assert whats[0] == "OperationApplied" and "Settled" in whats, whats
    settled = whats.index("Settled")
    rolled = [e for e in events if e["what"] in ROLL_EVENTS and e["source"] != "Experiment"]
    assert rolled, whats
    assert any(applied <= at(e["at"]) <= at(events[settled]["at"]) for e in rolled), events
    # The proxy moved the connections of the replaced pod (the run's, at least) to the new one.
    assert proxy.counts["basic-tidb-0"].migrated >= 4, proxy.counts
    assert proxy.totals().cut == 0

    # Put back: the annotation gone, and TiDB rolled again and settled.
    assert st["restored"]["settled"] is True, st
    wait_for(lambda: tidb_settled(exp), 60, "TiDB settled after the restore")
    assert exp.tc()["spec"] == found
