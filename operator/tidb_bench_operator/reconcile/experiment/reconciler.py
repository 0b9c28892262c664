"""One look at a BenchmarkExperiment: read the cluster and the current run, decide, write, act.

`domain/experiment/machine.py` decides from the status and what this look read (`Facts`);
here the status is written first and the actions are performed after, in order, so that the
stash and the name of the variant about to be applied are stored before any patch is sent.
A controller killed anywhere in between finds the same status at its next look and the same
decision follows from it (patches set absolute values; runs have fixed names).

The experiment carries the finalizer FINALIZER from its first look until the cluster is
restored: deleting it restores the cluster first (docs/experiments.md). Before the stash is
written, a server-side dry run of a patch of every object checks that the controller may
patch them (deploy/overlays/experiments grants it); without it the experiment fails before
changing anything, saying what to apply.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from pydantic import ValidationError

from tidb_bench_operator.adapters.clusters import read_cluster
from tidb_bench_operator.domain.api.common import TERMINAL_PHASES
from tidb_bench_operator.domain.api.experiment import (
    EXPERIMENT_TERMINAL,
    BenchmarkExperimentSpec,
    BenchmarkExperimentStatus,
    ExperimentPhase,
    WindowEvent,
)
from tidb_bench_operator.domain.api.resources import parse_experiment_spec
from tidb_bench_operator.domain.api.run_spec import ClusterRef
from tidb_bench_operator.domain.api.run_status import AdmittedSpec
from tidb_bench_operator.domain.cluster.view import V1_KIND, V2_KIND, database_pod_selector
from tidb_bench_operator.domain.experiment.machine import (
    CreateRun,
    Decision,
    DeleteRun,
    Facts,
    PatchCluster,
    RunFacts,
    decide,
)
from tidb_bench_operator.domain.experiment.runs import (
    LABEL_EXPERIMENT,
    build_experiment_run,
    unfair_finding,
    variant_summary,
)
from tidb_bench_operator.domain.experiment.settle import moving_v1, moving_v2
from tidb_bench_operator.domain.experiment.window import WindowPoint, window_points
from tidb_bench_operator.domain.manifests import RunRef, build_event, label_value
from tidb_bench_operator.domain.objects import JSON, get_path
from tidb_bench_operator.domain.results_store import joined_doc, part_name
from tidb_bench_operator.domain.status import parse_time, status_patch, utc_now
from tidb_bench_operator.domain.trust.frozen import governing_spec
from tidb_bench_operator.errors import KubeForbidden, SpecError, StoreError, TidbBenchError

log = logging.getLogger("tidb_bench_operator.reconcile.experiment")

#: Held from the first look until the cluster is restored.
FINALIZER = "tidbbench.io/restore-cluster"
#: How often an experiment in progress is looked at.
LOOK_SECONDS = 2.0
#: From a step's Jobs created to its clients measuring (pod start), when nothing says better.
POD_START_SECONDS = 3.0
#: The stored series document of the (one) step of an operations window, and its most parts.
SERIES_DOC, MAX_SERIES_PARTS = "s0", 64
#: What to apply when the controller may not patch the cluster.
OVERLAY = "deploy/overlays/experiments"


class ExperimentKube(Protocol):
    """The Kubernetes operations the experiment reconciler uses (adapters.k8s.Kube has them)."""

    def tidb_cluster(self, namespace: str, name: str) -> JSON | None: ...

    def v2_cluster(self, namespace: str, name: str) -> JSON | None: ...

    def v2_groups(self, namespace: str) -> list[JSON]: ...

    def pods(self, namespace: str | None, selector: str) -> list[JSON]: ...

    def benchmark_runs_in(self, namespace: str, selector: str) -> list[JSON]: ...

    def create_benchmark_run(self, body: JSON) -> tuple[JSON, bool]: ...

    def delete_benchmark_run(self, namespace: str, name: str) -> bool: ...

    def configmap(self, namespace: str, name: str) -> JSON | None: ...

    def patch_benchmark_experiment_status(
        self, namespace: str, name: str, status: JSON
    ) -> JSON: ...

    def set_benchmark_experiment_finalizers(
        self, namespace: str, name: str, finalizers: list[str], resource_version: str
    ) -> JSON: ...

    def patch_cluster_object(
        self, kind: str, namespace: str, name: str, spec_patch: JSON, *, dry_run: bool = False
    ) -> JSON: ...

    def create_event(self, body: JSON) -> None: ...


@dataclass(frozen=True)
class ExperimentOutcome:
    """When to look again (None: not by time) and the object as last stored."""

    requeue_seconds: float | None
    stored: JSON | None = None


class ExperimentReconciler:
    """Looks at one BenchmarkExperiment at a time; see the module docstring."""

    def __init__(self, kube: ExperimentKube, clock: Callable[[], datetime] = utc_now) -> None:
        self.kube, self.clock = kube, clock

    def reconcile(self, body: JSON, busy: str | None = None) -> ExperimentOutcome:
        """One look. `busy`: why the cluster is not free now (a run measuring it), or None."""
        meta = body["metadata"]
        ref = RunRef(str(meta["name"]), str(meta["namespace"]), str(meta.get("uid") or ""))
        deleting = bool(meta.get("deletionTimestamp"))
        finalizers = list(meta.get("finalizers") or [])
        old = dict(body.get("status") or {})
        status = BenchmarkExperimentStatus.model_validate(old) if old else None
        phase = status.phase if status else ExperimentPhase.PENDING
        if phase in EXPERIMENT_TERMINAL or (deleting and status is None):
            return self._release(ref, meta, finalizers, deleting)
        try:
            spec = parse_experiment_spec(governing_spec(body))
        except (SpecError, ValidationError) as exc:
            return self._invalid(ref, body, status, exc)
        if not deleting and FINALIZER not in finalizers:
            stored = self.kube.set_benchmark_experiment_finalizers(
                ref.namespace, ref.name, [*finalizers, FINALIZER], str(meta["resourceVersion"])
            )
            return ExperimentOutcome(0.0, stored)
        facts = self.facts(ref, spec, status, busy=busy, deleting=deleting)
        if phase is ExperimentPhase.PENDING and not deleting and facts.busy is None:
            refused = self._may_not_patch(spec, facts)
            if refused:
                return self._write_failed(ref, body, status, refused)
        decision = decide(spec, status, facts)
        if phase is ExperimentPhase.PENDING and decision.status.phase is ExperimentPhase.STASHING:
            decision.status.admitted = AdmittedSpec.of(
                dict(body.get("spec") or {}), meta.get("generation")
            )
        written = self._write(ref, old, decision.status)
        self._announce(ref, status, decision)
        self._act(ref, spec, decision)
        if decision.status.phase in EXPERIMENT_TERMINAL:
            # The cluster is as found (or was never changed): nothing left to hold it for. The
            # removal is conditional on the object as the status write left it.
            meta = (written or body)["metadata"]
            return self._release(ref, meta, list(meta.get("finalizers") or []), deleting)
        return ExperimentOutcome(LOOK_SECONDS, written)

    # ------------------------------------------------------------------ reading

    def facts(
        self,
        ref: RunRef,
        spec: BenchmarkExperimentSpec,
        status: BenchmarkExperimentStatus | None,
        *,
        busy: str | None,
        deleting: bool,
    ) -> Facts:
        """What this look read: the objects' specs, what still moves, the current run."""
        cl = spec.cluster
        specs: dict[tuple[str, str], Mapping[str, Any]] = {}
        moving: list[str] = []
        if cl.kind == V1_KIND:
            tc = self.kube.tidb_cluster(cl.namespace, cl.name)
            if tc is not None:
                specs[(V1_KIND, cl.name)] = tc.get("spec") or {}
                pods = self.kube.pods(cl.namespace, database_pod_selector(V1_KIND, cl.name))
                moving = moving_v1(tc, pods)
        else:
            for group in self.kube.v2_groups(cl.namespace):
                name = str(get_path(group, "metadata", "name") or "")
                specs[(str(group.get("kind") or ""), name)] = group.get("spec") or {}
            view = read_cluster(
                self.kube, ClusterRef(name=cl.name, namespace=cl.namespace, kind=V2_KIND), ""
            )
            pods = self.kube.pods(cl.namespace, database_pod_selector(V2_KIND, cl.name))
            moving = moving_v2(view, pods)
        run, points = self._run(ref, spec, status)
        return Facts(
            experiment=ref.name,
            now=self.clock(),
            specs=specs,
            moving=tuple(moving),
            run=run,
            busy=busy,
            deleting=deleting,
            points=points,
        )

    def _run(
        self, ref: RunRef, spec: BenchmarkExperimentSpec, status: BenchmarkExperimentStatus | None
    ) -> tuple[RunFacts | None, tuple[WindowPoint, ...]]:
        """The current variant's run as RunFacts, and (a finished window's) its series."""
        if status is None or status.current is None:
            return None, ()
        name = status.variants[status.current].run
        if name is None:
            return None, ()
        mine = self.kube.benchmark_runs_in(
            ref.namespace, f"{LABEL_EXPERIMENT}={label_value(ref.name)}"
        )
        body = next((r for r in mine if get_path(r, "metadata", "name") == name), None)
        if body is None:
            return RunFacts(), ()
        st = body.get("status") or {}
        step = (st.get("steps") or [{}])[0]
        run_spec = governing_spec(body)
        facts = RunFacts(
            phase=st.get("phase"),
            summary=variant_summary(st) if st.get("phase") in TERMINAL_PHASES else None,
            unfair=unfair_finding(st),
            message=st.get("message"),
            load_since=_load_since(step, run_spec),
            events=tuple(_events(step)),
            step_done=step.get("phase") == "Succeeded",
        )
        points: tuple[WindowPoint, ...] = ()
        window = status.window
        if (
            spec.operation is not None
            and facts.phase in TERMINAL_PHASES
            and window is not None
            and window.applied_at is not None
        ):
            points = tuple(self._points(ref.namespace, name, st, step, run_spec))
        return facts, points

    def _points(
        self, namespace: str, run: str, st: JSON, step: JSON, run_spec: Mapping[str, Any]
    ) -> list[WindowPoint]:
        """The finished window run's first-step series, from its results ConfigMaps."""
        index = st.get("resultsConfigMap")
        if not index:
            return []
        # By name (the controller may get ConfigMaps, not list them): the index, then the
        # parts of the first step's series document.
        found: dict[str, dict[str, str]] = {}
        for k in range(MAX_SERIES_PARTS):
            name = part_name(str(index), SERIES_DOC, k)
            cm = self.kube.configmap(namespace, name)
            if cm is None:
                break
            found[name] = {
                str(a): v for a, v in (cm.get("data") or {}).items() if isinstance(v, str)
            }
            if k + 1 >= int(found[name].get("parts") or 1):
                break
        try:
            text = joined_doc(str(index), SERIES_DOC, found)
            doc = json.loads(text) if text else {}
        except (StoreError, ValueError):
            return []  # the window then says its numbers are missing (no points)
        clients = doc.get("clients") if isinstance(doc, dict) else None
        began = parse_time(get_path(step, "resources", "windowStart")) or _load_since(
            step, run_spec
        )
        if not isinstance(clients, dict) or began is None:
            return []
        return window_points(clients, began)

    def _may_not_patch(self, spec: BenchmarkExperimentSpec, facts: Facts) -> str | None:
        """Why the controller may not patch the objects the variants change (a server-side
        dry run of an empty patch of each), or None."""
        for variant in spec.changes():
            keys = (
                [(V1_KIND, spec.cluster.name)]
                if variant.patch is not None
                else [(g.kind, g.name) for g in variant.groups]
            )
            for kind, name in keys:
                if (kind, name) not in facts.specs:
                    continue  # the machine refuses it by name
                try:
                    self.kube.patch_cluster_object(
                        kind, spec.cluster.namespace, name, {}, dry_run=True
                    )
                except KubeForbidden:
                    return (
                        f"refused: the controller may not patch {kind} "
                        f"{spec.cluster.namespace}/{name}; apply {OVERLAY} (kubectl apply -k) "
                        "to let it change clusters, then create the experiment again"
                    )
        return None

    # ------------------------------------------------------------------ writing

    def _write(self, ref: RunRef, old: JSON, status: BenchmarkExperimentStatus) -> JSON | None:
        patch = status_patch(old, status)
        if not patch:
            return None
        return self.kube.patch_benchmark_experiment_status(ref.namespace, ref.name, patch)

    def _write_failed(
        self, ref: RunRef, body: JSON, status: BenchmarkExperimentStatus | None, message: str
    ) -> ExperimentOutcome:
        st = status or BenchmarkExperimentStatus()
        st.phase, st.message = ExperimentPhase.FAILED, message
        written = self._write(ref, dict(body.get("status") or {}), st)
        self._event(ref, "Warning", "Refused", message)
        meta = (written or body)["metadata"]
        return self._release(ref, meta, list(meta.get("finalizers") or []), deleting=False)

    def _invalid(
        self, ref: RunRef, body: JSON, status: BenchmarkExperimentStatus | None, exc: Exception
    ) -> ExperimentOutcome:
        """A spec that does not validate; nothing was changed (it was checked before the
        stash, and the admitted copy governs after it)."""
        meta = body["metadata"]
        if meta.get("deletionTimestamp"):
            return self._release(ref, meta, list(meta.get("finalizers") or []), True)
        why = str(exc) if isinstance(exc, SpecError) else "the spec does not validate"
        return self._write_failed(ref, body, status, f"invalid spec: {why}")

    def _release(
        self, ref: RunRef, meta: JSON, finalizers: list[str], deleting: bool
    ) -> ExperimentOutcome:
        """A finished experiment keeps no finalizer (deletion then needs nothing from us)."""
        if FINALIZER not in finalizers:
            return ExperimentOutcome(None)
        left = [f for f in finalizers if f != FINALIZER]
        stored = self.kube.set_benchmark_experiment_finalizers(
            ref.namespace, ref.name, left, str(meta["resourceVersion"])
        )
        return ExperimentOutcome(None, None if deleting else stored)

    def _act(self, ref: RunRef, spec: BenchmarkExperimentSpec, decision: Decision) -> None:
        for action in decision.actions:
            if isinstance(action, PatchCluster):
                for p in action.patches:
                    self.kube.patch_cluster_object(p.kind, spec.cluster.namespace, p.name, p.patch)
            elif isinstance(action, CreateRun):
                body = build_experiment_run(ref, action.name, action.spec)
                _, created = self.kube.create_benchmark_run(body)
                if created:
                    self._event(ref, "Normal", "RunCreated", f"BenchmarkRun {action.name} created")
            elif isinstance(action, DeleteRun):
                self.kube.delete_benchmark_run(ref.namespace, action.name)

    def _announce(
        self, ref: RunRef, before: BenchmarkExperimentStatus | None, decision: Decision
    ) -> None:
        """An Event per phase change and per variant that ends, in our words."""
        after = decision.status
        was = before.phase if before else None
        if after.phase != was:
            log.info(
                "BenchmarkExperiment %s/%s: %s -> %s (%s)",
                ref.namespace, ref.name, was or "new", after.phase, after.message or "",
            )  # fmt: skip
        if after.phase != was and after.message:
            warn = after.phase is ExperimentPhase.FAILED
            self._event(ref, "Warning" if warn else "Normal", str(after.phase), after.message)

    def _event(self, ref: RunRef, type_: str, reason: str, message: str) -> None:
        now = self.clock()
        suffix = f"{reason.lower()}-{now.strftime('%Y%m%d%H%M%S%f')}"
        # An event is a courtesy: the status says the same.
        with contextlib.suppress(TidbBenchError):
            self.kube.create_event(
                build_event(
                    ref, reason=reason, message=message, type_=type_, now=now,
                    name_suffix=suffix, kind="BenchmarkExperiment",
                )
            )  # fmt: skip


def _load_since(step: JSON, run_spec: Mapping[str, Any]) -> datetime | None:
    """When the step's clients began measuring: Jobs created + pod start + warm-up."""
    if step.get("phase") not in ("Running", "Succeeded"):
        return None
    started = parse_time(step.get("startedAt"))
    if started is None:
        return None
    warmup = run_spec.get("warmupSeconds") or 0
    return started + timedelta(seconds=POD_START_SECONDS + float(warmup))


def _events(step: JSON) -> list[WindowEvent]:
    """The guard's disturbances of the step as timeline events."""
    out = []
    for d in step.get("disturbances") or []:
        at = parse_time(d.get("at"))
        if at is None:
            continue
        out.append(
            WindowEvent(
                at=at,
                source=str(d.get("source") or ""),
                what=str(d.get("what") or ""),
                object=str(d.get("object") or ""),
                message=str(d.get("message") or ""),
            )
        )
    return out
