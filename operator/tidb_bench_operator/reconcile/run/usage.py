"""A step's server resources: read over its measured window when the step is recorded.

Resource data is evidence, never a gate: whatever goes wrong here (no source, Prometheus
down, a Secret missing, the cluster unreadable) the step says "server metrics unavailable:
why" and stays as valid as its numbers are (docs/resources.md).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime, timedelta

from tidb_bench_operator.domain.api.results import StepResult
from tidb_bench_operator.domain.api.run_status import StepStatus
from tidb_bench_operator.domain.api.runner_message import StepReport
from tidb_bench_operator.domain.api.step_resources import StepResources
from tidb_bench_operator.domain.cluster.view import database_pod_selector
from tidb_bench_operator.domain.objects import JSON
from tidb_bench_operator.domain.resources.derive import (
    compute_step_resources,
    unavailable_resources,
)
from tidb_bench_operator.domain.resources.describe import describe_resources
from tidb_bench_operator.domain.resources.facts import CLIENT, node_facts, pod_facts
from tidb_bench_operator.domain.resources.usage import PodKey
from tidb_bench_operator.errors import TidbBenchError
from tidb_bench_operator.reconcile.run.context import RunContext

#: The longest a step's record waits for its source to settle (UsageSource.settle_seconds).
MAX_SETTLE_SECONDS = 3.0


def _cluster_pods(ctx: RunContext) -> list[JSON]:
    """The pods of the run's cluster (none for an explicit target without a cluster)."""
    ep = ctx.endpoint
    if ep.cluster_name is None:
        return []
    kind = ep.cluster_kind or "TidbCluster"
    return ctx.kube.pods(ep.cluster_namespace, database_pod_selector(kind, ep.cluster_name))


def measured_from(ctx: RunContext, step: StepStatus, reports: Sequence[StepReport]) -> datetime:
    """When the measured part of the step began (after the warm-up), for the series' times."""
    began: datetime | None = None
    for r in reports:
        if r.started_at:
            try:
                t = datetime.fromisoformat(r.started_at)
            except ValueError:
                continue
            began = t if began is None else min(began, t)
    start = began or step.started_at or ctx.now
    return start + timedelta(seconds=ctx.spec.warmup_seconds)


def sample(ctx: RunContext, client_pods: Sequence[JSON]) -> None:
    """One look during a step: a source without history (metrics-server) samples now."""
    source = ctx.deps.usage(ctx.spec, ctx.run.namespace) if ctx.deps.usage else None
    if source is None or isinstance(source, str):
        return
    try:
        keys = _keys([*_cluster_pods(ctx), *client_pods])
    except TidbBenchError:
        return
    source.sample(keys, ctx.now)


def _keys(pods: Sequence[JSON]) -> list[PodKey]:
    return [PodKey(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods]


def measure(
    ctx: RunContext,
    step: StepStatus,
    reports: Sequence[StepReport],
    client_pods: Sequence[JSON],
    result: StepResult,
) -> StepResources | None:
    """The step's resources over its measured window; None when spec.metrics.source is none.

    The window starts where the clients' measuring began, after the warm-up, and lasts the
    seconds sysbench measured (never past now).
    """
    if ctx.deps.usage is None or ctx.spec.metrics.source == "none":
        return None
    start = measured_from(ctx, step, reports)
    seconds = result.duration_seconds or float(ctx.spec.duration_seconds)
    end = min(ctx.now, start + timedelta(seconds=seconds))
    qps = result.qps
    source = ctx.deps.usage(ctx.spec, ctx.run.namespace)
    if source is None:
        return None
    if isinstance(source, str):
        return unavailable_resources("none", source, start, end)
    try:
        cluster = _cluster_pods(ctx)
        nodes = ctx.kube.nodes()
    except TidbBenchError as exc:
        why = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        return unavailable_resources("kubernetes", f"the cluster's pods: {why}", start, end)
    # A scraping source has the window's last seconds only once it has scraped past them:
    # a step recorded the moment it ends waits that long (once a step, a few seconds at most).
    lag = (end + timedelta(seconds=source.settle_seconds) - ctx.now).total_seconds()
    if lag > 0:
        time.sleep(min(lag, source.settle_seconds, MAX_SETTLE_SECONDS))
    clients = _finished_clients(client_pods)
    names = sorted({p["spec"].get("nodeName") for p in [*cluster, *clients]} - {None, ""})
    reading = source.read(_keys([*cluster, *clients]), names, start, end)
    # The reports come in the order of their Jobs' names (steps._reports), as do `clients`.
    cpu = {
        p["metadata"]["name"]: r.cpu
        for p, r in zip(clients, reports, strict=False)
        if r.cpu is not None
    }
    return compute_step_resources(
        reading,
        cluster_pods=[pod_facts(p) for p in cluster],
        client_pods=[pod_facts(p, CLIENT) for p in clients],
        nodes=[node_facts(n) for n in nodes],
        qps=qps,
        client_cpu=cpu,
        spec=ctx.spec.metrics,
        leaders=_leaders(ctx) if cluster else None,
    )


def _leaders(ctx: RunContext) -> dict[str, int] | None:
    """PD's leader count per TiKV store address, for the hot store's cross-check; None when
    PD is not known or did not answer (the verdict then stands on CPU alone)."""
    if ctx.deps.pd_look is None or ctx.endpoint.pd_url is None:
        return None
    look = ctx.deps.pd_look(ctx.spec, ctx.run.namespace, ctx.endpoint)
    found = {s.address: s.leader_count for s in look.stores if s.address}
    return {k: v for k, v in found.items() if v is not None} or None


def _finished_clients(pods: Sequence[JSON]) -> list[JSON]:
    """One pod per client Job, in the order of the Jobs' names: the one that finished (a
    retried pod of the same Job is left out), else the newest."""
    by_job: dict[str, JSON] = {}
    for p in pods:
        job = str((p["metadata"].get("labels") or {}).get("job-name", ""))
        done = (p.get("status") or {}).get("phase") == "Succeeded"
        if job not in by_job or done:
            by_job[job] = p
    return [by_job[j] for j in sorted(by_job)]


def event_text(resources: StepResources | None) -> str:
    """What a StepSucceeded Event adds about the server: `; server …; bottleneck: …`."""
    if resources is None:
        return ""
    lines = describe_resources(resources)
    kept = [lines[0], *(line for line in lines[1:] if line.startswith("bottleneck:"))]
    return "".join(f"; {line}" for line in dict.fromkeys(kept))
