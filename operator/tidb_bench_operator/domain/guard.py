"""The guard's judgements: what changed between the start of a step and a later look.

Pure: each function takes what was seen at the step's start (a GuardLook) and what is seen
now, and returns the disturbances. reconcile/guard.py does the looking. The rules and the
reasons for their bounds are in docs/guard.md.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from tidb_bench_operator.domain.api.guard import (
    MAX_DISTURBANCES,
    Disturbance,
    Guard,
    GuardLook,
)
from tidb_bench_operator.domain.cluster.view import DATABASE_COMPONENTS, DISPLAY, ClusterView
from tidb_bench_operator.domain.objects import JSONView, get_path, metadata_labels
from tidb_bench_operator.domain.pd import STATE_UP, Store

# ---------------------------------------------------------------------------
# Kubernetes: the cluster's pods and the operator's rollout signals


def _restarts(pod: JSONView) -> int:
    return sum(
        int(c.get("restartCount") or 0) for c in get_path(pod, "status", "containerStatuses") or []
    )


def pod_entries(view: ClusterView, pods: Sequence[JSONView]) -> dict[str, str]:
    """The cluster's live database pods as `name → 'uid node restarts component[ group]'`.

    v2 entries end with the pod's group as `<Kind>/<name>` (e.g. `TiDBGroup/tidb`), so a
    rollout of that group can own its pods' comings and goings; v1 entries have four fields.
    """
    groups = {(g.component, g.name): g.kind for g in view.groups}
    out = {}
    for pod in view.database_pods(pods):
        name = str(get_path(pod, "metadata", "name") or "")
        uid = str(get_path(pod, "metadata", "uid") or "-")
        node = str(get_path(pod, "spec", "nodeName") or "-")
        labels = metadata_labels(pod)
        component = labels.get(view.labels.component, "?")
        entry = f"{uid} {node} {_restarts(pod)} {component}"
        if view.labels.group is not None and labels.get(view.labels.group):
            group = labels[view.labels.group]
            entry += f" {groups.get((component, group), 'Group')}/{group}"
        out[name] = entry
    return out


@dataclass(frozen=True)
class _Pod:
    uid: str
    node: str
    restarts: int
    component: str
    group: str = ""

    @classmethod
    def of(cls, entry: str) -> _Pod:
        uid, node, restarts, component, group = [*entry.split(" "), "-", "-", "0", "?", ""][:5]
        return cls(uid, node, int(restarts) if restarts.isdigit() else 0, component, group)

    def text(self, name: str) -> str:
        where = f" on {self.node}" if self.node != "-" else " (not scheduled)"
        return f"{DISPLAY.get(self.component, self.component)} pod {name}{where}"


#: The baseline entry of a pod a rollout removed: a marker rather than no entry, so the
#: step's baseline still names every pod it started with.
ROLLED_OUT = "rolled-out"


def unsettled_key(item: str) -> str:
    """What an unsettled entry is about: `TiDBGroup tidb` of `TiDBGroup tidb: 1/2 updated`."""
    return item.split(": ", 1)[0]


def _settling(view: ClusterView, pods: Sequence[JSONView], now: datetime) -> list[str]:
    """Groups with `minReadySeconds` whose pod became Ready less than that long ago: the
    operator does not count it available yet, so the rollout is still going on."""
    out = []
    for g in view.groups:
        if not g.min_ready_seconds:
            continue
        for pod in view.pods_of(g, pods):
            ready = next(
                (c for c in get_path(pod, "status", "conditions") or []
                 if isinstance(c, Mapping) and c.get("type") == "Ready"),
                None,
            )  # fmt: skip
            since = _time(ready.get("lastTransitionTime")) if ready else None
            if ready and ready.get("status") == "True" and since is not None:
                age = (now - since).total_seconds()
                if age < g.min_ready_seconds:
                    name = get_path(pod, "metadata", "name")
                    out.append(
                        f"{g.kind} {g.name}: pod {name} Ready for {max(age, 0):.0f}s of "
                        f"minReadySeconds {g.min_ready_seconds}"
                    )
                    break
    return out


def _time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def rollout_signals(
    view: ClusterView, pods: Sequence[JSONView] = (), now: datetime | None = None
) -> tuple[dict[str, str], str | None, list[str]]:
    """The operator's own word that it is changing the cluster: phases, spec, rollouts.

    v1: `status.<component>.phase` (Normal, Upgrade, Scale, …); both: a digest of the
    cluster object's spec (not `metadata.generation`: the TidbCluster CRD has no status
    subresource, so every status write moves it); v2: groups not settled (a surge instance
    and, with `minReadySeconds`, a pod not yet that long Ready included), the Cluster's
    aggregated Ready/Synced conditions where it has them, and its Progressing condition.
    """
    phases = {}
    for comp in DATABASE_COMPONENTS:
        phase = get_path(view.source, "status", comp, "phase")
        if isinstance(phase, str) and phase:
            phases[comp] = phase
    spec = get_path(view.source, "spec")
    digest = (
        hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:12]
        if isinstance(spec, Mapping)
        else None
    )
    unsettled = list(view.unsettled_groups())
    if now is not None:
        known = {unsettled_key(u) for u in unsettled}
        unsettled += [u for u in _settling(view, pods, now) if unsettled_key(u) not in known]
    unsettled += view.aggregated_unsettled()
    progressing = view.progressing
    if progressing is not None and progressing.status == "True":
        unsettled.append(f"Cluster Progressing=True ({progressing.reason})")
    return phases, digest, unsettled


def kube_disturbances(
    start: GuardLook,
    pods: Mapping[str, str],
    phases: Mapping[str, str],
    spec_digest: str | None,
    unsettled: Sequence[str],
    *,
    cluster: str,
    at: datetime,
) -> list[Disturbance]:
    """What changed in the cluster's pods and rollout signals since the step started.

    Pods of a v2 group the operator is rolling out (its entry in `unsettled`) come and go
    as the rollout does — a `maxSurge` instance first, then the old one deleted: they are
    named in the rollout's one disturbance, not each a disturbance of its own.
    """
    out: list[Disturbance] = []

    def add(what: str, obj: str, message: str) -> None:
        out.append(Disturbance(at=at, source="Kubernetes", what=what, object=obj, message=message))

    rolling = {unsettled_key(u).replace(" ", "/", 1): u for u in unsettled}
    churn: dict[str, list[str]] = {}

    def in_rollout(pod: _Pod, name: str, what: str) -> bool:
        if pod.group and pod.group in rolling:
            churn.setdefault(pod.group, []).append(f"{name} {what}")
            return True
        return False

    bench = set(start.bench_nodes)
    for name, entry in sorted(pods.items()):
        now = _Pod.of(entry)
        was = start.pods.get(name)
        before = _Pod.of(was) if was is not None and was != ROLLED_OUT else None
        if now.node in bench:  # wherever it came from: the step shares the node with it
            add(
                "PodOnBenchNode",
                name,
                f"{now.text(name)}: a database pod on a node the benchmark clients use "
                "competes with them for CPU and I/O",
            )
        if before is None:
            if not in_rollout(now, name, "created"):
                add("PodCreated", name, f"{now.text(name)} appeared during the step")
        elif before.uid != now.uid:
            if not in_rollout(now, name, "recreated"):
                moved = f", moved from {before.node}" if before.node != now.node else ""
                add("PodRecreated", name, f"{now.text(name)} was deleted and created again{moved}")
        elif before.node != now.node:
            add("PodMoved", name, f"{now.text(name)}, was on {before.node}")
        elif now.restarts > before.restarts:
            add(
                "PodRestarted",
                name,
                f"{now.text(name)}: restart count {before.restarts} → {now.restarts}",
            )
    for name in sorted(set(start.pods) - set(pods)):
        if start.pods[name] == ROLLED_OUT:
            continue
        gone = _Pod.of(start.pods[name])
        if not in_rollout(gone, name, "deleted"):
            add("PodDeleted", name, f"{gone.text(name)} is gone")
    for comp, phase in sorted(phases.items()):
        if phase != "Normal":  # also when it began before the step: it is still going on
            was = start.phases.get(comp, "unset")
            add(
                "ClusterPhase",
                cluster,
                f"{DISPLAY.get(comp, comp)} phase {phase} (at the step's start: {was}): the "
                "operator is changing the cluster",
            )
    if spec_digest and start.spec_digest and spec_digest != start.spec_digest:
        add(
            "ClusterSpecChanged",
            cluster,
            f"the cluster's spec changed during the step (digest {start.spec_digest} → "
            f"{spec_digest}): the operator will roll it out",
        )
    began = {unsettled_key(u) for u in start.unsettled}
    for item in unsettled:
        churned = churn.get(unsettled_key(item).replace(" ", "/", 1))
        if unsettled_key(item) not in began or churned:
            pods_text = f" (rollout pods: {', '.join(churned)})" if churned else ""
            add("ClusterProgressing", cluster, item + pods_text)
    return out


def rollout_baseline(
    start_pods: Mapping[str, str], pods: Mapping[str, str], unsettled: Sequence[str]
) -> dict[str, str]:
    """The step's pod baseline with the pods of groups in a rollout taken in as they are now.

    A rollout's pods are its own disturbance, recorded once (`kube_disturbances`); once the
    rollout has settled, its surge pod and the pods it replaced must not each become a
    disturbance of their own at the next look.
    """
    rolling = {unsettled_key(u).replace(" ", "/", 1) for u in unsettled}
    out = dict(start_pods)
    for name, entry in pods.items():
        if _Pod.of(entry).group in rolling:
            out[name] = entry
    for name in set(start_pods) - set(pods):
        if start_pods[name] != ROLLED_OUT and _Pod.of(start_pods[name]).group in rolling:
            out[name] = ROLLED_OUT
    return out


def client_disturbances(client_pods: Sequence[JSONView], *, at: datetime) -> list[Disturbance]:
    """A benchmark client pod whose container restarted (its numbers restarted with it)."""
    out = []
    for pod in client_pods:
        restarts = _restarts(pod)
        if restarts:
            name = str(get_path(pod, "metadata", "name") or "")
            node = get_path(pod, "spec", "nodeName") or "-"
            out.append(
                Disturbance(
                    at=at,
                    source="Kubernetes",
                    what="ClientRestarted",
                    object=name,
                    message=f"client pod {name} on {node}: restart count {restarts}",
                )
            )
    return out


# ---------------------------------------------------------------------------
# PD


@dataclass(frozen=True)
class PdLook:
    """One poll of PD: its stores, pending operators and leader (None: not answered)."""

    stores: Sequence[Store]
    pending_operators: int
    first_operator: str = ""
    leader: str | None = None
    errors: list[str] = field(default_factory=list)


def pd_entries(look: PdLook) -> tuple[dict[str, str], dict[str, int]]:
    """Store states and leader counts by store id, as GuardLook keeps them."""
    states = {str(s.id): s.state_name for s in look.stores}
    leaders = {str(s.id): s.leader_count for s in look.stores if s.leader_count is not None}
    return states, leaders


def pd_disturbances(
    start: GuardLook, look: PdLook, bounds: Guard, *, at: datetime
) -> list[Disturbance]:
    """Stores leaving Up, operators piling up, leaders moving, PD's leader changing."""
    out: list[Disturbance] = []

    def add(what: str, obj: str, message: str) -> None:
        out.append(Disturbance(at=at, source="PD", what=what, object=obj, message=message))

    states, leaders = pd_entries(look)
    for store in sorted(look.stores, key=lambda s: s.id):
        before = start.stores.get(str(store.id))
        if store.state_name != STATE_UP and store.state_name != before:
            add(
                "StoreState",
                f"store {store.id}",
                f"store {store.id} ({store.address or 'no address'}) is {store.state_name} "
                f"(was {before or 'not listed'})",
            )
    for sid in sorted(set(start.stores) - set(states), key=int):
        add("StoreState", f"store {sid}", f"store {sid} is no longer listed by PD")
    if look.pending_operators > bounds.max_pending_operators:
        add(
            "PendingOperators",
            "pd",
            f"{look.pending_operators} pending PD operators (bound "
            f"{bounds.max_pending_operators}), e.g. {look.first_operator}",
        )
    total = sum(start.leaders.values())
    if total > 0 and leaders:
        moved = sum(max(0, n - leaders.get(sid, 0)) for sid, n in start.leaders.items())
        percent = 100.0 * moved / total
        if percent > bounds.max_leader_move_percent:
            add(
                "LeadersMoved",
                "pd",
                f"{moved} of {total} leaders ({percent:.1f}%) moved between stores (bound "
                f"{bounds.max_leader_move_percent:g}%)",
            )
    if start.pd_leader and look.leader and look.leader != start.pd_leader:
        add("PDLeaderChanged", look.leader, f"PD leader {start.pd_leader} → {look.leader}")
    return out


