"""Server usage from the Kubernetes resource metrics API (metrics-server), sampled during a step.

The API keeps no history: each answer is every pod's (and node's) usage over metrics-server's
last scrape window (15 s by default). So the controller samples while a step runs
(`sample`), keeps the samples in memory (per pod, the last 10 minutes, bounded), and a
step's reading averages those inside its window; with none, it takes one at the step's end
and says so (docs/resources.md#sources).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from tidb_bench_operator.domain.objects import JSON
from tidb_bench_operator.domain.resources.quantity import parse_quantity
from tidb_bench_operator.domain.resources.usage import NodeUsage, PodKey, PodUsage, UsageReading
from tidb_bench_operator.errors import KubeError, KubeForbidden

SOURCE = "metrics-server"
#: How long samples are kept: longer than any step's window the controller reads at once.
KEEP = timedelta(minutes=10)
#: Samples kept per pod or node (one a second for KEEP).
MAX_SAMPLES = 600
#: Pods and nodes tracked at once; the least recently sampled go first beyond it.
MAX_TRACKED = 2_000
#: Items read from one answer.
MAX_ITEMS = 50_000

NOT_SERVED = (
    "the resource metrics API (metrics.k8s.io) is not served: install metrics-server, or name "
    "a Prometheus in spec.metrics"
)
FORBIDDEN = (
    "the resource metrics API (metrics.k8s.io) refused the controller (HTTP 403): grant its "
    "ServiceAccount get and list on pods and nodes of metrics.k8s.io, or name a Prometheus in "
    "spec.metrics"
)


class MetricsAPI(Protocol):
    """The one Kubernetes read this source needs (adapters.k8s.Kube.metrics_api)."""

    def metrics_api(self, path: str) -> JSON | None:
        """GET /apis/metrics.k8s.io/v1beta1/<path>: the answer, None when not served (404);
        KubeForbidden on 403, KubeError on any other failure."""
        ...


@dataclass(frozen=True)
class _Sample:
    """One measurement: when metrics-server took it, cores and working-set bytes."""

    at: datetime
    cpu: float | None
    memory: float | None


def _now() -> datetime:
    return datetime.now(UTC)


def _timestamp(value: object, default: datetime) -> datetime:
    """An item's RFC 3339 `timestamp` (timezone-aware), else `default`."""
    if isinstance(value, str) and len(value) <= 64:
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return default
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return default


def _usage(usages: Iterable[object]) -> tuple[float | None, float | None]:
    """(cores, bytes) summed over `usages` (each {cpu, memory}); None where any is unreadable."""
    cpu: float | None = 0.0
    memory: float | None = 0.0
    for usage in usages:
        found = usage if isinstance(usage, dict) else {}
        c, m = parse_quantity(found.get("cpu")), parse_quantity(found.get("memory"))
        cpu = None if cpu is None or c is None else cpu + c
        memory = None if memory is None or m is None else memory + m
    return cpu, memory


def _items(doc: JSON) -> Iterator[tuple[JSON, JSON]]:
    """(metadata, item) of each well-formed item of a metrics list, at most MAX_ITEMS."""
    items = doc.get("items")
    for item in items[:MAX_ITEMS] if isinstance(items, list) else ():
        meta = item.get("metadata") if isinstance(item, dict) else None
        if isinstance(meta, dict) and isinstance(meta.get("name"), str):
            yield meta, item


def parse_pod_metrics(doc: JSON, at: datetime) -> dict[PodKey, _Sample]:
    """A PodMetricsList as one sample per pod (its containers summed)."""
    found: dict[PodKey, _Sample] = {}
    for meta, item in _items(doc):
        containers = item.get("containers")
        if isinstance(containers, list) and containers and isinstance(meta.get("namespace"), str):
            usages = (c.get("usage") if isinstance(c, dict) else None for c in containers)
            cpu, memory = _usage(usages)
            stamp = _timestamp(item.get("timestamp"), at)
            found[PodKey(meta["namespace"], meta["name"])] = _Sample(stamp, cpu, memory)
    return found


