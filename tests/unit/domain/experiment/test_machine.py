"""One reconcile of an experiment: stash, apply, settle, measure, restore — and restarts."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tidb_bench_operator.domain.api.experiment import (
    BenchmarkExperimentSpec,
    BenchmarkExperimentStatus,
    ExperimentPhase,
    VariantPhase,
    VariantSummary,
)
from tidb_bench_operator.domain.experiment.machine import (
    CreateRun,
    Decision,
    DeleteRun,
    Facts,
    PatchCluster,
    RunFacts,
    decide,
)
from tidb_bench_operator.domain.experiment.patch import merge
from unit.domain.experiment.support import KEY, TC, experiment

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
UNFAIR = "TiKV pod basic-tikv-3 is on the benchmark node node1"


@dataclass
class World:
    """The cluster and runs as the reconciler would read them; a patch makes the cluster move."""

    spec: dict[str, Any] = field(default_factory=lambda: copy.deepcopy(TC["spec"]))
    runs: dict[str, RunFacts] = field(default_factory=dict)
    moving: tuple[str, ...] = ()
    now: datetime = T0
    deleting: bool = False
    busy: str | None = None
    patches: list[dict[str, Any]] = field(default_factory=list)
    deleted_runs: list[str] = field(default_factory=list)

    def facts(self, status: BenchmarkExperimentStatus | None) -> Facts:
        run = None
        if status is not None and status.current is not None:
            name = status.variants[status.current].run
            run = self.runs.get(name or "")
        return Facts(experiment="what-if", now=self.now, specs={KEY: self.spec},
                     moving=self.moving, run=run, busy=self.busy, deleting=self.deleting)  # fmt: skip

    def perform(self, decision: Decision) -> None:
        for action in decision.actions:
            if isinstance(action, PatchCluster):
                for p in action.patches:
                    self.spec = merge(self.spec, p.patch)
                    self.patches.append(p.patch)
                self.moving = ("tikv: phase Scale, not Normal",)
            elif isinstance(action, CreateRun):
                self.runs.setdefault(action.name, RunFacts(phase="Running"))
            elif isinstance(action, DeleteRun):
                self.deleted_runs.append(action.name)


def step(
    spec: BenchmarkExperimentSpec, world: World, status: BenchmarkExperimentStatus | None
) -> BenchmarkExperimentStatus:
    """One reconcile: decide, write the status (through its wire form), act, let time pass."""
    decision = decide(spec, status, world.facts(status))
    written = BenchmarkExperimentStatus.model_validate(
        decision.status.model_dump(by_alias=True, exclude_none=True, mode="json")
    )
    world.perform(decision)
    world.now += timedelta(seconds=30)
    return written


def until(spec: BenchmarkExperimentSpec, world: World, status: Any, phase: ExperimentPhase) -> Any:
    for _ in range(20):
        status = step(spec, world, status)
        if status.phase is phase:
            return status
    raise AssertionError(f"never reached {phase}: {status.phase} {status.message}")


def finish_run(world: World, name: str, qps: float) -> None:
    world.runs[name] = RunFacts(
        phase="Succeeded", summary=VariantSummary(peak_qps=qps, peak_threads=64)
    )


def test_the_stash_is_written_before_any_patch_is_sent() -> None:
    spec, world = experiment(), World()
    status = step(spec, world, None)
    assert status.phase is ExperimentPhase.STASHING
    assert [e.pointer for e in status.stash] == [
        "/tidb/replicas", "/tikv/replicas", "/tikv/topologySpreadConstraints"
    ]  # fmt: skip
    assert world.patches == []
    assert len(status.plan) == 4


def test_a_whole_experiment_measures_baseline_and_variants_and_leaves_the_cluster_as_found() -> (
    None
):
    spec, world = experiment(), World()
    status = until(spec, world, None, ExperimentPhase.MEASURING)
    assert status.variant == "baseline" and "what-if-baseline" in world.runs
    finish_run(world, "what-if-baseline", 1000)
    status = step(spec, world, status)
    # The variant is recorded as applied in the status that goes out with its patch.
    assert status.phase is ExperimentPhase.APPLYING and status.applied == "tikv-4"
    assert world.spec["tikv"]["replicas"] == 4
    status = step(spec, world, status)
    assert status.phase is ExperimentPhase.SETTLING
    status = step(spec, world, status)
    assert status.phase is ExperimentPhase.SETTLING  # still moving
    world.moving = ()
    status = step(spec, world, status)
    assert status.phase is ExperimentPhase.MEASURING
    # From the patch sent (not from the look that saw the spec hold it): three 30 s looks.
    assert status.variants[1].settle_seconds == 90
    finish_run(world, "what-if-tikv-4", 900)
    status = until(spec, world, status, ExperimentPhase.SETTLING)
    assert world.spec["tikv"]["replicas"] == 3 and world.spec["tidb"]["replicas"] == 3
    assert "topologySpreadConstraints" not in world.spec["tikv"]
    world.moving = ()
    status = until(spec, world, status, ExperimentPhase.MEASURING)
    finish_run(world, "what-if-tidb-3", 950)
    status = until(spec, world, status, ExperimentPhase.RESTORING)
    world.moving = ()
    status = until(spec, world, status, ExperimentPhase.SUCCEEDED)
    assert world.spec == TC["spec"]
    assert status.restored is not None and status.restored.settled
    assert [
        (v.name, v.phase, v.summary.peak_qps if v.summary else None) for v in status.variants
    ] == [
        ("baseline", VariantPhase.SUCCEEDED, 1000),
        ("tikv-4", VariantPhase.SUCCEEDED, 900),
        ("tidb-3", VariantPhase.SUCCEEDED, 950),
    ]


def test_after_a_restart_the_same_status_and_facts_lead_to_the_same_action() -> None:
    spec, world = experiment(baseline=False), World()
    status = step(spec, world, None)
    first = decide(spec, status, world.facts(status))
    again = decide(spec, status, world.facts(status))
    assert first == again
    assert isinstance(first.actions[0], PatchCluster)
    # The patch was sent but the status write after it was lost: the same patch again.
    world.perform(first)
    resent = decide(spec, status, world.facts(status))
    assert resent.status.phase is ExperimentPhase.SETTLING and resent.actions == ()


def test_an_unfair_variant_is_skipped_naming_pod_and_node_and_the_cluster_restored_first() -> None:
    spec, world = experiment(baseline=False), World()
    status = until(spec, world, None, ExperimentPhase.SETTLING)
    world.moving = ()
    status = until(spec, world, status, ExperimentPhase.MEASURING)
    world.runs["what-if-tikv-4"] = RunFacts(phase="Failed", unfair=UNFAIR)
    status = step(spec, world, status)
    assert status.phase is ExperimentPhase.RESTORING and status.restore_reason == "Unfair"
    assert status.variants[0].phase is VariantPhase.SKIPPED
    assert status.variants[0].skipped_reason == f"unfair: {UNFAIR}"
    assert world.spec["tikv"] == TC["spec"]["tikv"]
    status = step(spec, world, status)
    assert status.phase is ExperimentPhase.RESTORING  # waits until the restore settled
    world.moving = ()
    status = step(spec, world, status)
    assert status.phase is ExperimentPhase.APPLYING and status.variant == "tidb-3"
    assert world.patches[-1] == {"tidb": {"replicas": 3}}


def test_with_stop_an_unfair_variant_fails_the_experiment_after_the_restore() -> None:
    spec, world = experiment(baseline=False, onUnfairVariant="Stop"), World()
    status = until(spec, world, None, ExperimentPhase.SETTLING)
    world.moving = ()
    status = until(spec, world, status, ExperimentPhase.MEASURING)
    world.runs["what-if-tikv-4"] = RunFacts(phase="Failed", unfair=UNFAIR)
    status = step(spec, world, status)
    world.moving = ()
    status = until(spec, world, status, ExperimentPhase.FAILED)
    assert status.message == (
        f"tikv-4 not measured, {UNFAIR}; stopping as spec.onUnfairVariant says; "
        "the cluster is restored"
    )
    assert world.spec == TC["spec"]


def test_deleting_mid_measurement_stops_the_run_restores_then_cancels() -> None:
    spec, world = experiment(baseline=False), World()
    status = until(spec, world, None, ExperimentPhase.SETTLING)
    world.moving = ()
    status = until(spec, world, status, ExperimentPhase.MEASURING)
    world.deleting = True
    status = step(spec, world, status)
    assert world.deleted_runs == ["what-if-tikv-4"]
    assert status.phase is ExperimentPhase.RESTORING and world.spec == TC["spec"]
    world.moving = ()
    status = step(spec, world, status)
    assert status.phase is ExperimentPhase.CANCELLED  # final: the reconciler releases it


def test_a_variant_that_does_not_settle_in_time_fails_the_experiment_after_the_restore() -> None:
    spec, world = experiment(baseline=False, settleTimeoutSeconds=90), World()
    status = until(spec, world, None, ExperimentPhase.RESTORING)
    assert status.variants[0].phase is VariantPhase.FAILED
    assert world.spec == TC["spec"]
    world.moving = ()
    status = until(spec, world, status, ExperimentPhase.FAILED)
    assert status.message == (
        "tikv-4 did not settle within 90 s: tikv: phase Scale, not Normal; the cluster is restored"
    )


def test_a_field_changed_by_someone_else_is_left_alone_and_said_so() -> None:
    spec, world = experiment(baseline=False), World()
    status = until(spec, world, None, ExperimentPhase.SETTLING)
    world.spec = merge(world.spec, {"tikv": {"replicas": 5}})
    world.moving = ()
    world.runs["what-if-tikv-4"] = RunFacts(phase="Failed")
    status = until(spec, world, status, ExperimentPhase.RESTORING)
    world.moving = ()
    status = until(spec, world, status, ExperimentPhase.FAILED)
    assert status.message == (
        "tikv-4's BenchmarkRun what-if-tikv-4 ended Failed; the cluster is restored"
    )
    assert world.spec["tikv"]["replicas"] == 5
    assert "topologySpreadConstraints" not in world.spec["tikv"]
    assert status.restored is not None and status.restored.left_alone == [
        "TidbCluster basic /tikv/replicas was changed by someone else during the experiment; "
        "left as it is"
    ]


def test_a_dry_run_writes_the_plan_and_changes_nothing() -> None:
    spec, world = experiment(dryRun=True), World()
    status = step(spec, world, None)
    assert status.phase is ExperimentPhase.SUCCEEDED
    assert status.message == "dry run: 4 steps in status.plan"
    assert status.stash == [] and world.patches == [] and world.runs == {}


def test_a_busy_cluster_keeps_the_experiment_pending_and_a_bad_patch_fails_it() -> None:
    world = World(busy="BenchmarkRun nightly-1 holds the cluster")
    status = step(experiment(), world, None)
    assert status.phase is ExperimentPhase.PENDING
    assert status.message == "waiting: BenchmarkRun nightly-1 holds the cluster"
    bad = experiment(
        variants=[{"name": "big", "patch": {"tikv": {"requests": {"storage": "1Ti"}}}}]
    )
    status = step(bad, World(), None)
    assert status.phase is ExperimentPhase.FAILED
    assert status.message is not None
    assert status.message.startswith(
        "refused: variants[0].patch: spec.tikv.requests.storage: storage cannot be changed"
    )


def test_the_run_is_aimed_at_the_experiments_cluster_by_namespace_and_kind() -> None:
    spec, world = experiment(), World()
    status = step(spec, world, None)
    decision = decide(spec, status, world.facts(status))
    (create,) = decision.actions
    assert isinstance(create, CreateRun) and create.name == "what-if-baseline"
    assert create.spec.cluster is not None
    assert (create.spec.cluster.name, create.spec.cluster.namespace, create.spec.cluster.kind) == (
        "basic",
        "tidb-cluster",
        "TidbCluster",
    )


def test_a_cluster_still_changing_is_not_stashed_until_it_settles() -> None:
    world = World(moving=("tikv: phase Upgrade, not Normal",))
    status = step(experiment(), world, None)
    assert status.phase is ExperimentPhase.PENDING and status.stash == []
    assert status.message == "waiting: the cluster is changing: tikv: phase Upgrade, not Normal"


def test_a_restart_while_restoring_sends_the_same_restore_and_then_waits() -> None:
    spec, world = experiment(baseline=False, settleTimeoutSeconds=90), World()
    status = until(spec, world, None, ExperimentPhase.SETTLING)
    world.runs["what-if-tikv-4"] = RunFacts(phase="Failed")
    world.moving = ()
    status = until(spec, world, status, ExperimentPhase.MEASURING)
    before = copy.deepcopy(world.spec)
    decision = decide(spec, status, world.facts(status))
    assert decision.status.phase is ExperimentPhase.RESTORING
    # The controller died after writing Restoring but before the patch: the same patch.
    again = decide(spec, decision.status, world.facts(decision.status))
    assert again.actions == decision.actions and world.spec == before
    world.perform(again)
    after = decide(spec, decision.status, world.facts(decision.status))
    assert after.actions == () and after.status.phase is ExperimentPhase.RESTORING
    assert world.spec == TC["spec"]


def test_a_variant_patching_an_object_that_does_not_exist_fails_before_any_change() -> None:
    spec = experiment(
        cluster={"name": "basic", "namespace": "tidb-cluster", "kind": "Cluster"},
        variants=[{"name": "tikv-4", "groups": [{"kind": "TiKVGroup", "name": "tikv",
                                                  "patch": {"replicas": 4}}]}],
    )  # fmt: skip
    decision = decide(spec, None, Facts(experiment="what-if", now=T0, specs={}))
    assert decision.actions == ()
    assert decision.status.phase is ExperimentPhase.FAILED
    assert decision.status.message == "refused: TiKVGroup tikv not found in namespace tidb-cluster"


def test_a_window_failed_only_for_its_disturbed_step_is_analysed_one_that_lost_it_fails() -> None:
    """The guard calls the window's one step disturbed (NoValidStep): that is the window."""
    operation = {"name": "restart", "patch": {"tidb": {"annotations": {"restartedAt": "1"}}},
                 "afterSeconds": 12}  # fmt: skip
    for step_done, ends in ((True, ExperimentPhase.SUCCEEDED), (False, ExperimentPhase.FAILED)):
        run = {"cluster": {"name": "basic"}, "credentials": {"secretRef": {"name": "root"}},
               "threads": [4]}  # fmt: skip
        spec, world = experiment(variants=[], operation=operation, run=run), World()
        status = until(spec, world, None, ExperimentPhase.MEASURING)
        since = world.now - timedelta(seconds=30)
        world.runs["what-if-restart"] = RunFacts(phase="Running", load_since=since)
        status = step(spec, world, status)  # 30 s of load: the change is sent
        assert world.spec["tidb"]["annotations"] == {"restartedAt": "1"}
        world.moving = ()
        world.runs["what-if-restart"] = RunFacts(phase="Failed", step_done=step_done)
        status = until(spec, world, status, ExperimentPhase.RESTORING)
        world.moving = ()
        status = until(spec, world, status, ends)
        assert status.window is not None and status.window.applied_at is not None
        assert (status.window.message is not None) is step_done, status.window
        assert world.spec == TC["spec"]
