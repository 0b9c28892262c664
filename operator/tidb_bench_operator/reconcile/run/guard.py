"""The guard over a measured step: look at the cluster and PD while it runs, and judge.

When a step's Jobs are created the guard takes a first look (the cluster's pods, its
rollout signals, the eligible benchmark nodes, PD) and keeps it in `status.guardLook`; on
every later look at the running step (the Driver looks about once a second) it lists the
cluster's pods and then reads the cluster object again — two API calls — and polls PD every
`spec.guard.pdIntervalSeconds`; domain/guard.py says what changed. When the step's clients
are done, their interval series are judged too (steps.py). docs/guard.md has the rules.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from tidb_bench_operator.adapters.clusters import read_cluster
from tidb_bench_operator.domain.api.guard import Disturbance, GuardLook
from tidb_bench_operator.domain.api.run_status import StepStatus
from tidb_bench_operator.domain.cluster.view import database_pod_selector
from tidb_bench_operator.domain.guard import (
    client_disturbances,
    kube_disturbances,
    merged,
    pd_disturbances,
    pd_entries,
    pod_entries,
    rollout_baseline,
    rollout_signals,
    summary,
)
from tidb_bench_operator.domain.objects import JSON
from tidb_bench_operator.domain.preflight.placement import eligible_bench_nodes
from tidb_bench_operator.errors import TidbBenchError
from tidb_bench_operator.reconcile.run.context import RunContext

#: Events per step attempt about disturbances; later ones are only in status.
MAX_EVENTS_PER_STEP = 5
#: While a disturbed step waits to be measured again, the gate is asked at most this often.
GATE_RETRY = timedelta(seconds=5)


def active(ctx: RunContext) -> bool:
    """True when spec.guard watches this run."""
    return ctx.spec.guard.policy != "Off"


def step_key(ctx: RunContext, step: StepStatus) -> str:
    """`s1r0a2`: the step, round and attempt a look belongs to."""
    return f"s{step.index}r{ctx.st.current_round or 0}a{step.attempt}"


def begin(ctx: RunContext, step: StepStatus) -> None:
    """The step's first look: what later looks are compared with.

    When the cluster cannot be read now (one failed API call), the look has no cluster
    baseline (`clusterRead` false) rather than an empty one: the next good look takes it and
    the step says so. An empty baseline would make every pod of the cluster `PodCreated`.
    """
    if not active(ctx):
        return
    look = GuardLook(step=step_key(ctx, step), at=ctx.now)
    ctx.st.guard_look = look
    _take_cluster_baseline(ctx, step, look)
    _poll_pd(ctx, step, look, force=True)


def _take_cluster_baseline(ctx: RunContext, step: StepStatus, look: GuardLook) -> None:
    try:
        cluster = _cluster(ctx)
        nodes = ctx.kube.nodes() if cluster is not None else []
    except TidbBenchError as exc:
        look.cluster_error = _reason(exc)
        return
    look.cluster_error = None
    if cluster is None:
        return
    pods, phases, spec_digest, unsettled = cluster
    placement = ctx.spec.placement
    tolerations = [t.model_dump(by_alias=True, exclude_none=True) for t in placement.tolerations]
    look.pods = pods
    look.phases = phases
    look.spec_digest = spec_digest
    look.unsettled = unsettled
    look.bench_nodes = eligible_bench_nodes(nodes, dict(placement.node_selector), tolerations)[0]
    look.cluster_read = True
    if ctx.now > look.at:
        late = (ctx.now - look.at).total_seconds()
        step.notes = [
            *step.notes,
            f"the guard's baseline of the cluster was taken {late:.0f}s into the step: the "
            "first look could not read the cluster",
        ]


def _reason(exc: Exception) -> str:
    """An API error as a short reason (the adapters' messages carry no Secret or body)."""
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


def _cluster(
    ctx: RunContext,
) -> tuple[dict[str, str], dict[str, str], str | None, list[str]] | None:
    """The cluster's pods and rollout signals now; None without a cluster.

    TidbBenchError (the adapters' KubeError, a SpecError for a cluster gone) when it cannot
    be read: the caller must not take that for a cluster without pods.
    """
    ref, ep = ctx.spec.cluster, ctx.endpoint
    if ref is None or ep.cluster_name is None:
        return None
    ref = ref.model_copy(update={"kind": ep.cluster_kind or ref.kind})
    # Pods before the cluster object: the operator writes a rollout's status after the pods
    # it creates or deletes, so a status read after the pods is at least as new as they are
    # and a surge pod is never seen without the rollout it belongs to.
    pods = (
        ctx.kube.pods(ep.cluster_namespace, database_pod_selector(ep.cluster_kind, ep.cluster_name))
        if ep.cluster_kind
        else None
    )
    view = read_cluster(ctx.kube, ref, ctx.run.namespace)
    if pods is None:
        pods = ctx.kube.pods(ep.cluster_namespace, database_pod_selector(view.kind, view.name))
    phases, spec_digest, unsettled = rollout_signals(view, pods, ctx.now)
    return pod_entries(view, pods), phases, spec_digest, unsettled


def watch(
    ctx: RunContext, step: StepStatus, client_pods: list[JSON], *, final: bool = False
) -> bool:
    """One look at a running step; True when the guard failed the run (policy Abort).

    `final`: the step's clients are done; PD is polled whatever the interval, so that the
    tail of the step (a leader change in its last seconds, a step shorter than the
    interval) is covered.
    """
    if not active(ctx):
        return False
    look = ctx.st.guard_look
    if look is None or look.step != step_key(ctx, step):
        begin(ctx, step)  # e.g. a controller restarted mid-step without the first look
        return False
    found: list[Disturbance] = []
    if not look.cluster_read:
        _take_cluster_baseline(ctx, step, look)
    else:
        try:
            cluster = _cluster(ctx)
        except TidbBenchError as exc:
            cluster, look.cluster_error = None, _reason(exc)  # this look is skipped, not empty
        if cluster is not None:
            pods, phases, spec_digest, unsettled = cluster
            name = ctx.endpoint.cluster_name or "cluster"
            found += kube_disturbances(
                look, pods, phases, spec_digest, unsettled, cluster=name, at=ctx.now
            )
            look.pods = rollout_baseline(look.pods, pods, unsettled)
    found += client_disturbances(client_pods, at=ctx.now)
    found += _poll_pd(ctx, step, look, force=final)
    if final:
        found += unjudged_cluster(ctx, look)
    return record(ctx, step, found)


def unjudged_cluster(ctx: RunContext, look: GuardLook) -> list[Disturbance]:
    """A step whose cluster no look could read: nothing shows it was undisturbed."""
    if look.cluster_read or ctx.spec.cluster is None or ctx.endpoint.cluster_name is None:
        return []
    return [
        Disturbance(
            at=ctx.now,
            source="Kubernetes",
            what="Unjudged",
            object=ctx.endpoint.cluster_name,
            message="the guard could not read the cluster at any look of the step "
            f"({look.cluster_error or 'no answer'}): nothing shows it was undisturbed",
        )
    ]


def _poll_pd(
    ctx: RunContext, step: StepStatus, look: GuardLook, *, force: bool = False
) -> list[Disturbance]:
    """PD's stores, operators and leader, when the interval has passed since the last poll
    (or `force`: the step's first and last looks)."""
    poll = ctx.deps.pd_look
    if poll is None or (ctx.endpoint.pd_url is None and ctx.endpoint.cluster_name is None):
        return []
    interval = timedelta(seconds=ctx.spec.guard.pd_interval_seconds)
    if not force and look.pd_polled_at is not None and ctx.now - look.pd_polled_at < interval:
        return []
    look.pd_polled_at = ctx.now
    seen = poll(ctx.spec, ctx.run.namespace, ctx.endpoint)
    if seen.errors:
        return []  # PD unreadable from here says nothing about the cluster (docs/guard.md)
    if not look.pd_read:
        look.stores, look.leaders = pd_entries(seen)
        look.pd_leader = seen.leader
        look.pd_read = True
        return []
    return pd_disturbances(look, seen, ctx.spec.guard, at=ctx.now)


def record(ctx: RunContext, step: StepStatus, found: list[Disturbance]) -> bool:
    """Keep the new disturbances on the step, post Events; fail the run under Abort."""
    if not found:
        return False
    before = len(step.disturbances)
    step.disturbances, added = merged(step.disturbances, found)
    what = f"step {step.index + 1} ({step.workload}, {step.threads} threads)"
    for i, d in enumerate(added):
        if before + i < MAX_EVENTS_PER_STEP:
            ctx.event("Warning", "StepDisturbed", f"{what}: {d.source}: {d.text()}")
    if added and ctx.spec.guard.policy == "Abort":
        ctx.delete_jobs(role="step", step=step.index, round_=ctx.st.current_round or 0)
        ctx.fail(
            "StepDisturbed",
            f"{what} was disturbed and spec.guard.policy is Abort: {summary(added)}",
        )
        return True
    return False


def gate_passes(ctx: RunContext, step: StepStatus) -> bool:
    """Under Retry: has the preflight gate passed again since the step was disturbed?

    Checks that failed at the run's own preflight (recorded under policy Warn) do not hold
    the step back: only what has become worse since.
    """
    since = step.guard_wait_since
    if since is None:
        return True
    gate = ctx.deps.preflight
    if gate is None:
        return True
    look = ctx.st.guard_look
    last: datetime | None = look.at if look is not None and look.step == "gate" else None
    if last is not None and ctx.now - last < GATE_RETRY:
        ctx.wait((GATE_RETRY - (ctx.now - last)).total_seconds())
        return False
    out = gate(ctx.spec, ctx.run.namespace, ctx.endpoint)
    accepted = {c.name for c in (ctx.st.preflight.checks if ctx.st.preflight else [])
                if c.status == "Fail"}  # fmt: skip
    failing = [c for c in out.checks if c.status == "Fail" and c.name not in accepted]
    if not failing:
        return True
    waited = (ctx.now - since).total_seconds()
    detail = "; ".join(f"{c.name}: {c.message}" for c in failing)
    what = f"step {step.index + 1} ({step.workload}, {step.threads} threads)"
    if waited >= ctx.spec.preflight.timeout_seconds:
        ctx.fail(
            "GuardRetryTimeout",
            f"{what} was disturbed and waited {waited:.0f}s (spec.preflight.timeoutSeconds "
            f"{ctx.spec.preflight.timeout_seconds}) for the preflight checks to pass again: "
            f"{detail}",
        )
        return False
    ctx.st.guard_look = GuardLook(step="gate", at=ctx.now)
    ctx.condition(
        "Progressing", "True", "GuardWaiting", f"{what}: waiting to measure again: {detail}"
    )
    ctx.wait(GATE_RETRY.total_seconds())
    return False
