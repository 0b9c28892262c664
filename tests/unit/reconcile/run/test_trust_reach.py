"""What a run's author can reach through the controller: refused at Pending (the platform
team's settings), and a spec frozen once the run left Pending (docs/trust.md)."""

from __future__ import annotations

import copy

import pytest

from tidb_bench_operator.domain.queue import queue_entry, turn
from tidb_bench_operator.domain.trust.reach import Reach
from unit.reconcile.run.support import (
    CLUSTER_NS,
    NS,
    Bed,
    result_doc,
    run_body,
    run_spec,
    series_log,
)


def args_of(bed: Bed, job: str) -> list[str]:
    return list(bed.kube.job(NS, job)["spec"]["template"]["spec"]["containers"][0]["args"])


@pytest.mark.parametrize(
    ("changes", "reach", "reason", "setting"),
    [
        ({}, Reach(), "CrossNamespaceNotAllowed", "TIDB_BENCH_ALLOW_CROSS_NAMESPACE"),
        ({"cluster": {"name": "basic"}, "image": "evil.example/x:1"}, Reach(),
         "ImageOverrideNotAllowed", "TIDB_BENCH_ALLOW_IMAGE_OVERRIDE"),
        ({"target": {"host": "10.0.0.9"}}, Reach(any_namespace=True, operator_targets_only=True),
         "TargetNotAllowed", "TIDB_BENCH_OPERATOR_TARGETS_ONLY"),
        ({"metrics": {"prometheusURL": "http://10.0.0.9:9090"}},
         Reach(any_namespace=True, operator_targets_only=True), "TargetNotAllowed",
         "TIDB_BENCH_OPERATOR_TARGETS_ONLY"),
    ],
    ids=["cross-namespace", "image-override", "explicit-target", "prometheus-url"],
)  # fmt: skip
def test_a_run_asking_for_more_than_the_settings_allow_fails_at_pending_reading_nothing(
    changes: dict[str, object], reach: Reach, reason: str, setting: str
) -> None:
    bed = Bed(run_spec(**changes), reach=reach)
    bed.kube.add_tidb_cluster({**bed.kube.tidbclusters[(CLUSTER_NS, "basic")],
                               "metadata": {"name": "basic", "namespace": NS}})  # fmt: skip
    bed.reconcile()
    st = bed.failed_with(reason)
    assert setting in st["message"] and "docs/trust.md" in st["message"]
    assert bed.kube.event_reasons() == ["Pending", reason]
    # Nothing read (no cluster, no node, no pod) and nothing created.
    assert bed.kube.asked == []
    assert bed.kube.create_job_calls == [] and bed.kube.configmaps == {}
    assert bed.kube.service_accounts == {}
    assert bed.preflight.calls == []
    assert "endpoint" not in st and "environment" not in st and "admitted" not in st


def test_with_the_setting_on_a_cross_namespace_run_and_an_image_override_run() -> None:
    bed = Bed(run_spec(image="registry.local/runner:2"),
              reach=Reach(any_namespace=True, image_override=True))  # fmt: skip
    bed.to_running()
    job = bed.kube.job(NS, "sweep-s0-c0")["spec"]["template"]["spec"]["containers"][0]
    assert job["image"] == "registry.local/runner:2"
    assert f"--host=basic-tidb.{CLUSTER_NS}" in job["args"]


def finish_step(bed: Bed, step: int, threads: int) -> None:
    bed.kube.finish_job(NS, f"sweep-s{step}-c0", result_doc(threads, 9000.0, 2.0),
                        log=series_log([9000.0]))  # fmt: skip
    bed.clock.advance(40)


