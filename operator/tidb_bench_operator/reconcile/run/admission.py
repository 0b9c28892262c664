"""Pending: check what the schema cannot, and wait for the cluster to be free.

A run is admitted when its Secret has the keys it names, a benchmark node exists for each
client, the runner's ServiceAccount can be made, and it is its turn in its cluster's queue
(one run at a time per cluster: concurrent runs falsify each other; domain/queue.py states
the order).
The turn comes from the controller's in-memory queue, so waiting costs no API call: the
inputs are read when the run arrives and again when it starts, not while it waits.
"""

from __future__ import annotations

from dataclasses import replace

from tidb_bench_operator.adapters.clusters import read_cluster
from tidb_bench_operator.domain.api.common import RunPhase
from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
from tidb_bench_operator.domain.api.run_status import AdmittedSpec, Environment
from tidb_bench_operator.domain.cluster.tls import (
    pd_url_with_tls,
    resolve_tls,
    secret_keys_missing,
    secret_not_found,
)
from tidb_bench_operator.domain.cluster.view import V2_KIND
from tidb_bench_operator.domain.manifests import (
    DEFAULT_IMAGE,
    build_runner_service_account,
    compute_endpoint,
    resolved_endpoint,
)
from tidb_bench_operator.domain.objects import JSON
from tidb_bench_operator.domain.preflight.placement import eligible_bench_nodes
from tidb_bench_operator.domain.sysbench.config_file import uncarried
from tidb_bench_operator.domain.trust.reach import refusal
from tidb_bench_operator.errors import KubeForbidden, SpecError
from tidb_bench_operator.reconcile.run.context import RunContext


def admit(ctx: RunContext) -> None:
    """The Pending phase: fail on bad inputs, wait behind another run, or enter Preflight."""
    st = ctx.st
    arrived = not (ctx.body.get("status") or {}).get("phase")
    if arrived:
        st.phase = RunPhase.PENDING
        ctx.event("Normal", "Pending", "accepted; checking inputs")
    ahead = ctx.turn.ahead
    if arrived or ahead is None:
        problem = check_inputs(ctx)
        if problem is not None:
            ctx.fail(*problem)
            return
    if ahead is not None:
        if st.waiting_for != ahead:
            ctx.event("Normal", "Waiting", f"waiting for BenchmarkRun {ahead} on the same cluster")
        st.waiting_for = ahead
        ctx.condition(
            "Waiting", "True", "ClusterBusy",
            f"BenchmarkRun {ahead} is ahead of this one on the same cluster (one run at a "
            "time: concurrent runs falsify each other); runs start oldest first",
        )  # fmt: skip
        ctx.park()
        return
    st.waiting_for = None
    ctx.condition("Waiting", "False", "ClusterFree", "no other run on this cluster")
    st.started_at = ctx.now
    # From here on the run goes on with this spec, whatever .spec says later.
    generation = ctx.body["metadata"].get("generation")
    st.admitted = AdmittedSpec.of(ctx.body.get("spec") or {}, generation)
    ctx.enter(RunPhase.PREFLIGHT, f"preflight (policy {ctx.spec.preflight.policy})")


def check_inputs(ctx: RunContext) -> tuple[str, str] | None:
    """What the schema cannot check: the Secrets and their keys, and that a bench node exists.

    Returns (reason, message) of the first problem, or None. First what the platform team's
    settings allow (domain/trust/reach.py): a spec that asks for more reads nothing.
    """
    spec, run, kube = ctx.spec, ctx.run, ctx.kube
    refused = refusal(spec, run.namespace, ctx.deps.reach, ctx.deps.image or DEFAULT_IMAGE)
    if refused is not None:
        return refused
    problem = check_custom_workloads(ctx)
    if problem is not None:
        return problem
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
        return ("SecretKeyMissing", key_missing(f"spec.credentials.{f}", run.namespace, secret,
                                                k, keys))  # fmt: skip
    problem = check_password(ctx)
    if problem is not None:
        return problem
    problem = check_metrics_secrets(ctx)
    if problem is not None:
        return problem
    selector = spec.placement.node_selector
    nodes = kube.nodes()
    if selector:
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
    problem = too_few_bench_nodes(spec, nodes)
    if problem is not None:
        return problem
    problem = resolve_target(ctx)
    if problem is not None:
        return problem
    # Last, so a run whose inputs are wrong creates nothing: the permission-less identity
    # its pods run as (deploy/ lets the controller create it only where runs are enabled).
    try:
        kube.ensure_service_account(build_runner_service_account(run.namespace))
    except KubeForbidden as exc:
        return ("NotPermitted", not_permitted(run.namespace, exc))
    return None


def key_missing(field: str, namespace: str, secret: str, key: str, keys: set[str]) -> str:
    """The message for a Secret without the key the spec's `field` names."""
    return (
        f"{field}: Secret {namespace}/{secret} has no key {key!r} (it has: "
        f"{', '.join(sorted(keys)) or 'no keys'}); add the key or set {field} to one of those"
    )


