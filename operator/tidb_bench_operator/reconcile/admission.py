"""Pending: check what the schema cannot, and wait for the cluster to be free.

A run is admitted when its Secret has the keys it names, a benchmark node exists, the
runner's ServiceAccount can be made, and no other run measures the same cluster (one run
at a time per cluster: concurrent runs falsify each other). Then it enters Preflight.
"""

from __future__ import annotations

from tidb_bench_operator.adapters.k8s import KubeForbidden
from tidb_bench_operator.domain.manifests import build_runner_service_account, compute_endpoint
from tidb_bench_operator.domain.models import (
    ACTIVE_PHASES,
    BenchmarkRunSpec,
    RunPhase,
    is_terminal,
)
from tidb_bench_operator.reconcile.context import JSON, RunContext

#: How often a waiting run looks again whether its cluster is free: every timer tick, so the
#: next run starts within a second of the holder finishing.
WAIT_SECONDS = 1.0


def admit(ctx: RunContext) -> None:
    """The Pending phase: fail on bad inputs, wait behind another run, or enter Preflight."""
    st = ctx.st
    if not (ctx.body.get("status") or {}).get("phase"):
        st.phase = RunPhase.PENDING
        ctx.event("Normal", "Pending", "accepted; checking inputs")
    problem = check_inputs(ctx)
    if problem is not None:
        ctx.fail(*problem)
        return
    blocker = blocking_run(ctx)
    if blocker is not None:
        if st.waiting_for != blocker:
            ctx.event(
                "Normal", "Waiting", f"waiting for BenchmarkRun {blocker} on the same cluster"
            )
        st.waiting_for = blocker
        ctx.condition(
            "Waiting", "True", "ClusterBusy",
            f"BenchmarkRun {blocker} is measuring the same cluster; concurrent runs "
            "falsify each other, so this one waits",
        )  # fmt: skip
        ctx.wait(WAIT_SECONDS)
        return
    st.waiting_for = None
    ctx.condition("Waiting", "False", "ClusterFree", "no other run on this cluster")
    st.started_at = ctx.now
    ctx.enter(RunPhase.PREFLIGHT, f"preflight (policy {ctx.spec.preflight.policy})")


def check_inputs(ctx: RunContext) -> tuple[str, str] | None:
    """What the schema cannot check: the Secret and its keys, and that a bench node exists.

    Returns (reason, message) of the first problem, or None.
    """
    spec, run, kube = ctx.spec, ctx.run, ctx.kube
    secret = spec.credentials.secret_ref.name
    try:
        keys = kube.secret_keys(run.namespace, secret)
    except KubeForbidden as exc:
        return ("NotPermitted", not_permitted(run.namespace, exc))
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
        matching = [
            n
            for n in kube.nodes()
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
        kube.ensure_service_account(build_runner_service_account(run.namespace))
    except KubeForbidden as exc:
        return ("NotPermitted", not_permitted(run.namespace, exc))
    return None


def target_key(spec: BenchmarkRunSpec, namespace: str) -> str:
    """What 'the same cluster' means for the one-run-at-a-time rule."""
    ep = compute_endpoint(spec, namespace)
    if spec.cluster is not None and (spec.target is None or spec.target.host is None):
        return f"tidbcluster/{ep.cluster_namespace}/{ep.cluster_name}"
    return f"endpoint/{ep.host}:{ep.port}"


def blocking_run(ctx: RunContext) -> str | None:
    """The run to wait for: an active one on the same cluster, or an older pending one."""
    me = ctx.run
    key = target_key(ctx.spec, me.namespace)
    mine = (ctx.body["metadata"].get("creationTimestamp", ""), me.namespace, me.name)
    for other in ctx.kube.benchmark_runs():
        if _blocks(other, me.uid, key, mine):
            om = other["metadata"]
            return f"{om['namespace']}/{om['name']}"
    return None


def _blocks(other: JSON, my_uid: str, key: str, mine: tuple[str, str, str]) -> bool:
    om = other["metadata"]
    if om.get("uid") == my_uid:
        return False
    phase = (other.get("status") or {}).get("phase") or RunPhase.PENDING
    # A run being deleted measures nothing any more (its Jobs are going with it).
    if is_terminal(phase) or om.get("deletionTimestamp"):
        return False
    try:
        ospec = BenchmarkRunSpec.model_validate(other.get("spec") or {})
    except ValueError:
        return False  # an invalid run will fail on its own and never measure
    if target_key(ospec, om["namespace"]) != key:
        return False
    theirs = (om.get("creationTimestamp", ""), om["namespace"], om["name"])
    return phase in ACTIVE_PHASES or theirs < mine


def not_permitted(namespace: str, exc: Exception) -> str:
    """What to do when the controller's RBAC does not reach a run's namespace (deploy/)."""
    return (
        f"the controller may not work in namespace {namespace!r} ({exc}); enable BenchmarkRuns "
        f"there by binding ClusterRoles tidb-bench-secret-reader and tidb-bench-run-namespace "
        f"to ServiceAccount tidb-bench-system/tidb-bench-operator: set the namespace in "
        f"deploy/run-namespace/kustomization.yaml and kubectl apply -k deploy/run-namespace/"
    )
