"""One reconcile of a BenchmarkExperiment as a pure function: status and facts in, actions out.

The reconciler writes `Decision.status` first and then performs `Decision.actions` in order,
so the stash and the variant being applied are durable before any patch is sent. Every
action is computed from the status and the facts alone and is safe to repeat (patches set
absolute values, run names are fixed): after a restart the same status and facts lead to
the same action.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tidb_bench_operator.domain.api.common import TERMINAL_PHASES, RunPhase
from tidb_bench_operator.domain.api.experiment import (
    BASELINE,
    EXPERIMENT_TERMINAL,
    BenchmarkExperimentSpec,
    BenchmarkExperimentStatus,
    ExperimentPhase,
    OperationWindow,
    Restored,
    RestoreReason,
    Variant,
    VariantPhase,
    VariantStatus,
    VariantSummary,
    WindowEvent,
)
from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec, ClusterRef
from tidb_bench_operator.domain.experiment.patch import (
    diff,
    restore_patch,
    stashed_doc,
    value_at,
)
from tidb_bench_operator.domain.experiment.plan import (
    ObjectKey,
    ObjectPatch,
    Stash,
    build_plan,
    build_stash,
    check_variants,
    expected_spec,
    stash_entries,
    stash_from,
    variant_patches,
)
from tidb_bench_operator.domain.experiment.window import WindowPoint, analyse
from tidb_bench_operator.domain.manifests import object_name

Phase = ExperimentPhase


@dataclass(frozen=True)
class RunFacts:
    """The current variant's BenchmarkRun as read (phase None: it does not exist)."""

    phase: str | None = None
    #: What its status says it measured (runs.variant_summary), once it has a summary.
    summary: VariantSummary | None = None
    #: The preflight's finding that the placement is unfair, in our words: pod and node.
    unfair: str | None = None
    #: The run's status.message (why it failed, say).
    message: str | None = None
    #: (operations window) since when the run's one step has measured load, if it has.
    load_since: datetime | None = None
    #: (operations window) what the run's guard saw during its step, as timeline events.
    events: tuple[WindowEvent, ...] = ()
    #: (operations window) its one step ran to its end, valid or not: the guard calls the
    #: step disturbed (the run then ends Failed, NoValidStep) because the window is.
    step_done: bool = False


@dataclass(frozen=True)
class Facts:
    """What the reconciler read this time."""

    experiment: str
    now: datetime
    #: The spec of each object the variants patch, as it is now (TidbCluster or v2 groups).
    specs: Mapping[ObjectKey, Mapping[str, Any]]
    #: What still moves (settle.moving_v1 / moving_v2); empty: settled.
    moving: tuple[str, ...] = ()
    run: RunFacts | None = None
    #: Why the cluster cannot be taken now (changing, held by a run or experiment).
    busy: str | None = None
    deleting: bool = False
    #: (operations window, once its run has finished) the run's measured series.
    points: tuple[WindowPoint, ...] = ()


@dataclass(frozen=True)
class PatchCluster:
    """Send these merge patches (each to its object's spec)."""

    patches: tuple[ObjectPatch, ...]


@dataclass(frozen=True)
class CreateRun:
    """Create the BenchmarkRun of a variant (already existing counts as done)."""

    name: str
    spec: BenchmarkRunSpec


@dataclass(frozen=True)
class DeleteRun:
    """Delete a variant's run that is still measuring."""

    name: str


#: No action releases the experiment: the reconciler removes its finalizer once the phase is
#: final (EXPERIMENT_TERMINAL), which the machine reaches only with the cluster restored.
Action = PatchCluster | CreateRun | DeleteRun


@dataclass(frozen=True)
class Decision:
    """Write `status`, then perform `actions` in order."""

    actions: tuple[Action, ...]
    status: BenchmarkExperimentStatus


def run_name(experiment: str, item: str) -> str:
    """The BenchmarkRun of the baseline or a variant: `<experiment>-<variant>`."""
    return object_name(experiment, item)


def items(spec: BenchmarkExperimentSpec) -> list[str]:
    """What is measured, in order: the baseline (if asked), then the variants; or the
    operation's one run."""
    if spec.operation is not None:
        return [spec.operation.name]
    return ([BASELINE] if spec.baseline else []) + [v.name for v in spec.variants]