# ---------------------------------------------------------------------------
# sysbench's interval series

#: A stall needs a median over at least this many intervals to be judged.
MIN_INTERVALS = 3


def _number(point: JSONView, key: str) -> float | None:
    value = point.get(key)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def series_disturbances(
    series: Mapping[str, Sequence[JSONView]], bounds: Guard, *, started: datetime
) -> list[Disturbance]:
    """Stalls, error and reconnect bursts in each client's series (`client name → points`).

    A stall is a run of intervals whose QPS is below `stall_fraction` of that client's median
    QPS in the step; `started` is when the measured part began (the points' t counts from it).
    """
    out: list[Disturbance] = []
    for client, points in sorted(series.items()):
        qps = [(p, _number(p, "qps")) for p in points]
        known = [q for _, q in qps if q is not None]
        median = statistics.median(known) if len(known) >= MIN_INTERVALS else None
        low: list[tuple[float, float]] = []
        first_error: tuple[float, float, float] | None = None
        first_reconnect: tuple[float, float] | None = None
        for point, q in qps:
            t = _number(point, "t") or 0.0
            stalled = median and q is not None and q < bounds.stall_fraction * median
            if stalled and q is not None:
                low.append((t, q))
            errors = _number(point, "errorsPerSec") or 0.0
            tps = _number(point, "tps") or 0.0
            if first_error is None and errors > 0 and errors > bounds.max_error_percent / 100 * tps:
                first_error = (t, errors, tps)
            reconnects = _number(point, "reconnectsPerSec") or 0.0
            if first_reconnect is None and reconnects > bounds.max_reconnects_per_sec:
                first_reconnect = (t, reconnects)
        if low and median:
            worst = min(q for _, q in low)
            ts = ", ".join(f"{t:g}s" for t, _ in low[:8]) + (" …" if len(low) > 8 else "")
            out.append(
                Disturbance(
                    at=started + timedelta(seconds=low[0][0]),
                    source="sysbench",
                    what="Stall",
                    object=client,
                    message=f"{len(low)} interval(s) below {bounds.stall_fraction:g} × the "
                    f"step's median {median:,.0f} QPS (at {ts}; lowest {worst:,.0f} QPS)",
                )
            )
        if first_error is not None:
            t, errors, tps = first_error
            out.append(
                Disturbance(
                    at=started + timedelta(seconds=t),
                    source="sysbench",
                    what="Errors",
                    object=client,
                    message=f"{errors:,.2f} errors/s at {t:g}s against {tps:,.2f} tps (bound "
                    f"{bounds.max_error_percent:g}%)",
                )
            )
        if first_reconnect is not None:
            t, reconnects = first_reconnect
            out.append(
                Disturbance(
                    at=started + timedelta(seconds=t),
                    source="sysbench",
                    what="Reconnects",
                    object=client,
                    message=f"{reconnects:,.2f} reconnects/s at {t:g}s (bound "
                    f"{bounds.max_reconnects_per_sec:g})",
                )
            )
    return out


