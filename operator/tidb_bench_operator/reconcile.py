"""BenchmarkRun orchestration: observed state -> actions, with the adapters passed in.

One call of `RunReconciler.reconcile` looks at the run's status (the only state that
survives a restart), observes its Jobs and pods, acts (creates Jobs, posts Events, writes
the results ConfigMap) and returns the status patch. Every action is idempotent: Job names
are deterministic and creating an existing Job returns it, so a controller killed between
acting and patching status repeats nothing on restart.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tidb_bench_operator.adapters.k8s import JSON, Kube, KubeForbidden
from tidb_bench_operator.domain import analysis
from tidb_bench_operator.domain.manifests import (
    LABEL_ROLE,
    LABEL_RUN,
    LABEL_STEP,
    START_LEAD_SECONDS,
    Endpoint,
    RunRef,
    build_dataset_runner_args,
    build_event,
    build_results_configmap,
    build_runner_job,
    build_runner_service_account,
    build_step_runner_args,
    compute_endpoint,
    label_value,
    object_name,
    step_job_name,
)
from tidb_bench_operator.domain.models import (
    BenchmarkRunSpec,
    BenchmarkRunStatus,
    Condition,
    Environment,
    PreflightCheck,
    PreflightStatus,
    StepStatus,
    parse_run_spec,
)
from tidb_bench_operator.domain.preflight import CheckResult, GateVerdict
from tidb_bench_operator.domain.results import StepResult
from tidb_bench_operator.domain.sysbench import combine_step_results
from tidb_bench_operator.errors import SpecError

TERMINAL = frozenset({"Succeeded", "Failed", "Cancelled"})
ACTIVE = frozenset({"Preflight", "Preparing", "Running"})
# A client pod the scheduler cannot place within this long fails the run with its reason.
SCHEDULING_TIMEOUT = timedelta(seconds=120)
# Preflight is re-evaluated at most this often while it waits (PD calls are not free).
PREFLIGHT_RETRY = timedelta(seconds=5)
SERIES_MARKER = "TIDB-BENCH-SERIES "
# Upper bound of state transitions one reconcile call may chain (Pending → … → first Job).
MAX_TRANSITIONS_PER_CALL = 6


@dataclass
class PreflightOutcome:
    """What the preflight gate found (see gate.run_preflight)."""

    checks: list[CheckResult]
    verdict: GateVerdict
    tidb_version: str | None = None
    server_version: str | None = None


PreflightFn = Callable[[BenchmarkRunSpec, str, Endpoint], PreflightOutcome]


@dataclass
class Outcome:
    """The result of one reconcile: a merge patch for .status, and when to look again."""

    status: dict[str, Any]
    requeue_seconds: float | None = None
    events: list[tuple[str, str, str]] = field(default_factory=list)


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def target_key(spec: BenchmarkRunSpec, namespace: str) -> str:
    """What 'the same cluster' means for the one-run-at-a-time rule."""
    ep = compute_endpoint(spec, namespace)
    if spec.cluster is not None and (spec.target is None or spec.target.host is None):
        return f"tidbcluster/{ep.cluster_namespace}/{ep.cluster_name}"
    return f"endpoint/{ep.host}:{ep.port}"


class RunReconciler:
    """Drives one BenchmarkRun through Pending → Preflight → Preparing → Running → done."""

    def __init__(
        self,
        kube: Kube,
        *,
        preflight: PreflightFn | None = None,
        clock: Callable[[], datetime] = _now,
        image: str | None = None,
        scheduling_timeout: timedelta = SCHEDULING_TIMEOUT,
    ) -> None:
        self.kube = kube
        self.preflight = preflight
        self.clock = clock
        self.image = image
        self.scheduling_timeout = scheduling_timeout

    # ------------------------------------------------------------------ entry point
    def reconcile(self, body: JSON) -> Outcome:
        """One step of the state machine for the run in `body` (a plain dict)."""
        meta = body["metadata"]
        run = RunRef(meta["name"], meta["namespace"], meta["uid"])
        old = dict(body.get("status") or {})
        st = BenchmarkRunStatus.model_validate(old)
        ctx = _Ctx(run=run, st=st, now=self.clock())
        if st.phase in TERMINAL:
            self._after_finish(ctx, body)
            return Outcome(status={}, requeue_seconds=None)
        try:
            spec = parse_run_spec(body.get("spec") or {})
        except SpecError as exc:
            self._fail(ctx, "InvalidSpec", str(exc))
            return self._outcome(ctx, old)
        ctx.spec = spec
        ctx.endpoint = compute_endpoint(spec, run.namespace)
        st.observed_generation = meta.get("generation")
        # Transitions that need no waiting (a phase entered, a step finished) continue in the
        # same call: the controller's latency is then one timer tick, not one per phase.
        for _ in range(MAX_TRANSITIONS_PER_CALL):
            ctx.again = False
            ctx.now = self.clock()  # a chained step's start time counts from now
            phase = st.phase or "Pending"
            if phase == "Pending":
                self._pending(ctx, body)
            elif phase == "Preflight":
                self._preflight(ctx)
            elif phase == "Preparing":
                self._preparing(ctx)
            elif phase == "Running":
                self._running(ctx)
            if not ctx.again or st.phase in TERMINAL:
                break
        return self._outcome(ctx, old)

    # ------------------------------------------------------------------ phases
    def _pending(self, ctx: _Ctx, body: JSON) -> None:
        spec, st = ctx.spec_(), ctx.st
        if not (body.get("status") or {}).get("phase"):
            st.phase = "Pending"
            self._event(ctx, "Normal", "Pending", "accepted; checking inputs")
        problem = self._check_inputs(ctx)
        if problem is not None:
            self._fail(ctx, problem[0], problem[1])
            return
        blocker = self._blocking_run(ctx, body)
        if blocker is not None:
            if st.waiting_for != blocker:
                self._event(
                    ctx,
                    "Normal",
                    "Waiting",
                    f"waiting for BenchmarkRun {blocker} on the same cluster",
                )
            st.waiting_for = blocker
            _set_condition(
                st, "Waiting", "True", "ClusterBusy",
                f"BenchmarkRun {blocker} is measuring the same cluster; concurrent runs "
                "falsify each other, so this one waits",
                ctx.now,
            )  # fmt: skip
            ctx.requeue = 2.0
            return
        st.waiting_for = None
        _set_condition(
            st, "Waiting", "False", "ClusterFree", "no other run on this cluster", ctx.now
        )
        st.started_at = ctx.now
        self._enter(ctx, "Preflight", f"preflight (policy {spec.preflight.policy})")

    def _check_inputs(self, ctx: _Ctx) -> tuple[str, str] | None:
        """What the schema cannot check: the Secret and its keys, and that a bench node exists."""
        spec, run = ctx.spec_(), ctx.run
        secret = spec.credentials.secret_ref.name
        try:
            keys = self.kube.secret_keys(run.namespace, secret)
        except KubeForbidden as exc:
            return ("NotPermitted", _not_permitted(run.namespace, exc))
        if keys is None:
            return (
                "SecretNotFound",
                f"spec.credentials.secretRef.name: Secret {secret!r} not found in namespace "
                f"{run.namespace!r}; create it: kubectl -n {run.namespace} create secret generic "
                f"{secret} --from-literal={spec.credentials.user_key}=<user> "
                f"--from-literal={spec.credentials.password_key}=<password>",
            )
        missing = [
            (f, k)
            for f, k in (
                ("userKey", spec.credentials.user_key),
                ("passwordKey", spec.credentials.password_key),
            )
            if k not in keys
        ]
        if missing:
            f, k = missing[0]
            return (
                "SecretKeyMissing",
                f"spec.credentials.{f}: Secret {run.namespace}/{secret} has no key {k!r} "
                f"(it has: {', '.join(sorted(keys)) or 'no keys'}); add the key or set "
                f"spec.credentials.{f} to one of those",
            )
        selector = spec.placement.node_selector
        if selector:
            nodes = self.kube.nodes()
            matching = [
                n
                for n in nodes
                if all((n["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())
            ]
            if not matching:
                text = ",".join(f"{k}={v}" for k, v in selector.items())
                return (
                    "NoBenchNode",
                    f"spec.placement.nodeSelector {{{text}}} matches no node; label the "
                    f"dedicated benchmark node: kubectl label node <node> {text}",
                )
        # Last, so a run whose inputs are wrong creates nothing: the permission-less identity
        # its pods run as (deploy/ lets the controller create it only where runs are enabled).
        try:
            self.kube.ensure_service_account(build_runner_service_account(run.namespace))
        except KubeForbidden as exc:
            return ("NotPermitted", _not_permitted(run.namespace, exc))
        return None

    def _blocking_run(self, ctx: _Ctx, body: JSON) -> str | None:
        """The run to wait for: an active one on the same cluster, or an older pending one."""
        me = ctx.run
        key = target_key(ctx.spec_(), me.namespace)
        mine = (body["metadata"].get("creationTimestamp", ""), me.namespace, me.name)
        for other in self.kube.benchmark_runs():
            om = other["metadata"]
            if om.get("uid") == me.uid:
                continue
            phase = (other.get("status") or {}).get("phase") or "Pending"
            # A run being deleted measures nothing any more (its Jobs are going with it).
            if phase in TERMINAL or om.get("deletionTimestamp"):
                continue
            try:
                ospec = BenchmarkRunSpec.model_validate(other.get("spec") or {})
            except ValueError:
                continue  # an invalid run will fail on its own and never measure
            if target_key(ospec, om["namespace"]) != key:
                continue
            theirs = (om.get("creationTimestamp", ""), om["namespace"], om["name"])
            if phase in ACTIVE or theirs < mine:
                return f"{om['namespace']}/{om['name']}"
        return None

    def _preflight(self, ctx: _Ctx) -> None:
        spec, st = ctx.spec_(), ctx.st
        if spec.preflight.policy == "Off" or self.preflight is None:
            st.preflight = PreflightStatus(checks=[], last_evaluated=ctx.now, attempts=0)
            _set_condition(
                st, "PreflightPassed", "True", "Skipped", "preflight policy is Off", ctx.now
            )
            self._enter(ctx, "Preparing", "preparing the dataset")
            return
        last = st.preflight.last_evaluated if st.preflight else None
        if last is not None and ctx.now - last < PREFLIGHT_RETRY:
            ctx.requeue = (PREFLIGHT_RETRY - (ctx.now - last)).total_seconds()
            return
        out = self.preflight(spec, ctx.run.namespace, ctx.endpoint_())
        attempts = (st.preflight.attempts if st.preflight else 0) + 1
        st.preflight = PreflightStatus(
            checks=[
                PreflightCheck(name=c.name, status=c.status, message=c.message, stores=c.stores)
                for c in out.checks
            ],
            last_evaluated=ctx.now,
            attempts=attempts,
        )
        env = st.environment or Environment()
        env.tidb_version = out.tidb_version or env.tidb_version
        env.server_version = out.server_version or env.server_version
        st.environment = env
        verdict = out.verdict
        if verdict.proceed:
            for c in out.checks:
                if c.status != "Pass":
                    self._event(ctx, "Warning", f"Preflight{c.status}", f"{c.name}: {c.message}")
            _set_condition(
                st, "PreflightPassed", "True" if verdict.status != "Fail" else "False",
                "Passed" if verdict.status == "Pass" else f"Proceeded{verdict.status}",
                verdict.message, ctx.now,
            )  # fmt: skip
            self._enter(ctx, "Preparing", "preparing the dataset")
            return
        failing = [c for c in out.checks if c.status == "Fail"]
        detail = "; ".join(f"{c.name}: {c.message}" for c in failing)
        started = st.started_at or ctx.now
        waited = (ctx.now - started).total_seconds()
        if waited >= spec.preflight.timeout_seconds:
            self._fail(
                ctx,
                "PreflightFailed",
                f"preflight still failing after {waited:.0f}s (timeoutSeconds "
                f"{spec.preflight.timeout_seconds}): {detail}",
            )
            return
        if attempts == 1:
            self._event(ctx, "Warning", "PreflightWaiting", detail)
        _set_condition(
            st, "PreflightPassed", "False", "Waiting",
            f"attempt {attempts}, re-checking until {spec.preflight.timeout_seconds}s have "
            f"passed: {detail}",
            ctx.now,
        )  # fmt: skip
        ctx.requeue = PREFLIGHT_RETRY.total_seconds()

    def _preparing(self, ctx: _Ctx) -> None:
        spec, run, st = ctx.spec_(), ctx.run, ctx.st
        name = object_name(run.name, "prepare")
        job = self._ensure_dataset_job(ctx, name, "prepare")
        result = self._job_result(ctx, job, "prepare", "dataset")
        if result is None:
            return
        action = result.get("action", "prepared")
        text = {
            "reused": f"{spec.dataset.tables} table(s) of {spec.dataset.table_size} rows exist: "
            "reused",
            "prepared": f"loaded {spec.dataset.tables} table(s) of {spec.dataset.table_size} rows "
            f"({result.get('reason', 'missing')}) in {result.get('seconds', '?')}s",
            "verified": "dataset present (prepare: Never)",
        }.get(action, action)
        _set_condition(st, "DatasetReady", "True", action.capitalize(), text, ctx.now)
        self._event(ctx, "Normal", "DatasetReady", text)
        st.steps = [
            StepStatus(index=i, workload=w, threads=t, phase="Pending")
            for i, (w, t) in enumerate((w, t) for w in spec.workloads for t in spec.threads)
        ]
        st.current_step = 0
        self._enter(ctx, "Running", f"running {len(st.steps)} step(s)")

    def _running(self, ctx: _Ctx) -> None:
        st = ctx.st
        if st.current_step is None or not st.steps:
            self._fail(ctx, "Internal", "status.steps is empty in phase Running")
            return
        if st.current_step >= len(st.steps):
            self._finish(ctx)
            return
        step = st.steps[st.current_step]
        if step.phase == "Pending":
            self._start_step(ctx, step)
        elif step.phase == "Running":
            self._observe_step(ctx, step)

    # ------------------------------------------------------------------ steps
    def _step_selector(self, run: RunRef, index: int) -> str:
        return f"{LABEL_RUN}={label_value(run.name)},{LABEL_ROLE}=step,{LABEL_STEP}={index}"

    def _start_step(self, ctx: _Ctx, step: StepStatus) -> None:
        spec, run, st = ctx.spec_(), ctx.run, ctx.st
        existing = self.kube.jobs(run.namespace, self._step_selector(run, step.index))
        # After a restart some Jobs of this step may exist already: keep their start time
        # so all clients still start together.
        # One client needs no rendezvous (and cannot be late for one: a slow pod start under
        # load must not make its step invalid); several get a common start a few seconds ahead.
        start_at = _start_at_of(existing)
        if start_at is None and spec.clients > 1:
            start_at = ctx.now + timedelta(seconds=START_LEAD_SECONDS)
        names = []
        deadline = START_LEAD_SECONDS + spec.warmup_seconds + spec.duration_seconds + 300
        for c in range(spec.clients):
            name = step_job_name(run.name, step.index, c)
            args = build_step_runner_args(
                spec,
                ctx.endpoint_(),
                workload=step.workload,
                threads=step.threads,
                start_at=start_at,
            )
            job = build_runner_job(
                run, spec, ctx.endpoint_(), name=name, role="step", runner_args=args,
                step=step.index, client=c, active_deadline_seconds=deadline, image=self.image,
            )  # fmt: skip
            self.kube.create_job(job)
            names.append(name)
        step.phase = "Running"
        step.started_at = ctx.now
        step.job_names = names
        msg = (
            f"step {step.index + 1}/{len(st.steps)}: {step.workload} at {step.threads} threads"
            f" x {spec.clients} client(s)"
            + (f", starting together at {start_at.isoformat()}" if start_at else "")
        )
        _set_condition(st, "Progressing", "True", "StepRunning", msg, ctx.now)
        self._event(ctx, "Normal", "StepStarted", msg)
        ctx.requeue = 1.0

    def _observe_step(self, ctx: _Ctx, step: StepStatus) -> None:
        spec, run, st = ctx.spec_(), ctx.run, ctx.st
        jobs = self.kube.jobs(run.namespace, self._step_selector(run, step.index))
        pods = self.kube.pods(run.namespace, self._step_selector(run, step.index))
        if len(jobs) < spec.clients:
            # Someone deleted a Job mid-step: its clients cannot be re-synchronised, so the
            # step starts over (a lost step would be worse than a repeated one).
            self.kube.delete_jobs(run.namespace, self._step_selector(run, step.index))
            step.phase = "Pending"
            step.notes = [*step.notes, f"restarted at {ctx.now.isoformat()}: a client Job vanished"]
            self._event(ctx, "Warning", "StepRestarted", f"step {step.index + 1}: a Job vanished")
            return
        unscheduled = _unschedulable(pods)
        if unscheduled:
            waited = ctx.now - (step.started_at or ctx.now)
            if waited >= self.scheduling_timeout:
                self.kube.delete_jobs(run.namespace, self._step_selector(run, step.index))
                step.phase = "Failed"
                self._fail(
                    ctx,
                    "Unschedulable",
                    f"step {step.index + 1} ({step.workload}, {step.threads} threads): the "
                    f"benchmark pod could not be scheduled for {waited.total_seconds():.0f}s: "
                    f"{unscheduled}",
                )
                return
            # One Warning when the pod is first seen waiting, not one per look (every 2 s).
            if _cond(st, "Progressing") != "Unschedulable":
                self._event(ctx, "Warning", "Unschedulable", unscheduled)
            _set_condition(
                st, "Progressing", "False", "Unschedulable",
                f"step {step.index + 1}: benchmark pod not scheduled yet: {unscheduled}",
                ctx.now,
            )  # fmt: skip
            ctx.requeue = 2.0
            return
        if not all(_job_finished(j) for j in jobs):
            if st.conditions and _cond(st, "Progressing") == "Unschedulable":
                _set_condition(st, "Progressing", "True", "StepRunning",
                               f"step {step.index + 1}: scheduled", ctx.now)  # fmt: skip
            ctx.requeue = 1.0
            return
        docs = []
        for job in sorted(jobs, key=lambda j: j["metadata"]["name"]):
            doc = _termination_doc(job, pods)
            if doc is None or not doc.get("ok"):
                why = (doc or {}).get("message") or _job_failure_text(job, pods)
                step.phase = "Failed"
                step.finished_at = ctx.now
                self._cleanup_running(ctx)
                self._fail(
                    ctx,
                    "StepFailed",
                    f"step {step.index + 1} ({step.workload}, {step.threads} threads), Job "
                    f"{job['metadata']['name']}: {why}",
                )
                return
            docs.append(doc)
        results = [StepResult.model_validate(d["result"]) for d in docs]
        histograms = [
            [(float(v), int(c)) for v, c in d.get("histogram") or []] or None for d in docs
        ]
        combined, notes = combine_step_results(results, histograms)
        late = [d for d in docs if d.get("late")]
        saturated = any((d.get("cpu") or {}).get("saturated") for d in docs)
        all_notes: list[str] = []
        for d in docs:
            all_notes.extend(n for n in d.get("notes") or [] if n not in all_notes)
        if len(docs) > 1:
            all_notes.extend(notes)
        if late:
            all_notes.append(
                f"INVALID: {len(late)} client(s) started late (max "
                f"{max(float(d.get('lateSeconds', 0)) for d in late):.1f}s after the agreed start)"
            )
        updated = step.with_result(combined)
        updated.phase = "Succeeded"
        updated.finished_at = ctx.now
        updated.valid = not late
        updated.client_saturated = saturated
        updated.notes = [*step.notes, *all_notes]
        st.steps[step.index] = updated
        self._save_series(ctx, updated, pods)
        p = combined.latency_ms
        pct = f"p{p.percentile} {p.value:.2f} ms" if p.value is not None else "no percentile"
        self._event(
            ctx, "Normal", "StepSucceeded",
            f"step {step.index + 1}/{len(st.steps)}: {combined.workload} at {combined.threads} "
            f"threads: {combined.qps:,.0f} QPS, {pct}"
            + ("" if not late else " (INVALID: late start)"),
        )  # fmt: skip
        st.current_step = step.index + 1
        ctx.requeue = 0.5
        ctx.again = True

    def _save_series(self, ctx: _Ctx, step: StepStatus, pods: list[JSON]) -> None:
        """Keep the per-interval series of every client in the results ConfigMap."""
        run, st = ctx.run, ctx.st
        name = object_name(run.name, "results")
        # Earlier steps' series are kept: the ConfigMap is rewritten whole after each step.
        current = self.kube.configmap_data(run.namespace, name) or {}
        try:
            series = dict(json.loads(current.get("series.json") or "{}"))
        except (TypeError, ValueError):  # hand-edited or truncated: start the series afresh
            series = {}
        per_client = {}
        for pod in pods:
            log = self.kube.pod_log(run.namespace, pod["metadata"]["name"], "runner")
            for line in (log or "").splitlines():
                if line.startswith(SERIES_MARKER):
                    labels = pod["metadata"].get("labels") or {}
                    per_client[labels.get("tidbbench.io/client", "0")] = json.loads(
                        line[len(SERIES_MARKER) :]
                    ).get("series", [])
        series[str(step.index)] = {
            "workload": step.workload,
            "threads": step.threads,
            "clients": per_client,
        }
        steps = [s.model_dump(by_alias=True, exclude_none=True, mode="json") for s in st.steps]
        self.kube.upsert_configmap(build_results_configmap(run, name, series, steps))
        st.results_config_map = name

    def _finish(self, ctx: _Ctx) -> None:
        spec, run, st = ctx.spec_(), ctx.run, ctx.st
        if spec.dataset.cleanup:
            job = self._ensure_dataset_job(ctx, object_name(run.name, "cleanup"), "cleanup")
            if self._job_result(ctx, job, "cleanup", "dataset cleanup") is None:
                return
        results = [s.to_result() for s in st.steps if s.valid]
        valid = [r for r in results if r is not None]
        st.summary = analysis.compute_status_summary(
            valid, spec.workloads, spec.slo.latency_ms if spec.slo else None
        )
        env = st.environment or Environment()
        env.sysbench_version = next((r.sysbench_version for r in valid), env.sysbench_version)
        pods = self.kube.pods(
            run.namespace, f"{LABEL_RUN}={label_value(run.name)},{LABEL_ROLE}=step"
        )
        env.nodes = sorted(
            {str(p["spec"].get("nodeName")) for p in pods if p["spec"].get("nodeName")}
        )
        ep = ctx.endpoint_()
        if ep.cluster_name is not None:
            tc = self.kube.tidb_cluster(ep.cluster_namespace, ep.cluster_name)
            if tc is not None:
                env.images, env.replicas = _cluster_images(tc)
        st.environment = env
        st.current_step = len(st.steps)
        st.finished_at = ctx.now
        headline = (st.summary.headline if st.summary else None) or "no valid step"
        _set_condition(st, "Progressing", "False", "Complete", "all steps done", ctx.now)
        _set_condition(st, "Complete", "True", "Succeeded", headline, ctx.now)
        st.message = headline
        self._enter(ctx, "Succeeded", headline)

    # ------------------------------------------------------------------ jobs
    def _ensure_dataset_job(self, ctx: _Ctx, name: str, action: str) -> JSON:
        spec, run = ctx.spec_(), ctx.run
        args = build_dataset_runner_args(
            spec, ctx.endpoint_(), action=action, workload=spec.workloads[0]
        )
        job = build_runner_job(
            run, spec, ctx.endpoint_(), name=name, role=action, runner_args=args,
            active_deadline_seconds=6 * 3600, image=self.image,
        )  # fmt: skip
        return self.kube.create_job(job)

    def _job_result(self, ctx: _Ctx, job: JSON, role: str, what: str) -> dict[str, Any] | None:
        """The finished dataset Job's result document; None while it runs or once the run failed."""
        run, st = ctx.run, ctx.st
        selector = f"{LABEL_RUN}={label_value(run.name)},{LABEL_ROLE}={role}"
        job = next(iter(self.kube.jobs(run.namespace, selector)), job)
        pods = self.kube.pods(run.namespace, selector)
        unscheduled = _unschedulable(pods)
        created = _parse_time(job["metadata"].get("creationTimestamp")) or ctx.now
        if unscheduled:
            if ctx.now - created >= self.scheduling_timeout:
                self.kube.delete_jobs(run.namespace, selector)
                self._fail(
                    ctx, "Unschedulable", f"the {what} pod could not be scheduled: {unscheduled}"
                )
                return None
            _set_condition(st, "Progressing", "False", "Unschedulable",
                           f"{what} pod not scheduled yet: {unscheduled}", ctx.now)  # fmt: skip
            ctx.requeue = 2.0
            return None
        if not _job_finished(job):
            ctx.requeue = 1.0
            return None
        doc = _termination_doc(job, pods)
        if doc is None or not doc.get("ok"):
            why = (doc or {}).get("message") or _job_failure_text(job, pods)
            self._fail(ctx, "DatasetFailed", f"{what} failed: {why}")
            return None
        return doc

    def _cleanup_running(self, ctx: _Ctx) -> None:
        """A failed run leaves nothing behind: its Jobs and their pods are deleted.

        What went wrong is already in status and Events, which outlive the pods.
        """
        self.kube.delete_jobs(ctx.run.namespace, f"{LABEL_RUN}={label_value(ctx.run.name)}")

    def _after_finish(self, ctx: _Ctx, body: JSON) -> None:
        """ttlSecondsAfterFinished: delete the run's Jobs (and pods) once it has passed."""
        ttl = (body.get("spec") or {}).get("ttlSecondsAfterFinished")
        finished = ctx.st.finished_at
        if ttl is None or finished is None or ctx.now < finished + timedelta(seconds=int(ttl)):
            return
        self.kube.delete_jobs(ctx.run.namespace, f"{LABEL_RUN}={label_value(ctx.run.name)}")

    # ------------------------------------------------------------------ status helpers
    def _enter(self, ctx: _Ctx, phase: str, message: str) -> None:
        ctx.st.phase = phase  # type: ignore[assignment]
        ctx.st.message = message
        self._event(ctx, "Normal", phase, message)
        ctx.requeue = 0.2
        ctx.again = True

    def _fail(self, ctx: _Ctx, reason: str, message: str) -> None:
        st = ctx.st
        if st.phase not in (None, "Pending"):
            self._cleanup_running(ctx)
        st.phase = "Failed"
        st.message = message
        st.finished_at = ctx.now
        st.waiting_for = None
        _set_condition(st, "Complete", "True", reason, message, ctx.now)
        _set_condition(st, "Failed", "True", reason, message, ctx.now)
        self._event(ctx, "Warning", reason, message)

    def _event(self, ctx: _Ctx, type_: str, reason: str, message: str) -> None:
        ctx.events.append((type_, reason, message))
        self.kube.create_event(
            build_event(
                ctx.run,
                reason=reason,
                message=message,
                type_=type_,
                now=ctx.now,
                name_suffix=f"{reason.lower()}-{int(datetime.now(UTC).timestamp() * 1e6):x}",
            )
        )

    def _outcome(self, ctx: _Ctx, old: dict[str, Any]) -> Outcome:
        new = ctx.st.model_dump(by_alias=True, exclude_none=True, mode="json")
        patch: dict[str, Any] = {k: v for k, v in new.items() if old.get(k) != v}
        for k in old:
            if k not in new and k != "kopf":
                patch[k] = None  # merge patch: remove what no longer applies (waitingFor)
        return Outcome(status=patch, requeue_seconds=ctx.requeue, events=ctx.events)


