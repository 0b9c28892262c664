"""The one-run-per-cluster queue: who measures a cluster now, who is next, who waits for whom.

Concurrent runs on one cluster falsify each other, so the runs on one cluster (the queue
key: the cluster's namespace/name whatever its kind, or host:port for an explicit target)
form a queue (keyed by the spec a run was admitted with once it left Pending:
domain/trust/frozen.py):

- the *holder* is the run measuring the cluster: a run in Preflight, Preparing or Running
  (also while it is being deleted: its pods may still run), or a run just admitted whose
  new phase the watch stream has not brought back yet (a *claim*), or a deleted holder
  whose pods are not gone yet (a *ghost*);
- the waiting runs are the Pending ones not being deleted, oldest first: by
  creationTimestamp (one-second resolution), then namespace, then name;
  (a restarted controller finds the ghosts again from the pods left behind: `ghosts_left`);
- the first waiting run starts once there is no holder; every other one waits for the run
  just ahead of it (the first one for the holder). That name is the run's `waitingFor` and
  it changes only when the run ahead goes away, so a queue of N runs costs no status
  writes while it moves: only the run that starts is woken.

Pure: the controller keeps the entries in memory from the watch stream (handlers.py) and
asks `turn` and `to_wake`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from tidb_bench_operator.domain.api.common import ACTIVE_PHASES, RunPhase
from tidb_bench_operator.domain.api.resources import parse_run_spec
from tidb_bench_operator.domain.manifests import (
    ANNOTATION_HOLDS,
    RUNNER_GRACE_SECONDS,
    compute_endpoint,
)
from tidb_bench_operator.domain.status import parse_time
from tidb_bench_operator.domain.trust.frozen import governing_spec
from tidb_bench_operator.errors import SpecError


@dataclass(frozen=True, order=True)
class QueueEntry:
    """What the queue needs of one run, taken from its watched body (ordered oldest first)."""

    created: str
    namespace: str
    name: str
    uid: str
    phase: str
    deleting: bool = False
    waiting_for: str | None = None

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def holds(self) -> bool:
        """Measuring (or about to): the cluster is busy while it exists."""
        return self.phase in ACTIVE_PHASES

    @property
    def waits(self) -> bool:
        return self.phase == RunPhase.PENDING and not self.deleting


@dataclass(frozen=True)
class Turn:
    """A Pending run's place: `ahead` is None when it may start, else the run it waits for."""

    ahead: str | None = None

    @property
    def admitted(self) -> bool:
        return self.ahead is None


#: A run that may start now.
ADMITTED = Turn()


def queue_key(spec: Any, namespace: str) -> str:
    """What 'the same cluster' means for the one-run-at-a-time rule.

    `spec` is a parsed BenchmarkRunSpec. A run naming a cluster (and no explicit host) is
    keyed by the cluster's namespace/name, whatever kind of cluster object it is; a run with
    an explicit target by its host and port.
    """
    ep = compute_endpoint(spec, namespace)
    if ep.cluster_name is not None and (spec.target is None or spec.target.host is None):
        return f"cluster/{ep.cluster_namespace}/{ep.cluster_name}"
    return f"endpoint/{ep.host}:{ep.port}"


def queue_entry(body: Mapping[str, Any]) -> tuple[str, QueueEntry] | None:
    """(queue key, entry) of a watched run; None when its spec is invalid (it will fail)."""
    meta = body.get("metadata") or {}
    status = body.get("status") or {}
    try:
        # Once admitted, the admitted spec: an edit of .spec cannot move a run's place.
        spec = parse_run_spec(governing_spec(body))
    except (SpecError, ValueError):
        return None
    entry = QueueEntry(
        created=str(meta.get("creationTimestamp") or ""),
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        phase=str(status.get("phase") or RunPhase.PENDING),
        deleting=bool(meta.get("deletionTimestamp")),
        waiting_for=status.get("waitingFor"),
    )
    return queue_key(spec, entry.namespace), entry


def holder(
    entries: Iterable[QueueEntry], claimed: str | None = None, ghost: str | None = None
) -> str | None:
    """The run measuring the cluster (namespace/name), or None when it is free.

    `claimed` is the uid of a run admitted by this controller whose new phase has not come
    back yet; it holds unless its entry is gone or says it finished. `ghost` names a deleted
    holder whose pods are not gone yet.
    """
    for e in sorted(entries):
        if e.holds or (e.uid == claimed and e.phase == RunPhase.PENDING):
            return e.ref
    return ghost


def waiting(entries: Iterable[QueueEntry]) -> list[QueueEntry]:
    """The waiting runs, oldest first."""
    return sorted(e for e in entries if e.waits)


def turn(
    entries: Iterable[QueueEntry], uid: str, claimed: str | None = None, ghost: str | None = None
) -> Turn:
    """The place of run `uid` (Pending) in its cluster's queue."""
    entries = list(entries)
    busy = holder(entries, claimed, ghost)
    mine = next((e for e in entries if e.uid == uid), None)
    if mine is not None and claimed == uid:
        return ADMITTED
    ahead = busy
    for e in waiting(entries):
        if e.uid == uid:
            return Turn(ahead)
        ahead = e.ref
    # Not (yet) in the entries: behind everyone.
    return Turn(ahead)