def aimed_run_spec(spec: BenchmarkExperimentSpec) -> BenchmarkRunSpec:
    """The run template aimed at the experiment's cluster (namespace and kind filled in)."""
    ref, cluster = spec.run.cluster, spec.cluster
    aimed = ClusterRef(
        name=cluster.name,
        namespace=cluster.namespace,
        kind=cluster.kind,
        tidb_group=ref.tidb_group if ref else None,
    )
    update: dict[str, Any] = {"cluster": aimed}
    run = spec.run
    if spec.operation is not None:
        # The window is the disturbance: the guard records it and the step is kept (not
        # measured again, not the run failed); a client lost in it fails the window rather
        # than being measured again after it (stepRetries 0); one point a second for the
        # dip's shape.
        if run.guard.policy in ("Retry", "Abort"):
            update["guard"] = run.guard.model_copy(update={"policy": "Flag"})
        update["step_retries"] = 0
        if "report_interval_seconds" not in run.model_fields_set:
            update["report_interval_seconds"] = 1
    return run.model_copy(update=update)


def run_names(spec: BenchmarkExperimentSpec, experiment: str) -> list[str]:
    """The names of every run the experiment makes, in order."""
    return [run_name(experiment, item) for item in items(spec)]


def decide(
    spec: BenchmarkExperimentSpec, status: BenchmarkExperimentStatus | None, facts: Facts
) -> Decision:
    """The next status and actions of one reconcile."""
    st = (
        status.model_copy(deep=True)
        if status is not None
        else BenchmarkExperimentStatus(variants=[VariantStatus(name=n) for n in items(spec)])
    )
    return _Reconcile(spec, st, facts).decide()