@dataclass
class _Ctx:
    run: RunRef
    st: BenchmarkRunStatus
    now: datetime
    spec: BenchmarkRunSpec | None = None
    endpoint: Endpoint | None = None
    requeue: float | None = None
    again: bool = False
    events: list[tuple[str, str, str]] = field(default_factory=list)

    def spec_(self) -> BenchmarkRunSpec:
        assert self.spec is not None
        return self.spec

    def endpoint_(self) -> Endpoint:
        assert self.endpoint is not None
        return self.endpoint


# ---------------------------------------------------------------------- pure helpers
def _not_permitted(namespace: str, exc: Exception) -> str:
    """What to do when the controller's RBAC does not reach a run's namespace (deploy/)."""
    return (
        f"the controller may not work in namespace {namespace!r} ({exc}); enable BenchmarkRuns "
        f"there by binding ClusterRoles tidb-bench-secret-reader and tidb-bench-run-namespace "
        f"to ServiceAccount tidb-bench-system/tidb-bench-operator: set the namespace in "
        f"deploy/run-namespace/kustomization.yaml and kubectl apply -k deploy/run-namespace/"
    )


def _set_condition(
    st: BenchmarkRunStatus, type_: str, status: str, reason: str, message: str, now: datetime
) -> None:
    """Upsert a condition; lastTransitionTime moves only when the status changes."""
    for i, c in enumerate(st.conditions):
        if c.type == type_:
            changed = c.status != status
            st.conditions[i] = Condition(
                type=type_,
                status=status,
                reason=reason,
                message=message[:2048],
                last_transition_time=now if changed else c.last_transition_time,
            )
            return
    st.conditions.append(
        Condition(
            type=type_,
            status=status,
            reason=reason,
            message=message[:2048],
            last_transition_time=now,
        )
    )