def to_wake(
    entries: Iterable[QueueEntry], claimed: str | None = None, ghost: str | None = None
) -> list[QueueEntry]:
    """The waiting runs that must be looked at: the first one when the cluster is free, and
    every one whose run ahead is no longer the one its status names."""
    entries = list(entries)
    ahead = holder(entries, claimed, ghost)
    wake = []
    for e in waiting(entries):
        if e.uid == claimed:
            continue
        if ahead is None or e.waiting_for != ahead:
            wake.append(e)
        ahead = e.ref
    return wake


def expires_at(body: Mapping[str, Any]) -> datetime | None:
    """When a finished run's Jobs are due for deletion (ttlSecondsAfterFinished), or None."""
    ttl = governing_spec(body).get("ttlSecondsAfterFinished")
    finished = parse_time((body.get("status") or {}).get("finishedAt"))
    if ttl is None or finished is None:
        return None
    return finished + timedelta(seconds=int(ttl))


#: After a deleted holder's last pod should have stopped (its step's known end, or its
#: deletion, plus the pods' grace period), how long the ghost still waits for the pod list
#: to agree: the garbage collector deletes Jobs, then pods, a few seconds apart.
GHOST_SLACK_SECONDS = 30


def ghost_release_at(body: Mapping[str, Any], deleted_at: datetime) -> datetime:
    """When a deleted holder stops holding its cluster, even if its pods are still listed.

    Its pods are deleted with it and stop within their grace period; a pod the API still
    lists after that sits on a node that does not answer (stuck Terminating), and its
    sysbench stops by itself at the step's end (`--time`). So the bound is the later of the
    deletion and the running step's known end (its start, warm-up and duration), plus the
    pods' grace period and GHOST_SLACK_SECONDS. Without a readable spec or step: the
    deletion plus the same margins.
    """
    end = deleted_at
    try:
        spec = parse_run_spec(governing_spec(body))
    except (SpecError, ValueError):
        spec = None
    if spec is not None:
        for step in (body.get("status") or {}).get("steps") or []:
            started = parse_time(step.get("startedAt")) if isinstance(step, Mapping) else None
            if started is not None and step.get("phase") == "Running":
                known = started + timedelta(seconds=spec.warmup_seconds + spec.duration_seconds)
                end = max(end, known)
    return end + timedelta(seconds=RUNNER_GRACE_SECONDS + GHOST_SLACK_SECONDS)


def pod_stopped(pod: Mapping[str, Any]) -> bool:
    """Whether a pod's containers have ended (Succeeded or Failed): it loads nothing more."""
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


@dataclass(frozen=True)
class LeftBehind:
    """A deleted run whose pods still hold its cluster, found from the pods alone."""

    ref: str  #: namespace/name of the deleted run
    until: datetime  #: when it stops holding the cluster even if its pods are still listed


def _holds(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_HOLDS)
    if not isinstance(text, str) or len(text) > 2048:
        return None
    try:
        found = json.loads(text)
    except ValueError:
        return None
    ok = isinstance(found, dict) and all(isinstance(found.get(k), str) for k in ("run", "uid"))
    return found if ok and isinstance(found.get("queue"), str) else None


def ghosts_left(
    pods: Iterable[Mapping[str, Any]], live_uids: set[str], now: datetime
) -> dict[str, LeftBehind]:
    """The clusters that pods of deleted runs still hold, by queue key: what a restarted
    controller knows of the ghosts it had in memory (the runs themselves are gone).

    A pod counts while it has not stopped and its ANNOTATION_HOLDS names a run whose uid is
    not in `live_uids`. Its bound is ghost_release_at's from what the pod says: the later of
    its deletion (its deletionTimestamp; `now` if it has none yet) and, for a step's pod,
    its start (its startTime, else its creation) plus its step's seconds, plus the pods'
    grace period and GHOST_SLACK_SECONDS. A cluster keeps the latest bound of its pods; a
    bound already passed holds nothing.
    """
    found: dict[str, LeftBehind] = {}
    for pod in pods:
        holds = _holds(pod)
        if holds is None or pod_stopped(pod) or holds["uid"] in live_uids:
            continue
        meta = pod.get("metadata") or {}
        end = parse_time(meta.get("deletionTimestamp")) or now
        seconds = holds.get("stepSeconds")
        started = parse_time((pod.get("status") or {}).get("startTime")) or parse_time(
            meta.get("creationTimestamp")
        )
        if isinstance(seconds, int) and 0 < seconds <= 2**31 and started is not None:
            end = max(end, started + timedelta(seconds=seconds))
        until = end + timedelta(seconds=RUNNER_GRACE_SECONDS + GHOST_SLACK_SECONDS)
        qkey = holds["queue"]
        if until > now and (qkey not in found or found[qkey].until < until):
            found[qkey] = LeftBehind(holds["run"], until)
    return found