def parse_node_metrics(doc: JSON, at: datetime) -> dict[str, _Sample]:
    """A NodeMetricsList as one sample per node."""
    found: dict[str, _Sample] = {}
    for meta, item in _items(doc):
        cpu, memory = _usage([item.get("usage")])
        found[meta["name"]] = _Sample(_timestamp(item.get("timestamp"), at), cpu, memory)
    return found


def _keep(store: dict[Any, deque[_Sample]], key: object, sample: _Sample) -> None:
    """Add `sample` unless it is the last one again (metrics-server answers the same
    measurement until its next scrape); drop what is KEEP older than it."""
    kept = store.pop(key, None) or deque(maxlen=MAX_SAMPLES)
    if not kept or kept[-1].at != sample.at:
        kept.append(sample)
    while kept[0].at < sample.at - KEEP:
        kept.popleft()
    store[key] = kept  # re-inserted: the dict's order is the order of last sampling
    while len(store) > MAX_TRACKED:
        del store[next(iter(store))]


def _forget(store: dict[Any, deque[_Sample]], before: datetime) -> None:
    """Drop what was last measured before `before` (pods and nodes gone)."""
    for key in [k for k, kept in store.items() if kept[-1].at < before]:
        del store[key]


def _mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _peak(values: Iterable[float | None]) -> float | None:
    return max((v for v in values if v is not None), default=None)


#: metrics-server refreshes its numbers every 15 s (its --metric-resolution default): one
#: sample of the same pods in this time is enough, however often a step is looked at.
SAMPLE_EVERY = timedelta(seconds=5)
#: After the API answered "not served" or "forbidden", it is not asked again for this long.
BACK_OFF = timedelta(seconds=60)