def check_metrics_secrets(ctx: RunContext) -> tuple[str, str] | None:
    """spec.metrics.bearerToken and .ca: each Secret exists in the run's namespace with its
    key (the controller reads them to query Prometheus; no benchmark pod mounts them)."""
    namespace, metrics = ctx.run.namespace, ctx.spec.metrics
    for field, ref, source in (
        ("bearerToken", metrics.bearer_token, "--from-literal={key}=<bearer token>"),
        ("ca", metrics.ca, "--from-file={key}=<PEM CA bundle>"),
    ):
        if ref is None:
            continue
        try:
            keys = ctx.kube.secret_keys(namespace, ref.name)
        except KubeForbidden as exc:
            return ("NotPermitted", not_permitted(namespace, exc))
        if keys is None:
            return (
                "SecretNotFound",
                f"spec.metrics.{field}.name: Secret {ref.name!r} not found in namespace "
                f"{namespace!r}; create it: kubectl -n {namespace} create secret generic "
                f"{ref.name} {source.format(key=ref.key)}",
            )
        if ref.key not in keys:
            where = f"spec.metrics.{field}.key"
            return ("SecretKeyMissing", key_missing(where, namespace, ref.name, ref.key, keys))
    return None


def check_custom_workloads(ctx: RunContext) -> tuple[str, str] | None:
    """Each custom workload's ConfigMap exists in the run's namespace and has its script key.

    A file the script `require`s cannot be known before it runs: a missing one is a Lua
    error of the step, which names the ConfigMap and the module (domain/sysbench/custom.py).
    """
    namespace = ctx.run.namespace
    for i, custom in enumerate(ctx.spec.custom_workloads):
        name = custom.config_map_ref.name
        field = f"spec.customWorkloads[{i}]"
        try:
            found = ctx.kube.configmap(namespace, name)
        except KubeForbidden as exc:
            return ("NotPermitted", not_permitted(namespace, exc))
        if found is None:
            return (
                "WorkloadConfigMapNotFound",
                f"{field}.configMapRef.name: ConfigMap {name!r} of custom workload "
                f"{custom.name!r} not found in namespace {namespace!r}; create it from the "
                f"script and the files it requires: kubectl -n {namespace} create configmap "
                f"{name} --from-file={custom.script} --from-file=<each file it requires>",
            )
        keys = set(found.get("data") or {}) | set(found.get("binaryData") or {})
        if custom.script not in keys:
            return (
                "WorkloadKeyMissing",
                f"{field}.script: ConfigMap {namespace}/{name} has no key {custom.script!r} "
                f"(it has: {', '.join(sorted(keys)) or 'no keys'}); add the script to it "
                f"(--from-file={custom.script}) or set script to one of its .lua keys",
            )
    return None


def too_few_bench_nodes(spec: BenchmarkRunSpec, nodes: list[JSON]) -> tuple[str, str] | None:
    """Each client needs a node of its own: with fewer eligible nodes than clients, the ones
    that cannot be placed would run after the others finished, and the step would measure
    fewer clients than asked while saying all of them ran. Refused under every policy."""
    tolerations = [
        t.model_dump(by_alias=True, exclude_none=True) for t in spec.placement.tolerations
    ]
    eligible, reasons = eligible_bench_nodes(nodes, dict(spec.placement.node_selector), tolerations)
    if len(eligible) >= spec.clients:
        return None
    why = f" (others: {'; '.join(reasons[:5])})" if reasons else ""
    return (
        "TooFewBenchNodes",
        f"spec.clients: {spec.clients} clients, {len(eligible)} eligible benchmark node(s)"
        f"{' (' + ', '.join(eligible) + ')' if eligible else ''}{why}; each client runs on a "
        "node of its own: label more benchmark nodes, tolerate their taints, or lower "
        "spec.clients",
    )


def check_password(ctx: RunContext) -> tuple[str, str] | None:
    """A password sysbench's config file cannot carry fails here, before any Job.

    The message names the Secret, the key and the kind of character, never the value
    (domain/sysbench/config_file.py says what sysbench can carry).
    """
    ref, namespace = ctx.spec.credentials, ctx.run.namespace
    where = f"Secret {namespace}/{ref.secret_ref.name} key {ref.password_key!r}"
    try:
        password = ctx.kube.secret_value(namespace, ref.secret_ref.name, ref.password_key)
    except KubeForbidden as exc:
        return ("NotPermitted", not_permitted(namespace, exc))
    except UnicodeDecodeError:
        problem: str | None = "bytes that are not UTF-8 text"
    else:
        problem = None if password is None else uncarried(password)
    if problem is None:
        return None
    return (
        "PasswordNotCarried",
        f"spec.credentials.passwordKey: the password in {where} has {problem}, which "
        "sysbench cannot be given (its --config-file is the only way that keeps the password "
        "out of process arguments); change the password",
    )


