"""When each BenchmarkRun and BenchmarkSchedule is looked at: one scheduler for all of them.

The watch stream (handlers.py) hands every event to the Driver. The Driver keeps the newest
body of each object and a deadline per object, and runs the reconcilers in a small thread
pool when a deadline comes:

- a run is looked at again when its reconciler's hint says (`Outcome.requeue_seconds`; 1 s
  when it gives none), at once when its spec changes, and never while it waits in its
  cluster's queue (`Outcome.parked`): the queue (domain/queue.py), read from kopf's
  in-memory index of all runs, wakes the first waiting run when the cluster becomes free
  and a waiting run whose run ahead went away. A waiting run therefore costs no API call;
- a finished run is looked at once, when `ttlSecondsAfterFinished` expires (it deletes its
  Jobs then), not on a tick;
- a run that holds its cluster and is deleted leaves a *ghost* that keeps the cluster busy
  until the run's pods are gone (one pod list per second, only for that run), or at the
  latest until its step's known end plus the pods' grace period (queue.ghost_release_at): a
  pod stuck Terminating on a node that does not answer holds the cluster no longer. A
  restarted controller finds its ghosts again from the runner pods of runs that no longer
  exist (controller/ghosts.py) before it admits any run;
- a schedule is looked at when it is created or its spec changes, when one of its runs
  appears, finishes or goes, at its next fire time, and at the latest every
  SCHEDULE_RESYNC_SECONDS (a safety net: an idle schedule costs one list call per resync).

There is no per-object task and no kopf timer or daemon, so kopf puts no finalizer on the
objects: deleting a run is not held up by anything the controller does.

All methods run on the event loop; only the reconcilers and the status patches run in the
pool, so the in-memory state needs no lock. A look holds one of WORKERS slots only while it
is quick: a slow one (a dependency that does not answer) goes on beside them
(controller/lanes.py), so it never delays the other objects' looks.

Why over 500 lines: the scheduler is one piece of in-memory state (bodies, deadlines, claims,
ghosts) that only the event loop touches; the parts that need none of it live beside it
(lanes.py, ghosts.py), and splitting the rest would hand that state across modules.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from tidb_bench_operator.controller.experiments import ExperimentLooks, ExperimentsReconciler
from tidb_bench_operator.controller.ghosts import (
    NO_GHOST_SEARCH,
    Ghost,
    GhostKube,
    left_behind,
    warn_released,
)
from tidb_bench_operator.controller.lanes import SLOW_LOOKS, Lanes
from tidb_bench_operator.domain import queue
from tidb_bench_operator.domain.api.common import ACTIVE_PHASES, RunPhase, is_terminal
from tidb_bench_operator.domain.jobs import run_selector
from tidb_bench_operator.domain.manifests import LABEL_SCHEDULE, RunRef, label_value
from tidb_bench_operator.domain.objects import JSON, newer_version
from tidb_bench_operator.domain.queue import QueueEntry, Turn
from tidb_bench_operator.domain.status import steps_json_patch, utc_now
from tidb_bench_operator.errors import KubeError, KubeForbidden
from tidb_bench_operator.reconcile.experiment.hold import Hold
from tidb_bench_operator.reconcile.run import Outcome
from tidb_bench_operator.reconcile.schedule.reconciler import ScheduleOutcome

log = logging.getLogger("tidb_bench_operator.controller.driver")

#: An active run whose reconciler gave no hint is looked at again after this long.
DEFAULT_LOOK_SECONDS = 1.0
#: An idle schedule is looked at at least this often (it is woken by its runs otherwise).
SCHEDULE_RESYNC_SECONDS = 300.0
#: How often a deleted holder's pods are listed until they are gone.
GHOST_CHECK_SECONDS = 1.0
#: Retry delays after a failed look (API server unreachable, a conflict...): doubling.
BACKOFF_FIRST, BACKOFF_MAX = 1.0, 30.0
#: Looks at the same time that hold a slot (controller/lanes.py: slow looks go beside them).
WORKERS = 4

Kind = Literal["run", "schedule", "ghost", "experiment"]
Key = tuple[Kind, str, str]
#: kopf's index of all runs by queue key (handlers.run_queue), read-only here.
QueueIndex = Mapping[str, Iterable[QueueEntry]]


class RunsReconciler(Protocol):
    def reconcile(self, body: JSON, turn: Turn = ...) -> Outcome: ...

    def settled(self, body: JSON, status: JSON) -> JSON:
        """A successful look's status patch, with ReconcileFailing cleared if it was set."""
        ...

    def failed(self, body: JSON, exc: Exception) -> float:
        """A failed look counted, shown on the run (and failing it at the bound); back-off."""
        ...

    def forget(self, uid: str) -> None:
        """A deleted run's failures no longer count."""
        ...

    def health(self) -> dict[str, str]:
        """Runs whose looks have kept failing (for /healthz), with their last error."""
        ...