class MetricsServerSource:
    """A UsageSource over the resource metrics API; never raises."""

    #: Its samples are taken while the step runs: nothing to wait for after the window.
    settle_seconds = 0.0

    def __init__(self, kube: MetricsAPI, *, clock: Callable[[], datetime] = _now) -> None:
        self._kube = kube
        self._clock = clock
        self._pods: dict[PodKey, deque[_Sample]] = {}
        self._nodes: dict[str, deque[_Sample]] = {}
        #: Requests sent since the last reading (its cost).
        self._queries = 0
        #: Why the last sample failed, in our words (None when it did not).
        self._problem: str | None = None
        #: When each set of namespaces was last sampled, and when the API last said no.
        self._sampled: dict[frozenset[str], datetime] = {}
        self._refused_at: datetime | None = None

    def sample(self, pods: Sequence[PodKey], at: datetime) -> None:
        """Read the pods' namespaces and the nodes once, and keep the samples (at most once
        in SAMPLE_EVERY for the same namespaces; not for BACK_OFF after the API said no)."""
        spaces = frozenset(p.namespace for p in pods)
        last = self._sampled.get(spaces)
        if (last is not None and at - last < SAMPLE_EVERY) or (
            self._refused_at is not None and at - self._refused_at < BACK_OFF
        ):
            return
        self._sampled[spaces] = at
        try:
            self._take(pods, at)
            if self._problem in (NOT_SERVED, FORBIDDEN):
                self._refused_at = at
        except Exception as exc:  # never raise: resource data is evidence, not a gate
            self._problem = f"the resource metrics API: sampling failed ({type(exc).__name__})"

    def _get(self, path: str) -> JSON | None:
        """One answer, or None with `_problem` set."""
        self._queries += 1
        try:
            doc = self._kube.metrics_api(path)
        except KubeForbidden:
            self._problem = FORBIDDEN
            return None
        except KubeError as exc:
            self._problem = f"the resource metrics API (metrics.k8s.io) could not be read: {exc}"
            return None
        if doc is None:
            self._problem = NOT_SERVED
        return doc

    def _take(self, pods: Sequence[PodKey], at: datetime) -> set[PodKey]:
        """Sample now; the asked pods the answers had."""
        self._problem = None
        asked = set(pods)
        seen: set[PodKey] = set()
        for namespace in sorted({p.namespace for p in pods}):
            doc = self._get(f"namespaces/{namespace}/pods")
            if doc is None:
                return seen  # not served or refused: the next namespace would say the same
            for key, sample in parse_pod_metrics(doc, at).items():
                if key in asked:
                    seen.add(key)
                    _keep(self._pods, key, sample)
        doc = self._get("nodes")
        for name, sample in (parse_node_metrics(doc, at) if doc is not None else {}).items():
            _keep(self._nodes, name, sample)
        for store in (self._pods, self._nodes):
            _forget(store, at - 2 * KEEP)
        return seen

    def read(
        self, pods: Sequence[PodKey], nodes: Sequence[str], start: datetime, end: datetime
    ) -> UsageReading:
        """The mean cores and peak working set of `pods` (and mean cores of `nodes`) over the
        samples inside [start, end]; one taken now for those that have none."""
        try:
            return self._read(list(dict.fromkeys(pods)), nodes, start, end)
        except Exception as exc:  # never raise
            return UsageReading(
                source=SOURCE, start=start, end=end, queries=self._spent(),
                unavailable=f"the resource metrics API: reading failed ({type(exc).__name__})",
            )  # fmt: skip

    def _spent(self) -> int:
        spent, self._queries = self._queries, 0
        return spent

    def _read(
        self, pods: list[PodKey], nodes: Sequence[str], start: datetime, end: datetime
    ) -> UsageReading:
        def inside(kept: deque[_Sample] | None) -> list[_Sample]:
            return [s for s in kept or () if start <= s.at <= end]

        during = {pod: inside(self._pods.get(pod)) for pod in pods}
        node_during = {node: inside(self._nodes.get(node)) for node in nodes}
        late: dict[PodKey, _Sample] = {}
        if not all(during.values()) or not all(node_during.values()):
            # No sample inside the window (sampling never ran, or the step was shorter than
            # metrics-server's scrape): one taken now stands for the window.
            for pod in self._take([p for p in pods if not during[p]], self._clock()):
                late[pod] = self._pods[pod][-1]
            for node in [n for n in nodes if not node_during[n] and self._nodes.get(n)]:
                node_during[node] = [self._nodes[node][-1]]
        found = {pod: during[pod] or ([late[pod]] if pod in late else []) for pod in pods}
        usages = tuple(
            PodUsage(
                namespace=pod.namespace,
                name=pod.name,
                cpu_cores=_mean(s.cpu for s in samples),
                memory_bytes=_peak(s.memory for s in samples),
            )
            for pod, samples in found.items()
        )
        node_usages = tuple(
            NodeUsage(node, cores)
            for node, samples in sorted(node_during.items())
            if (cores := _mean(s.cpu for s in samples)) is not None
        )
        queries = self._spent()
        if not any(found.values()) and not node_usages:
            why = self._problem or (
                f"the resource metrics API had no metrics for any of the {len(pods)} pods"
                if pods
                else "the resource metrics API: nothing was asked"
            )
            return UsageReading(
                source=SOURCE, start=start, end=end, queries=queries, unavailable=why
            )
        return UsageReading(
            source=SOURCE,
            start=start,
            end=end,
            pods=usages,
            nodes=node_usages,
            queries=queries,
            notes=self._notes(during, late, found, nodes, node_usages),
        )

    def _notes(
        self,
        during: dict[PodKey, list[_Sample]],
        late: dict[PodKey, _Sample],
        found: dict[PodKey, list[_Sample]],
        nodes: Sequence[str],
        node_usages: tuple[NodeUsage, ...],
    ) -> tuple[str, ...]:
        notes: list[str] = []
        most = max((len(s) for s in during.values()), default=0)
        if most:
            notes.append(
                f"metrics-server: {most} sample{'s' if most > 1 else ''} during the window"
            )
        if late:
            whom = "" if not most else f" for {len(late)} pods"
            notes.append(
                f"metrics-server: sampled once at step end{whom} (metrics-server keeps no history)"
            )
        missing = [f"{p.namespace}/{p.name}" for p, s in found.items() if not s]
        if missing:
            notes.append(
                f"metrics-server: no metrics for {len(missing)} pods ({', '.join(missing[:5])}"
                + (f" and {len(missing) - 5} more)" if len(missing) > 5 else ")")
            )
        missing_nodes = sorted(set(nodes) - {n.name for n in node_usages})
        if missing_nodes:
            notes.append(f"metrics-server: no metrics for nodes {', '.join(missing_nodes[:5])}")
        if self._problem:
            notes.append(self._problem)
        return tuple(notes)