# ---------------------------------------------------------------------------
# Keeping them


_MORE = " (and more, not kept)"


def merged(
    kept: Sequence[Disturbance], new: Sequence[Disturbance]
) -> tuple[list[Disturbance], list[Disturbance]]:
    """`kept` plus the new disturbances not yet recorded (by key), and which those were.

    At most MAX_DISTURBANCES are kept; the rest are counted in the last one's message. One
    already kept whose new look says more (its message extended, e.g. a rollout's pods seen
    at a later look than its status) takes the longer message; it is not new.
    """
    seen = {d.key() for d in kept}
    out = list(kept)
    added = []
    for d in new:
        if d.key() in seen:
            for i, k in enumerate(out):
                if (
                    k.key() == d.key()
                    and d.message.startswith(k.message)
                    and d.message != k.message
                ):
                    out[i] = k.model_copy(update={"message": d.message})
            continue
        seen.add(d.key())
        added.append(d)
        if len(out) < MAX_DISTURBANCES:
            out.append(d)
        else:
            last = out[-1]
            if not last.message.endswith(_MORE):
                out[-1] = last.model_copy(update={"message": last.message + _MORE})
    return out, added


def summary(disturbances: Sequence[Disturbance], limit: int = 3) -> str:
    """`PodOnBenchNode basic-tikv-3: …; Stall client 0: … (+2 more)`."""
    text = "; ".join(d.text() for d in disturbances[:limit])
    if len(disturbances) > limit:
        text += f" (+{len(disturbances) - limit} more)"
    return text