class SchedulesReconciler(Protocol):
    def reconcile(self, body: JSON) -> ScheduleOutcome: ...


class DriverKube(GhostKube, Protocol):
    """What the Driver itself does with the API server (adapters.k8s.Kube has it)."""

    def patch_benchmark_run_status(self, namespace: str, name: str, status: JSON) -> JSON:
        """Merge-patch a run's status; returns the stored object."""
        ...

    def json_patch_benchmark_run_status(self, namespace: str, name: str, ops: list[JSON]) -> JSON:
        """JSON-patch (RFC 6902) a run's status; returns the stored object."""
        ...

    def patch_benchmark_schedule_status(self, namespace: str, name: str, status: JSON) -> JSON:
        """Merge-patch a schedule's status; returns the stored object."""
        ...


def _meta(body: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (body or {}).get("metadata") or {}


def _spec_changed(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """New to us, or its spec changed (metadata.generation moves with the spec only)."""
    return old is None or _meta(old).get("generation") != _meta(new).get("generation")


def _phase(body: Mapping[str, Any] | None) -> str | None:
    return None if body is None else (body.get("status") or {}).get("phase")


def _key(kind: Kind, body: Mapping[str, Any]) -> Key:
    meta = body["metadata"]
    return (kind, str(meta["namespace"]), str(meta["name"]))


@dataclass
class Driver(ExperimentLooks):
    """Schedules every look at runs and schedules; see the module docstring."""

    runs: RunsReconciler
    schedules: SchedulesReconciler
    kube: DriverKube
    workers: int = WORKERS
    #: The namespaces watched (`--namespace`, kopf's patterns); None: the whole cluster.
    namespaces: Sequence[str] | None = None
    slow_looks: int = SLOW_LOOKS
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], datetime] = utc_now
    index: QueueIndex = field(default_factory=dict)
    bodies: dict[Key, JSON] = field(default_factory=dict)
    #: queue key -> uid of the run admitted here whose new phase has not come back yet.
    claims: dict[str, str] = field(default_factory=dict)
    ghosts: dict[str, Ghost] = field(default_factory=dict)
    #: Finished runs whose ttlSecondsAfterFinished was acted on (by this process).
    expired: set[Key] = field(default_factory=set)
    experiments: ExperimentsReconciler | None = None
    #: queue key -> the experiment changing that cluster: only its own runs are admitted.
    holds: dict[str, Hold] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._due: dict[Key, float] = {}
        self._heap: list[tuple[float, int, Key]] = []
        self._seq = 0
        self._busy: set[Key] = set()
        self._again: set[Key] = set()
        self._failures: dict[Key, int] = {}
        self._seen_phase: dict[Key, str | None] = {}
        self._changed: asyncio.Event | None = None
        #: Until the ghosts left by a previous controller are found (run()), nobody is admitted:
        #: the runs looked at meanwhile are looked at again then.
        self.recovering = False
        self._deferred: set[Key] = set()
        self._lanes: Lanes[Key] = Lanes(self.workers, self.slow_looks, clock=self.clock)
        # A thread per slot, and one per slow look that gave its slot back.
        self._pool = ThreadPoolExecutor(
            max_workers=self._lanes.threads, thread_name_prefix="reconcile"
        )

    # ------------------------------------------------------------------ the watch stream
    def health(self) -> dict[str, str]:
        """Runs whose looks have failed for long (RunReconciler.health) or are stuck in a
        look past LOOK_DEADLINE_SECONDS, for /healthz."""
        failing = dict(self.runs.health())
        for (kind, ns, name), age in self._lanes.stuck().items():
            failing[f"{ns}/{name}"] = f"its {kind} look has not ended after {age:.0f} s"
        return failing

    def run_event(self, type_: str | None, body: JSON, index: QueueIndex) -> None:
        """A BenchmarkRun event (kopf has updated `index` with it already)."""
        self.index = index
        key = _key("run", body)
        old = self.bodies.get(key)
        old_entry = queue.queue_entry(old) if old is not None else None
        if type_ == "DELETED":
            self._forget(key)
            self.runs.forget(str(_meta(body).get("uid")))
            if old is not None and old_entry is not None:
                qkey, entry = old_entry
                claimed = self.claims.get(qkey) == entry.uid
                if claimed:
                    del self.claims[qkey]
                if entry.holds or claimed:  # it may have created Jobs already
                    until = queue.ghost_release_at(old, self.wall())
                    self.ghosts[qkey] = Ghost(entry.namespace, entry.name, until)
                    self.schedule(("ghost", qkey, ""), 0.0)
                self.wake_cluster(qkey)
            self._wake_schedule_of(body)
            self._wake_experiment_of(body)
            return
        if newer_version(old, body):
            self.bodies[key] = body
        if _spec_changed(old, body) or (
            _meta(body).get("deletionTimestamp") and not _meta(old).get("deletionTimestamp")
        ):
            self.schedule(key, 0.0)
        # The phase as the watch stream showed it last (our own patches update `bodies`
        # first, so they cannot tell whether the schedule has seen this phase yet).
        seen = self._seen_phase.get(key, "")
        self._seen_phase[key] = _phase(body)
        if seen != _phase(body):
            self._wake_schedule_of(body)
            self._wake_experiment_of(body)
        found = queue.queue_entry(body)
        if old_entry is not None and (found is None or found[0] != old_entry[0]):
            self.wake_cluster(old_entry[0])
        if found is not None:
            self.wake_cluster(found[0])

    def schedule_event(self, type_: str | None, body: JSON) -> None:
        """A BenchmarkSchedule event."""
        key = _key("schedule", body)
        old = self.bodies.get(key)
        if type_ == "DELETED":
            self._forget(key)
            return
        if newer_version(old, body):
            self.bodies[key] = body
        if _spec_changed(old, body):
            self.schedule(key, 0.0)

    def _forget(self, key: Key) -> None:
        self.bodies.pop(key, None)
        self._seen_phase.pop(key, None)
        self._due.pop(key, None)
        self.expired.discard(key)
        self._failures.pop(key, None)
        self._lanes.forget(key)

    def _wake_schedule_of(self, run: JSON) -> None:
        meta = run.get("metadata") or {}
        label = (meta.get("labels") or {}).get(LABEL_SCHEDULE)
        if not label:
            return
        ns = meta.get("namespace")
        for kind, sns, name in list(self.bodies):
            if kind == "schedule" and sns == ns and label_value(name) == label:
                self.schedule((kind, sns, name), 0.0)

    # ------------------------------------------------------------------ the queue
    def _claimed(self, qkey: str, entries: list[QueueEntry]) -> str | None:
        """The claim on `qkey`, dropped once the watch stream shows where its run went."""
        uid = self.claims.get(qkey)
        if uid is None:
            return None
        mine = next((e for e in entries if e.uid == uid), None)
        if mine is None:
            # An edit of its spec moves a just-admitted run's Pending entry to another key
            # until its new phase comes back with the spec it was admitted with
            # (domain/trust/frozen.py): the claim holds while the run is Pending anywhere.
            everyone = (e for listed in self.index.values() for e in listed)
            mine = next((e for e in everyone if e.uid == uid), None)
        if mine is None or mine.phase != RunPhase.PENDING:
            del self.claims[qkey]
            return None
        return uid

    def _entries(self, qkey: str) -> list[QueueEntry]:
        return list(self.index.get(qkey) or ())

    def _outside(self, qkey: str, entries: list[QueueEntry], claimed: str | None) -> str | None:
        """A holder of `qkey` not among its entries: a ghost, or the claimed run an edit moved."""
        ghost = self.ghosts.get(qkey)
        if ghost is not None:
            return ghost.ref
        if claimed is None or any(e.uid == claimed for e in entries):
            return None
        everyone = (e for listed in self.index.values() for e in listed)
        return next((e.ref for e in everyone if e.uid == claimed), None)

    def turn(self, qkey: str, uid: str) -> Turn:
        entries = self._entries(qkey)
        hold = self.holds.get(qkey)
        if hold is not None:
            # An experiment changes the cluster: its runs queue among themselves, the
            # others wait until it has put the cluster back.
            mine = next((e for e in entries if e.uid == uid), None)
            if mine is None or mine.ref not in hold.runs:
                return Turn(hold.waiting_text)
            entries = [e for e in entries if e.ref in hold.runs]
        claimed = self._claimed(qkey, entries)
        return queue.turn(entries, uid, claimed, self._outside(qkey, entries, claimed))

    def wake_cluster(self, qkey: str, *, everyone: bool = False) -> None:
        """Look at the waiting runs of `qkey` whose place changed (domain.queue.to_wake);
        `everyone`: every waiting run (an experiment's hold began or ended)."""
        entries = self._entries(qkey)
        if everyone:
            for e in entries:
                key: Key = ("run", e.namespace, e.name)
                if e.waits and key in self.bodies and key not in self.expired:
                    self.schedule(key, 0.0)
        hold = self.holds.get(qkey)
        if hold is not None:
            entries = [e for e in entries if e.ref in hold.runs]
        claimed = self._claimed(qkey, entries)
        for e in queue.to_wake(entries, claimed, self._outside(qkey, entries, claimed)):
            run: Key = ("run", e.namespace, e.name)
            if run in self.bodies and run not in self.expired:
                self.schedule(run, 0.0)

    # ------------------------------------------------------------------ deadlines
    def schedule(self, key: Key, delay: float) -> None:
        """Look at `key` in `delay` seconds (an earlier deadline already set wins)."""
        when = self.clock() + max(0.0, delay)
        if key in self._busy:
            if delay <= 0:
                self._again.add(key)
            else:
                self._due[key] = min(when, self._due.get(key, when))
            return
        current = self._due.get(key)
        if current is not None and current <= when:
            return
        self._due[key] = when
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, key))
        if self._changed is not None:
            self._changed.set()

    def due_keys(self) -> list[Key]:
        """Pop the keys whose deadline has come."""
        now, out = self.clock(), []
        while self._heap and self._heap[0][0] <= now:
            when, _, key = heapq.heappop(self._heap)
            if self._due.get(key) == when:
                del self._due[key]
                out.append(key)
        return out

    def _next_deadline(self) -> float | None:
        while self._heap and self._due.get(self._heap[0][2]) != self._heap[0][0]:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    async def run(self) -> None:
        """The scheduling loop (runs until cancelled)."""
        self._changed = asyncio.Event()
        tasks: set[asyncio.Task[None]] = set()
        self.recovering = True
        tasks.add(asyncio.create_task(self._recover()))
        try:
            while True:
                for key in self.due_keys():
                    self._busy.add(key)
                    task = asyncio.create_task(self._guarded(key))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                deadline = self._next_deadline()
                self._changed.clear()
                timeout = None if deadline is None else max(0.0, deadline - self.clock())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), timeout)
        finally:
            for task in tasks:
                task.cancel()
            self._pool.shutdown(wait=False, cancel_futures=True)

    async def recover(self) -> None:
        """Take up the ghosts a previous controller held in memory, from the pods they left
        (controller/ghosts.py); then runs may be admitted."""
        found: dict[str, Ghost] = await self._call(
            left_behind, self.kube, self.wall(), self.namespaces
        )
        for qkey, ghost in found.items():
            known = self.ghosts.get(qkey)
            if known is None or known.until < ghost.until:
                self.ghosts[qkey] = ghost
            self.schedule(("ghost", qkey, ""), 0.0)
        self._recovered()

    def _recovered(self) -> None:
        self.recovering = False
        for deferred in self._deferred:
            self.schedule(deferred, 0.0)
        self._deferred.clear()

    async def _recover(self) -> None:
        for failures in itertools.count():
            try:
                return await self.recover()
            except KubeForbidden as exc:
                # Admitting nobody ever would be worse than a ghost missed: say what to grant.
                log.error(NO_GHOST_SEARCH, exc)
                return self._recovered()
            except Exception as exc:
                delay = min(BACKOFF_MAX, BACKOFF_FIRST * 2**failures)
                log.error("finding the pods of deleted runs: %s; trying again in %.0f s; "
                          "no run is admitted meanwhile", exc, delay)  # fmt: skip
                await asyncio.sleep(delay)

    async def _guarded(self, key: Key) -> None:
        try:
            delay = await self._lanes.run(key, lambda: self.look(key))
            self._failures.pop(key, None)
        except Exception as exc:
            n = self._failures.get(key, 0) + 1
            self._failures[key] = n
            delay = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (n - 1))
            log.error("%s %s/%s: %s; trying again in %.0f s", *key, exc, delay)
        finally:
            self._busy.discard(key)
        if key in self._again:
            self._again.discard(key)
            delay = 0.0
        if delay is not None and (key[0] == "ghost" or key in self.bodies):
            self.schedule(key, delay)

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    # ------------------------------------------------------------------ looks
    async def look(self, key: Key) -> float | None:
        """Look at one object; returns when to look again (None: not by time)."""
        if key[0] == "ghost":
            return await self._look_ghost(key[1])
        if key[0] == "schedule":
            return await self._look_schedule(key)
        if key[0] == "experiment":
            return await self._look_experiment(key)
        return await self._look_run(key)

    async def _look_run(self, key: Key) -> float | None:
        body = self.bodies.get(key)
        if body is None or key in self.expired:
            return None
        phase = _phase(body)
        if is_terminal(phase):
            expires = queue.expires_at(body)
            if expires is None:
                return None
            left = (expires - self.wall()).total_seconds()
            if left > 0:
                return left
            await self._call(self.runs.reconcile, body)  # finish.expire deletes the Jobs
            self.expired.add(key)
            return None
        if (body.get("metadata") or {}).get("deletionTimestamp"):
            return None  # going away: its Jobs go with it, the queue keeps its place
        turn, qkey = queue.ADMITTED, None
        found = queue.queue_entry(body)
        if found is not None and phase in (None, RunPhase.PENDING):
            if self.recovering:  # a deleted run's pods may still hold its cluster
                self._deferred.add(key)
                return None
            qkey, entry = found
            turn = self.turn(qkey, entry.uid)
            status = body.get("status") or {}
            if not turn.admitted and phase and status.get("waitingFor") == turn.ahead:
                return None  # waiting, and its status says so already: nothing to do
            if turn.admitted:
                self.claims[qkey] = entry.uid
        try:
            out: Outcome = await self._call(self.runs.reconcile, body, turn)
            status = self.runs.settled(body, out.status)
            stored = body
            if status:
                ns, name = key[1], key[2]
                # Only the steps that changed, not the whole list (steps_json_patch).
                ops = steps_json_patch(body.get("status") or {}, status)
                patch, sent = (
                    (self.kube.patch_benchmark_run_status, status)
                    if ops is None
                    else (self.kube.json_patch_benchmark_run_status, ops)
                )
                try:
                    stored = await self._call(patch, ns, name, sent)
                except KubeError:
                    if key not in self.bodies:
                        return None  # deleted meanwhile
                    raise
                if newer_version(self.bodies.get(key), stored):
                    self.bodies[key] = stored
        except Exception as exc:
            if key not in self.bodies:
                return None  # deleted meanwhile
            # Any failure (API errors, timeouts, a bug) is counted and shown on the run,
            # which fails at the bound; the run is looked at again after a back-off.
            return float(await self._call(self.runs.failed, body, exc))
        after = out.status.get("phase", phase) if out.status else phase
        if after != phase:
            log.info("BenchmarkRun %s/%s: %s -> %s", key[1], key[2], phase or "new", after)
        if qkey is not None and turn.admitted and after not in ACTIVE_PHASES:
            self.claims.pop(qkey, None)  # it did not start (bad inputs): the next one may
            self.wake_cluster(qkey)
        if is_terminal(after):
            expires = queue.expires_at(stored)
            return None if expires is None else max(0.0, (expires - self.wall()).total_seconds())
        if out.parked:
            return None
        return out.requeue_seconds if out.requeue_seconds is not None else DEFAULT_LOOK_SECONDS

    async def _look_schedule(self, key: Key) -> float | None:
        body = self.bodies.get(key)
        if body is None:
            return None
        out: ScheduleOutcome = await self._call(self.schedules.reconcile, body)
        if out.status:
            stored = await self._call(
                self.kube.patch_benchmark_schedule_status, key[1], key[2], out.status
            )
            if newer_version(self.bodies.get(key), stored):
                self.bodies[key] = stored
        wait = SCHEDULE_RESYNC_SECONDS
        if out.next_time is not None:
            wait = min(wait, max(0.5, (out.next_time - self.wall()).total_seconds()))
        return wait

    async def _look_ghost(self, qkey: str) -> float | None:
        ghost = self.ghosts.get(qkey)
        if ghost is None:
            return None
        pods = await self._call(
            self.kube.pods, ghost.namespace, run_selector(RunRef(ghost.name, ghost.namespace, ""))
        )
        alive = [p for p in pods if not queue.pod_stopped(p)]
        if alive and self.wall() < ghost.until:
            return GHOST_CHECK_SECONDS
        if alive:
            warn_released(ghost, qkey, alive)
        del self.ghosts[qkey]
        self.wake_cluster(qkey)
        return None