def resolve_target(ctx: RunContext) -> tuple[str, str] | None:
    """Read the cluster spec.cluster names (TidbCluster or Cluster) and fix the endpoint.

    The result goes to status.endpoint, which later reconciles use without reading again.
    Returns (reason, message) when the cluster cannot be resolved, else None.
    """
    spec, run = ctx.spec, ctx.run
    view = None
    if spec.cluster is not None:
        ns = spec.cluster.namespace or run.namespace
        try:
            view = read_cluster(ctx.kube, spec.cluster, run.namespace)
        except SpecError as exc:
            return ("ClusterNotFound" if exc.field == "cluster.name" else "InvalidSpec", str(exc))
        except KubeForbidden as exc:
            return (
                "NotPermitted",
                f"spec.cluster: cannot read the cluster {ns}/{spec.cluster.name} ({exc}); the "
                "controller needs get on tidbclusters.pingcap.com and clusters.core.pingcap.com "
                "and list on their PD/TiKV/TiDB groups: kubectl apply -k deploy/",
            )
    endpoint = compute_endpoint(spec, run.namespace, view)
    if not endpoint.host and view is not None:
        return (
            "InvalidSpec",
            f"spec.cluster: {view.where} has no TiDBGroup, so there is no TiDB to connect to "
            "(add a TiDBGroup to the cluster, or set spec.target.host)",
        )
    try:
        tls = resolve_tls(spec, view)
    except SpecError as exc:
        return ("InvalidSpec", str(exc))
    checked: list[tuple[str, str | None, set[str]]] = [
        ("cluster", tls.pd, set()),
        ("mysql", tls.mysql, set()),
    ]
    if tls.pd_ca is not None:
        # v2.1's CA apart: ca.crt from that Secret, the pair from the other.
        checked = [("cluster", tls.pd, {"ca.crt"}), ("cluster", tls.pd_ca, {"tls.crt", "tls.key"}),
                   ("mysql", tls.mysql, set())]  # fmt: skip
    for side, secret, elsewhere in checked:
        if secret is None:
            continue
        try:
            keys = ctx.kube.secret_keys(run.namespace, secret)
        except KubeForbidden as exc:
            return ("NotPermitted", not_permitted(run.namespace, exc))
        if keys is None:
            ns = endpoint.cluster_namespace
            return ("SecretNotFound", secret_not_found(side, spec, run.namespace, secret, ns))
        problem = secret_keys_missing(side, spec, run.namespace, secret, keys | elsewhere)
        if problem is not None:
            return ("SecretKeyMissing", problem)
    endpoint = replace(
        endpoint,
        pd_url=pd_url_with_tls(endpoint.pd_url, tls.pd is not None),
        pd_tls_secret=tls.pd,
        mysql_tls_secret=tls.mysql,
        pd_tls_ca_secret=tls.pd_ca,
    )
    if ctx.st.endpoint is None and (tls.pd or tls.mysql or tls.notes):
        used = [
            f"PD over HTTPS with the client certificate of Secret {tls.pd}"
            + (f" and the CA of Secret {tls.pd_ca}" if tls.pd_ca else "")
            if tls.pd
            else "",
            f"MySQL over TLS with the client certificate of Secret {tls.mysql}"
            if tls.mysql
            else "",
            *tls.notes,
            # Where the cluster's Secret names came from (v2.1 names them on the Cluster).
            *(view.tls.notes if view is not None else ()),
        ]
        ctx.event("Normal" if not tls.notes else "Warning", "TLS", "; ".join(u for u in used if u))
    # v2 only: which TiDBGroup and PD URL a Cluster resolved to is worth an Event (v1's
    # addresses follow from the name alone).
    if view is not None and view.kind == V2_KIND and ctx.st.endpoint is None:
        tidb = view.tidb.note if view.tidb is not None and endpoint.tidb_group else "spec.target"
        from_target = spec.target is not None and spec.target.pd_url
        pd_from = "spec.target.pdURL" if from_target else view.pd_note
        ctx.event(
            "Normal", "Target",
            f"{view.where}: TiDB at {endpoint.host}:{endpoint.port} ({tidb}), PD at "
            f"{endpoint.pd_url or 'none'}" + (f" ({pd_from})" if pd_from else ""),
        )  # fmt: skip
    ctx.st.endpoint = resolved_endpoint(endpoint)
    ctx.endpoint = endpoint
    if view is not None:
        env = ctx.st.environment or Environment()
        env.images, env.replicas, env.versions = view.images(), view.replicas(), view.versions()
        ctx.st.environment = env
    return None


def not_permitted(namespace: str, exc: Exception) -> str:
    """What to do when the controller's RBAC does not reach a run's namespace (deploy/)."""
    return (
        f"the controller may not work in namespace {namespace!r} ({exc}); enable BenchmarkRuns "
        f"there by binding ClusterRoles tidb-bench-secret-reader and tidb-bench-run-namespace "
        f"to ServiceAccount tidb-bench-system/tidb-bench-operator: set the namespace in "
        f"deploy/run-namespace/kustomization.yaml and kubectl apply -k deploy/run-namespace/"
    )