def _cond(st: BenchmarkRunStatus, type_: str) -> str | None:
    for c in st.conditions:
        if c.type == type_:
            return c.reason
    return None


def _parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _start_at_of(jobs: Sequence[JSON]) -> datetime | None:
    for job in jobs:
        for c in job["spec"]["template"]["spec"]["containers"]:
            for a in c.get("args") or []:
                if a.startswith("--start-at="):
                    return datetime.fromisoformat(a.split("=", 1)[1])
    return None


def _job_finished(job: JSON) -> bool:
    s = job.get("status") or {}
    if s.get("succeeded") or s.get("failed"):
        return True
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in s.get("conditions") or []
    )


def _unschedulable(pods: Sequence[JSON]) -> str:
    """The scheduler's reason for the first pod it cannot place, or ''."""
    for pod in pods:
        if (pod.get("status") or {}).get("phase") != "Pending" or pod["spec"].get("nodeName"):
            continue
        for c in (pod.get("status") or {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False":
                return f"pod {pod['metadata']['name']}: {c.get('message') or c.get('reason')}"
    return ""


def _pods_of(job: JSON, pods: Sequence[JSON]) -> list[JSON]:
    uid = job["metadata"]["uid"]
    return [p for p in pods if (p["metadata"].get("labels") or {}).get("controller-uid") == uid]


def _termination_doc(job: JSON, pods: Sequence[JSON]) -> dict[str, Any] | None:
    """The runner's result document from the pod's termination message (not its log)."""
    for pod in _pods_of(job, pods):
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            term = (cs.get("state") or {}).get("terminated") or {}
            msg = term.get("message")
            if not msg:
                continue
            try:
                doc = json.loads(msg)
            except ValueError:
                return {"ok": False, "message": f"exit {term.get('exitCode')}: {msg[-800:]}"}
            if isinstance(doc, dict):
                return doc
    return None


def _job_failure_text(job: JSON, pods: Sequence[JSON]) -> str:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Failed" and c.get("status") == "True":
            return f"{c.get('reason')}: {c.get('message')}"
    for pod in _pods_of(job, pods):
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            term = (cs.get("state") or {}).get("terminated") or {}
            if term:
                return f"runner exited {term.get('exitCode')} ({term.get('reason')})"
    return "the Job failed without a result"


def _cluster_images(tc: JSON) -> tuple[dict[str, str], dict[str, int]]:
    spec = tc.get("spec") or {}
    version = spec.get("version", "")
    images, replicas = {}, {}
    for comp in ("pd", "tikv", "tidb", "tiflash"):
        c = spec.get(comp)
        if not isinstance(c, dict):
            continue
        base = c.get("baseImage") or f"pingcap/{comp}"
        images[comp] = (
            f"{base}:{c.get('version') or version}" if (c.get("version") or version) else base
        )
        if "replicas" in c:
            replicas[comp] = int(c["replicas"])
    return images, replicas