class _Reconcile:
    """One decision; `st` is this reconcile's copy of the status."""

    def __init__(
        self, spec: BenchmarkExperimentSpec, st: BenchmarkExperimentStatus, facts: Facts
    ) -> None:
        self.spec, self.st, self.facts = spec, st, facts
        self.stash: Stash = stash_from(st.stash)

    def done(self, *actions: Action) -> Decision:
        return Decision(actions, self.st)

    def decide(self) -> Decision:
        st, facts = self.st, self.facts
        if st.phase in EXPERIMENT_TERMINAL:
            return self.done()
        if facts.deleting and st.restore_reason != "Deletion":
            return self.deletion()
        if st.phase is Phase.PENDING:
            return self.pending()
        if st.phase is Phase.STASHING:
            return self.begin(0)
        if st.phase is Phase.APPLYING:
            return self.applying()
        if st.phase is Phase.SETTLING:
            return self.settling()
        if st.phase is Phase.MEASURING:
            return self.measuring()
        return self.restoring()

    # ------------------------------------------------------------------ start

    def pending(self) -> Decision:
        st, facts = self.st, self.facts
        problems = check_variants(self.spec)
        wanted = {k for v in self.spec.changes() for k in variant_patches(self.spec, v)}
        problems += [
            f"{kind} {name} not found in namespace {self.spec.cluster.namespace}"
            for kind, name in sorted(wanted - facts.specs.keys())
        ]
        if problems:
            return self.finish(Phase.FAILED, "refused: " + "; ".join(problems))
        if facts.busy or facts.moving:
            # Refuse to start on a cluster held by another run or already changing: its
            # "as found" would be a moment of someone else's change.
            why = facts.busy or "the cluster is changing: " + "; ".join(facts.moving[:3])
            st.message = f"waiting: {why}"
            return self.done()
        self.stash = build_stash(self.spec, facts.specs)
        st.plan = [s.text() for s in build_plan(self.spec, self.stash)]
        if self.spec.dry_run:
            return self.finish(Phase.SUCCEEDED, f"dry run: {len(st.plan)} steps in status.plan")
        # The stash is written with this status, before the first patch (next reconcile).
        st.stash = stash_entries(self.stash)
        st.phase = Phase.STASHING
        st.message = f"stashed {len(st.stash)} fields the variants change"
        return self.done()

    def begin(self, index: int) -> Decision:
        """Start the baseline or variant at `index` (or restore after the last)."""
        st = self.st
        names = items(self.spec)
        if index >= len(names):
            return self.start_restore("End")
        st.current, st.variant = index, names[index]
        entry = st.variants[index]
        if names[index] == BASELINE or self.spec.operation is not None:
            return self.measure(entry)  # the operation is sent while its run measures
        st.applied = names[index]
        entry.phase = VariantPhase.APPLYING
        st.phase = Phase.APPLYING
        st.message = f"applying {names[index]}"
        return self.applying()

    # ------------------------------------------------------------------ a variant

    def variant(self) -> Variant:
        name = self.st.variant
        return next(v for v in self.spec.changes() if v.name == name)

    def entry(self) -> VariantStatus:
        assert self.st.current is not None
        return self.st.variants[self.st.current]

    def applying(self) -> Decision:
        patches = self.towards(self.variant())
        entry = self.entry()
        if patches:
            # The settle time counts from the first send (sent again until the spec holds).
            entry.patch_applied_at = entry.patch_applied_at or self.facts.now
            return self.done(PatchCluster(patches))
        entry.patch_applied_at = entry.patch_applied_at or self.facts.now
        entry.phase = VariantPhase.SETTLING
        self.st.phase = Phase.SETTLING
        self.st.message = f"{entry.name} applied; waiting for the cluster to settle"
        return self.settling()

    def towards(self, target: Variant) -> tuple[ObjectPatch, ...]:
        """Patches that make every stashed field hold what `target` sets (or its value found)."""
        wanted = variant_patches(self.spec, target)
        out = []
        for key in sorted(self.stash):
            patch = diff(self.held(key), expected_spec(self.stash, key, wanted.get(key)))
            if patch:
                out.append(ObjectPatch(key[0], key[1], patch))
        return tuple(out)

    def held(self, key: ObjectKey) -> dict[str, Any]:
        """The object's stashed fields as they are now."""
        now = self.facts.specs.get(key) or {}
        return stashed_doc({p: value_at(now, p) for p in self.stash[key]})

    def settling(self) -> Decision:
        st, facts, entry = self.st, self.facts, self.entry()
        started = entry.patch_applied_at or facts.now
        waited = (facts.now - started).total_seconds()
        if not facts.moving:
            entry.settled_at, entry.settle_seconds = facts.now, waited
            return self.measure(entry)
        if waited > self.spec.settle_timeout_seconds:
            entry.phase = VariantPhase.FAILED
            st.message = (
                f"{entry.name} did not settle within {self.spec.settle_timeout_seconds} s: "
                + "; ".join(facts.moving[:3])
            )
            return self.start_restore("Failure")
        st.message = f"{entry.name} settling: " + "; ".join(facts.moving[:3])
        return self.done()

    def measure(self, entry: VariantStatus) -> Decision:
        entry.phase, entry.run = VariantPhase.MEASURING, run_name(self.facts.experiment, entry.name)
        self.st.phase = Phase.MEASURING
        self.st.message = f"measuring {entry.name} (BenchmarkRun {entry.run})"
        return self.done(CreateRun(entry.run, self.run_spec()))

    def run_spec(self) -> BenchmarkRunSpec:
        return aimed_run_spec(self.spec)

    def measuring(self) -> Decision:
        st, entry, run = self.st, self.entry(), self.facts.run
        assert entry.run is not None
        if run is None or run.phase is None:
            return self.done(CreateRun(entry.run, self.run_spec()))
        if run.unfair is not None:
            # Found by its preflight: the run is not left waiting out its timeout.
            stopped = () if run.phase in TERMINAL_PHASES else (DeleteRun(entry.run),)
            entry.phase, entry.skipped_reason = VariantPhase.SKIPPED, f"unfair: {run.unfair}"
            stop = self.spec.on_unfair_variant == "Stop"
            st.message = f"{entry.name} not measured, {run.unfair}" + (
                "; stopping as spec.onUnfairVariant says" if stop else ""
            )
            if stop:
                after = self.start_restore("Failure")
            elif st.applied is None:  # the baseline: the cluster as found is unfair
                after = self.begin((st.current or 0) + 1)
            else:
                after = self.start_restore("Unfair")
            return Decision(stopped + after.actions, after.status)
        if self.spec.operation is not None:
            return self.window(entry, run)
        if run.phase == RunPhase.SUCCEEDED:
            entry.phase = VariantPhase.SUCCEEDED
            entry.summary = run.summary or VariantSummary()
            return self.begin((st.current or 0) + 1)
        if run.phase in TERMINAL_PHASES:
            entry.phase = VariantPhase.FAILED
            st.message = f"{entry.name}'s BenchmarkRun {entry.run} ended {run.phase}" + (
                f": {run.message}" if run.message else ""
            )
            return self.start_restore("Failure")
        return self.done()

    # ------------------------------------------------------------------ operations window

    def window(self, entry: VariantStatus, run: RunFacts) -> Decision:
        """The operation's run holds its load: send the change after afterSeconds, watch it
        settle, and once the run has finished measure what it did to the load."""
        st, facts, op = self.st, self.facts, self.spec.operation
        assert op is not None and entry.run is not None
        win = st.window = st.window or OperationWindow(run=entry.run)
        cluster = self.spec.cluster.name
        if run.phase not in TERMINAL_PHASES:
            if st.applied is None:
                since = run.load_since
                if since is None or (facts.now - since).total_seconds() < op.after_seconds:
                    st.message = f"holding the load of {entry.run} before {op.name}"
                    return self.done()
                st.applied, win.applied_at = op.name, facts.now
                win.events.append(
                    WindowEvent(
                        at=facts.now, source="Experiment", what="OperationApplied",
                        object=cluster, message=f"{op.name} sent to the cluster",
                    )
                )  # fmt: skip
                st.message = f"{op.name} applied; {entry.run} holds the load through it"
                return self.done(PatchCluster(self.towards(self.variant())))
            patches = self.towards(self.variant())
            if patches:
                return self.done(PatchCluster(patches))
            if win.settled_at is None and not facts.moving:
                win.settled_at = facts.now
                took = (facts.now - (win.applied_at or facts.now)).total_seconds()
                win.events.append(
                    WindowEvent(
                        at=facts.now, source="Experiment", what="Settled", object=cluster,
                        message=f"the cluster settled {took:.0f} s after {op.name}",
                    )
                )  # fmt: skip
            st.message = f"{op.name}: " + (
                "settled; holding the load to the end"
                if win.settled_at
                else "settling: " + "; ".join(facts.moving[:3])
            )
            return self.done()
        measured = run.phase == RunPhase.SUCCEEDED or run.step_done
        if not measured or win.applied_at is None:
            entry.phase = VariantPhase.FAILED
            st.message = (
                f"{entry.run} ended {run.phase}" + (f": {run.message}" if run.message else "")
                if not measured
                else f"{entry.run} ended before {op.name} was sent "
                f"(afterSeconds {op.after_seconds})"
            )
            return self.start_restore("Failure")
        entry.phase = VariantPhase.SUCCEEDED
        entry.summary = run.summary or VariantSummary()
        st.window = analyse(
            list(facts.points), win.applied_at, op.tolerance_percent,
            list(win.events) + list(run.events), run=entry.run, settled_at=win.settled_at,
        )  # fmt: skip
        st.message = st.window.message
        return self.start_restore("End")

    # ------------------------------------------------------------------ restore

    def deletion(self) -> Decision:
        st = self.st
        if st.applied is None and st.phase is not Phase.RESTORING:
            return self.finish(Phase.CANCELLED, "deleted; the cluster was not changed")
        actions: tuple[Action, ...] = ()
        run = self.facts.run
        entry = self.entry() if st.current is not None else None
        if entry and entry.run and run and run.phase and run.phase not in TERMINAL_PHASES:
            actions = (DeleteRun(entry.run),)
        if st.phase is Phase.RESTORING:
            st.restore_reason = "Deletion"
            decision = self.restoring()
        else:
            decision = self.start_restore("Deletion")
        return Decision(actions + decision.actions, decision.status)

    def start_restore(self, reason: RestoreReason) -> Decision:
        st = self.st
        st.phase, st.restore_reason = Phase.RESTORING, reason
        if reason == "Failure":
            st.failure = st.message
        st.restore_started_at, st.restored = self.facts.now, None
        return self.restoring()

    def restoring(self) -> Decision:
        st, facts = self.st, self.facts
        applied = next((v for v in self.spec.changes() if v.name == st.applied), None)
        wanted = variant_patches(self.spec, applied) if applied else {}
        patches, left = [], []
        for key in sorted(self.stash):
            restore = restore_patch(self.stash[key], facts.specs.get(key) or {}, wanted.get(key))
            left += [f"{key[0]} {key[1]} {text}" for text in restore.left_alone]
            if restore.patch:
                patches.append(ObjectPatch(key[0], key[1], restore.patch))
        if patches:
            st.message = "restoring the stashed fields"
            return self.done(PatchCluster(tuple(patches)))
        if st.restored is None:
            st.restored = Restored(at=facts.now, left_alone=left)
        started = st.restore_started_at or facts.now
        if facts.moving:
            if (facts.now - started).total_seconds() <= self.spec.settle_timeout_seconds:
                st.message = "restored; waiting to settle: " + "; ".join(facts.moving[:3])
                return self.done()
            return self.finish(
                Phase.FAILED,
                f"restored, but the cluster did not settle within "
                f"{self.spec.settle_timeout_seconds} s: " + "; ".join(facts.moving[:3]),
            )
        st.restored.settled, st.applied = True, None
        reason = st.restore_reason
        if reason == "Unfair":
            return self.begin((st.current or 0) + 1)
        if reason == "Deletion":
            return self.finish(Phase.CANCELLED, "deleted; the cluster is restored")
        if reason == "End":
            return self.finish(Phase.SUCCEEDED, "every variant done; the cluster is restored")
        return self.finish(Phase.FAILED, f"{st.failure or 'failed'}; the cluster is restored")

    def finish(self, phase: ExperimentPhase, message: str) -> Decision:
        self.st.phase, self.st.message = phase, message
        self.st.variant = None
        return self.done()
