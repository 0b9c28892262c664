"""The end of a run: clean the dataset up if asked, summarise, record the environment; and
after the end, delete its Jobs once `ttlSecondsAfterFinished` has passed.
"""

from __future__ import annotations

from datetime import timedelta

from tidb_bench_operator.domain.api.common import RunPhase
from tidb_bench_operator.domain.api.run_status import Environment
from tidb_bench_operator.domain.cluster.view import V2_KIND, labels_of
from tidb_bench_operator.domain.fingerprint import (
    INSTANCE_LABEL,
    Fingerprint,
    flatten_spec,
    image_digests,
)
from tidb_bench_operator.domain.jobs import node_names, run_selector
from tidb_bench_operator.domain.stats import analysis, capacity
from tidb_bench_operator.domain.trust.frozen import governing_spec
from tidb_bench_operator.reconcile.run.context import RunContext, RunState
from tidb_bench_operator.reconcile.run.dataset import dataset_job


def finish(ctx: RunContext) -> None:
    """All steps are done: the optional cleanup Job, then the summary, then Succeeded; or,
    when no step is valid, Failed with reason NoValidStep (the night measured nothing usable,
    and the failed-run alerts must say so)."""
    spec, run, st = ctx.spec, ctx.run, ctx.st
    if spec.dataset.cleanup and dataset_job(ctx, "cleanup", "dataset cleanup") is None:
        return
    kept = [(r, s.rate) for s in st.steps if s.valid for r in [s.to_result()] if r is not None]
    valid = [r for r, _ in kept]
    slo = spec.slo.latency_ms if spec.slo else None
    rates = [rate for _, rate in kept] if spec.rates else []
    st.summary = analysis.compute_status_summary(valid, spec.workloads, slo, rates)
    invalid = [r for r in (s.to_result() for s in st.steps if s.valid is False) if r is not None]
    peak = analysis.compute_status_summary(invalid, spec.workloads, slo) if not valid else None
    if peak is not None:
        # Every step was invalid: the peak is shown, said to be invalid, and nothing is
        # recommended (docs/guard.md).
        st.summary = peak.model_copy(
            update={
                "recommended_threads": None,
                "recommended_qps": None,
                "recommended_rate": None,
                "per_workload": [],
                "headline": f"EVERY STEP INVALID (see the steps' disturbances and notes); "
                f"nothing recommended. Invalid peak: {peak.headline}",
            }
        )
    st.summary = capacity.with_capacity(st.summary, spec, st.steps)
    env = st.environment or Environment()
    env.sysbench_version = next((r.sysbench_version for r in valid), env.sysbench_version)
    # Each recorded step added its nodes (its Jobs are gone by now); any still here join.
    step_pods = ctx.kube.pods(run.namespace, run_selector(run, role="step"))
    env.nodes = sorted(set(env.nodes) | set(node_names(step_pods)))
    st.environment = env
    st.fingerprint = fingerprint(ctx, env)
    st.current_step = len(st.steps)
    st.finished_at = ctx.now
    headline = (st.summary.headline if st.summary else None) or "no valid step"
    ctx.condition("Progressing", "False", "Complete", "all steps done")
    if st.steps and not valid:
        ctx.fail(
            "NoValidStep",
            f"none of the {len(st.steps)} step(s) is valid: each was disturbed, started late or "
            f"could not be judged (see each step's disturbances and notes). {headline}",
        )
        return
    ctx.condition("Complete", "True", "Succeeded", headline)
    st.message = headline
    ctx.enter(RunPhase.SUCCEEDED, headline)


def fingerprint(ctx: RunContext, env: Environment) -> Fingerprint:
    """What the run measured against: the server's word over SQL, the cluster's pods, the spec."""
    ep = ctx.endpoint
    facts = ctx.deps.server_facts
    found = facts(ctx.spec, ctx.run.namespace, ep) if facts is not None else Fingerprint()
    digests: dict[str, str] = {}
    if ep.cluster_name is not None:
        if ep.cluster_kind == V2_KIND:
            keys = labels_of(V2_KIND)
            pods = ctx.kube.pods(ep.cluster_namespace, f"{keys.cluster}={ep.cluster_name}")
            digests = image_digests(pods, keys.component, any_component=True)
        else:
            pods = ctx.kube.pods(ep.cluster_namespace, f"{INSTANCE_LABEL}={ep.cluster_name}")
            digests = image_digests(pods)
    return found.model_copy(
        update={
            "images": dict(env.images),
            "image_digests": digests,
            "replicas": dict(env.replicas),
            "sysbench_version": env.sysbench_version,
            "spec": flatten_spec(governing_spec(ctx.body)),
        }
    )


def expire(state: RunState) -> None:
    """A finished run: delete its Jobs (and pods) once ttlSecondsAfterFinished has passed."""
    ttl = governing_spec(state.body).get("ttlSecondsAfterFinished")
    finished = state.st.finished_at
    if ttl is None or finished is None or state.now < finished + timedelta(seconds=int(ttl)):
        return
    state.delete_jobs()