def test_an_edit_after_pending_is_ignored_with_a_condition_and_one_event_per_generation() -> None:
    bed = Bed(run_spec(threads=[8, 16]), reach=Reach(any_namespace=True))
    bed.to_running()
    admitted = copy.deepcopy(bed.body["spec"])
    assert bed.status["admitted"]["generation"] == 1
    key_before = queue_entry(bed.body)
    assert "--threads=8" in args_of(bed, "sweep-s0-c0")

    # Another cluster, an explicit target and other threads: generation 2.
    bed.body["spec"] = {**admitted, "cluster": {"name": "other", "namespace": "elsewhere"},
                        "target": {"host": "10.9.9.9", "pdURL": "http://10.9.9.9:2379"},
                        "threads": [1024]}  # fmt: skip
    bed.body["metadata"]["generation"] = 2
    assert queue_entry(bed.body) == key_before, "the queue key is the admitted spec's"
    seen = len(bed.kube.events)
    bed.reconcile()
    cond = bed.condition("SpecChangeIgnored")
    assert (cond["status"], cond["reason"]) == ("True", "SpecFrozen")
    assert cond["message"].startswith(
        "spec changed after the run left Pending (generation 2: spec.cluster, spec.target, "
        "spec.threads) and is ignored: the run goes on with the spec admitted at generation 1"
    ), cond["message"]
    assert [e["reason"] for e in bed.kube.events[seen:]] == ["SpecChangeIgnored"]
    assert bed.kube.events[seen]["type"] == "Warning"

    # The next step runs the admitted thread count against the admitted host.
    finish_step(bed, 0, 8)
    bed.reconcile()
    args = args_of(bed, "sweep-s1-c0")
    assert "--threads=16" in args and f"--host=basic-tidb.{CLUSTER_NS}" in args
    assert not any("10.9.9.9" in a or "1024" in a for a in args)
    assert bed.status["endpoint"]["host"] == f"basic-tidb.{CLUSTER_NS}"
    # No second Event for the same generation; a new edit brings one.
    assert bed.kube.event_reasons().count("SpecChangeIgnored") == 1
    bed.body["spec"]["threads"] = [2048]
    bed.body["metadata"]["generation"] = 3
    bed.reconcile()
    assert bed.kube.event_reasons().count("SpecChangeIgnored") == 2
    assert "generation 3" in bed.condition("SpecChangeIgnored")["message"]

    finish_step(bed, 1, 16)
    bed.reconcile_until("Succeeded")
    assert [s["threads"] for s in bed.status["steps"]] == [8, 16]
    assert bed.status["fingerprint"]["spec"]["threads"] == "[8, 16]"

    # Edited back to the admitted spec: the condition says so.
    bed2 = Bed(run_spec(threads=[8, 16]), reach=Reach(any_namespace=True))
    bed2.to_running()
    bed2.body["spec"]["threads"] = [64]
    bed2.body["metadata"]["generation"] = 2
    bed2.reconcile()
    bed2.body["spec"]["threads"] = [8, 16]
    bed2.body["metadata"]["generation"] = 3
    bed2.reconcile()
    cond = bed2.condition("SpecChangeIgnored")
    assert (cond["status"], cond["reason"]) == ("False", "SpecAsAdmitted")


def test_an_edit_while_pending_is_what_is_admitted() -> None:
    bed = Bed(run_spec(threads=[8]), reach=Reach(any_namespace=True))
    bed.body["spec"]["threads"] = [4]
    bed.body["metadata"]["generation"] = 2
    bed.to_running()
    assert bed.status["admitted"]["generation"] == 2
    assert "--threads=4" in args_of(bed, "sweep-s0-c0")
    assert "SpecChangeIgnored" not in bed.kube.event_reasons()


def test_a_run_admitted_by_a_controller_that_kept_no_copy_is_frozen_at_its_next_look() -> None:
    bed = Bed(run_spec(threads=[8, 16]), reach=Reach(any_namespace=True))
    bed.to_running()
    del bed.body["status"]["admitted"]
    bed.reconcile()
    assert bed.status["admitted"]["generation"] == 1
    bed.body["spec"]["threads"] = [1]
    bed.body["metadata"]["generation"] = 2
    finish_step(bed, 0, 8)
    bed.reconcile()
    assert "--threads=16" in args_of(bed, "sweep-s1-c0")


def test_a_second_run_for_the_edited_to_cluster_is_not_let_in_by_the_edit() -> None:
    reach = Reach(any_namespace=True)
    bed = Bed(run_spec(), reach=reach)
    bed.to_running()
    bed.body["spec"]["cluster"] = {"name": "other", "namespace": CLUSTER_NS}
    bed.body["metadata"]["generation"] = 2
    bed.kube.add_run(bed.body)
    # A later run for the cluster the first was edited away from still waits for it.
    later = run_body("later", run_spec(), created="2024-06-01T01:30:00Z")
    bed.kube.add_run(later)
    found = queue_entry(later)
    assert found is not None
    listed = [queue_entry(r) for r in bed.kube.benchmark_runs()]
    entries = [e for k, e in filter(None, listed) if k == found[0]]
    assert turn(entries, found[1].uid).ahead == f"{NS}/sweep"
