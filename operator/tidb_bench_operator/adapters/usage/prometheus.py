"""Server usage from a Prometheus the user names: cAdvisor's series (or the processes' own) over
a step's window, read with instant queries at the window's end (docs/resources.md#sources).

Every query is a GET of /api/v1/query through adapters.http_get (no redirect followed, the
whole answer within the timeout, a size cap). Nothing the server sends reaches a note: the
notes and the `unavailable` text are ours, with the numbers we parsed.
"""

from __future__ import annotations

import json
import math
import re
import ssl
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from string import Template
from typing import Any, Literal

from tidb_bench_operator.adapters.http_get import unreachable_reason, urllib_get
from tidb_bench_operator.domain.api.metrics_spec import PrometheusQueries
from tidb_bench_operator.domain.resources.usage import NodeUsage, PodKey, PodUsage, UsageReading

SOURCE = "prometheus"
#: Largest answer read (a vector of a few hundred pods is tens of KiB).
MAX_ANSWER_BYTES = 8 * 1024 * 1024
#: Samples looked at in one answer: more than any asked set of pods or nodes can have.
MAX_SAMPLES = 20_000
#: Pods or nodes named in one note before "and N more".
NAMED_IN_NOTE = 5
#: Prometheus' own error types (web/api/v1/api.go): named when an answer gives one.
ERROR_TYPES = frozenset(
    {"timeout", "canceled", "execution", "bad_data", "internal", "unavailable", "not_found"}
)

CpuSource = Literal["cadvisor", "process"]
Quantity = Literal["cpu", "memory", "rx", "tx"]

# cAdvisor (kubelet's /metrics/cadvisor) has one series per container, one for the pod's
# cgroup (container="") and one for the sandbox (container="POD", older kubelets): only the
# containers are summed, or a pod would count twice. `increase(...[W]) / W` is the mean
# cores over the window. `$seconds` is W as a number.
_CONTAINERS = 'namespace="$namespace", pod=~"$pods", container!="", container!="POD"'
DEFAULT_POD_CPU: dict[CpuSource, str] = {
    "cadvisor": "sum by (namespace, pod) (increase(container_cpu_usage_seconds_total{"
    + _CONTAINERS
    + "}[$window])) / $seconds",
    # The TiDB components' own counter (every Go and Rust process of TiDB exports it).
    "process": "sum by (namespace, pod) (increase(process_cpu_seconds_total{"
    'namespace="$namespace", pod=~"$pods"}[$window])) / $seconds',
}
# The pod's working set is the sum of its containers' at each instant; its peak over the
# window is taken from that sum (a subquery at `$resolution`), not from each container's peak.
DEFAULT_POD_MEMORY = (
    "max_over_time(sum by (namespace, pod) (container_memory_working_set_bytes{"
    + _CONTAINERS
    + "})[$window:$resolution])"
)
# Network counters belong to the pod's sandbox (one network namespace per pod), not to a
# container: no container filter, summed over the pod's interfaces.
DEFAULT_POD_RX = (
    "sum by (namespace, pod) (rate(container_network_receive_bytes_total{"
    'namespace="$namespace", pod=~"$pods"}[$window]))'
)
DEFAULT_POD_TX = DEFAULT_POD_RX.replace("receive", "transmit")
# The root cgroup (id="/") is the whole node, as kubelet reports it; `node` is the label the
# Prometheus Operator's kubelet ServiceMonitor adds.
DEFAULT_NODE_CPU = (
    'sum by (node) (increase(container_cpu_usage_seconds_total{id="/", node=~"$nodes"}'
    "[$window])) / $seconds"
)

_WHAT: dict[Quantity, str] = {
    "cpu": "pod CPU",
    "memory": "pod memory",
    "rx": "network receive",
    "tx": "network transmit",
}


def promql_string(value: str) -> str:
    """`value` as the inside of a double-quoted PromQL string (Go's escapes)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def names_regex(names: Iterable[str]) -> str:
    """An RE2 alternation matching exactly `names`, as the inside of a PromQL string."""
    return promql_string("|".join(re.escape(name) for name in sorted(set(names))))


def _named(names: Sequence[str]) -> str:
    shown = ", ".join(names[:NAMED_IN_NOTE])
    more = len(names) - NAMED_IN_NOTE
    return shown + (f" and {more} more" if more > 0 else "")


def parse_vector(body: bytes) -> tuple[list[tuple[dict[str, str], float]], int]:
    """The samples of an instant query's answer (labels, value) and how many were not
    finite; ValueError, in our words, when the answer is not a Prometheus vector."""
    if len(body) > MAX_ANSWER_BYTES:
        raise ValueError(f"the answer is over the {MAX_ANSWER_BYTES // (1024 * 1024)} MiB cap")
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        raise ValueError("the answer is not JSON") from None
    if not isinstance(doc, dict) or doc.get("status") != "success":
        raise ValueError("the answer's status is not success")
    data = doc.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        raise ValueError("the answer is not an instant vector (data.resultType)")
    result = data.get("result")
    if not isinstance(result, list):
        raise ValueError("the answer has no data.result list")
    if len(result) > MAX_SAMPLES:
        raise ValueError(f"the answer has {len(result):,} series, over {MAX_SAMPLES:,}")
    samples: list[tuple[dict[str, str], float]] = []
    non_finite = 0
    for item in result:
        metric = item.get("metric") if isinstance(item, dict) else None
        value = item.get("value") if isinstance(item, dict) else None
        if (
            not isinstance(metric, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in metric.items())
            or not isinstance(value, list)
            or len(value) != 2
            or not isinstance(value[0], int | float)
            or not isinstance(value[1], str)
        ):
            raise ValueError("a series of the answer is not {metric, value: [time, text]}")
        try:
            number = float(value[1])
        except ValueError:
            raise ValueError("a series' value is not a number") from None
        if not math.isfinite(number):
            non_finite += 1
            continue
        samples.append((metric, number))
    return samples, non_finite


@dataclass
class _Read:
    """One reading under way: what was asked, what came back, what to say about it."""

    queries: int = 0
    answered: int = 0
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: No answer at all came (refused, timed out): the next query would only wait again.
    silent: str | None = None
    non_finite: int = 0


class PrometheusUsageSource:
    """A UsageSource reading a Prometheus' HTTP API; never raises."""

    #: A window's last seconds are in Prometheus once it has scraped past them.
    settle_seconds = 2.0

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        timeout: float = 5.0,
        queries: PrometheusQueries | None = None,
        cpu_source: CpuSource = "cadvisor",
    ) -> None:
        self.url = _shown_url(base_url)
        self.timeout = timeout
        self.cpu_source: CpuSource = cpu_source
        overrides = queries or PrometheusQueries()
        self._templates: dict[Quantity, Template] = {
            "cpu": Template(overrides.pod_cpu or DEFAULT_POD_CPU[cpu_source]),
            "memory": Template(overrides.pod_memory or DEFAULT_POD_MEMORY),
            "rx": Template(DEFAULT_POD_RX),
            "tx": Template(DEFAULT_POD_TX),
        }
        mine: tuple[tuple[Quantity, str | None], ...] = (
            ("cpu", overrides.pod_cpu),
            ("memory", overrides.pod_memory),
        )
        self._overridden = {quantity for quantity, text in mine if text}
        self._headers: dict[str, str] = {}
        self._bad_token = False
        if token is not None:
            token = token.strip()
            # A header value with a line break or beyond Latin-1 makes http.client raise
            # with the value in its message; refuse it here instead.
            if not token or not token.isprintable() or not token.isascii():
                self._bad_token = True
            else:
                self._headers["Authorization"] = f"Bearer {token}"
        self._context = ssl_context

    def describe(self) -> str:
        """'Prometheus <url>'."""
        return f"Prometheus {self.url}"

    def sample(self, pods: Sequence[PodKey], at: datetime) -> None:
        """Nothing: Prometheus keeps the history."""
        del pods, at

    def read(
        self, pods: Sequence[PodKey], nodes: Sequence[str], start: datetime, end: datetime
    ) -> UsageReading:
        """Mean cores, peak working set and mean network rates of `pods`, and mean cores of
        `nodes`, from `start` to `end`."""
        state = _Read()
        try:
            return self._read(pods, nodes, start, end, state)
        except Exception as exc:  # never raise: resource data is evidence, not a gate
            return UsageReading(
                source=SOURCE, start=start, end=end, queries=state.queries,
                unavailable=f"{self.describe()}: reading failed ({type(exc).__name__})",
            )  # fmt: skip

    def _read(
        self,
        pods: Sequence[PodKey],
        nodes: Sequence[str],
        start: datetime,
        end: datetime,
        state: _Read,
    ) -> UsageReading:
        if self._bad_token:
            return UsageReading(
                source=SOURCE, start=start, end=end,
                unavailable=f"{self.describe()}: the bearer token is not a valid HTTP header "
                "value (empty, or with a line break or a non-ASCII character)",
            )  # fmt: skip
        seconds = max(1, round((end - start).total_seconds()))
        at = f"{end.timestamp():.3f}"
        values: dict[Quantity, dict[PodKey, float]] = {q: {} for q in _WHAT}
        by_namespace: dict[str, list[str]] = {}
        for pod in pods:
            by_namespace.setdefault(pod.namespace, []).append(pod.name)
        for namespace, names in sorted(by_namespace.items()):
            fill = {
                "namespace": promql_string(namespace),
                "pods": names_regex(names),
                "window": f"{seconds}s",
                "seconds": str(seconds),
                "resolution": f"{max(1, seconds // 60)}s",
            }
            for quantity, template in self._templates.items():
                samples = self._query(template.safe_substitute(fill), at, _WHAT[quantity], state)
                for metric, number in samples or ():
                    key = PodKey(metric.get("namespace", ""), metric.get("pod", ""))
                    if key.namespace == namespace and key.name in names:
                        values[quantity][key] = number
        node_cores: dict[str, float] = {}
        if nodes:
            fill = {"nodes": names_regex(nodes), "window": f"{seconds}s", "seconds": str(seconds)}
            query = Template(DEFAULT_NODE_CPU).safe_substitute(fill)
            for metric, number in self._query(query, at, "node CPU", state) or ():
                if metric.get("node") in nodes:
                    node_cores[metric["node"]] = number
        if state.answered == 0:
            return UsageReading(
                source=SOURCE, start=start, end=end, queries=state.queries,
                unavailable=state.silent or (state.failures[0] if state.failures else
                                             f"{self.describe()}: nothing was asked"),
            )  # fmt: skip
        self._note_missing(pods, nodes, values, node_cores, state)
        return UsageReading(
            source=SOURCE,
            start=start,
            end=end,
            pods=tuple(
                PodUsage(
                    namespace=pod.namespace,
                    name=pod.name,
                    cpu_cores=values["cpu"].get(pod),
                    memory_bytes=values["memory"].get(pod),
                    rx_bytes_per_sec=values["rx"].get(pod),
                    tx_bytes_per_sec=values["tx"].get(pod),
                )
                for pod in dict.fromkeys(pods)
            ),
            nodes=tuple(NodeUsage(name, cores) for name, cores in sorted(node_cores.items())),
            queries=state.queries,
            notes=tuple(state.notes),
        )

    def _note_missing(
        self,
        pods: Sequence[PodKey],
        nodes: Sequence[str],
        values: dict[Quantity, dict[PodKey, float]],
        node_cores: dict[str, float],
        state: _Read,
    ) -> None:
        """A missing series is a note: the step stays valid, the DBA learns what is absent."""
        state.notes.extend(state.failures)
        if state.silent:
            state.notes.append(state.silent + "; the queries after it were not sent")
        for quantity, found in values.items():
            missing = [f"{p.namespace}/{p.name}" for p in dict.fromkeys(pods) if p not in found]
            if not missing:
                continue
            if quantity in ("rx", "tx") and not found:
                continue  # said once below: network series are optional
            mine = " (the query of spec.metrics.queries)" if quantity in self._overridden else ""
            state.notes.append(
                f"{self.describe()}: no {_WHAT[quantity]} series{mine} for {len(missing)} of "
                f"{len(set(pods))} pods ({_named(missing)})"
            )
        if pods and not values["rx"] and not values["tx"]:
            state.notes.append(f"{self.describe()}: no network series (none recorded)")
        missing_nodes = sorted(set(nodes) - set(node_cores))
        if missing_nodes:
            state.notes.append(
                f'{self.describe()}: no node CPU series (cAdvisor\'s id="/" with a node label) '
                f"for {_named(missing_nodes)}"
            )
        if state.non_finite:
            state.notes.append(
                f"{self.describe()}: {state.non_finite} value(s) not finite (NaN or Inf), ignored"
            )

    def _query(
        self, query: str, at: str, what: str, state: _Read
    ) -> list[tuple[dict[str, str], float]] | None:
        """The samples of one instant query, or None (the failure recorded in our words)."""
        if state.silent:
            return None
        params = {"query": query, "time": at, "timeout": f"{self.timeout:g}s"}
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode(params)}"
        state.queries += 1
        try:
            status, body, _ = urllib_get(
                url, self.timeout, context=self._context, headers=self._headers,
                limit=MAX_ANSWER_BYTES,
            )  # fmt: skip
        except OSError as exc:
            reason = unreachable_reason(exc, url, self.timeout, peer="Prometheus")
            state.silent = f"{self.describe()} did not answer the {what} query: {reason}"
            return None
        if status != 200:
            state.failures.append(
                f"{self.describe()} answered HTTP {status} to the {what} query"
                + _error_type(body, status)
            )
            return None
        try:
            samples, non_finite = parse_vector(body)
        except ValueError as exc:
            # Our own words: parse_vector never quotes the answer.
            state.failures.append(f"{self.describe()}: the {what} query's answer: {exc}")
            return None
        state.answered += 1
        state.non_finite += non_finite
        return samples


def _shown_url(base_url: str) -> str:
    """Scheme, host, port and path of `base_url`: never userinfo, a query or a fragment."""
    parts = urllib.parse.urlsplit(base_url.strip())
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{host}{port}{parts.path.rstrip('/')}"


def _error_type(body: bytes, status: int) -> str:
    """' (bad_data: ...)' when an error answer names one of Prometheus' error types; a hint
    about the token on 401 and 403 (a proxy in front of Prometheus answers those)."""
    if status in (401, 403):
        return " (is spec.metrics.bearerToken right, and allowed to query?)"
    kind: Any = None
    if len(body) <= 64 * 1024:
        try:
            doc: Any = json.loads(body)
        except (ValueError, RecursionError):
            doc = None
        kind = doc.get("errorType") if isinstance(doc, dict) else None
    if kind not in ERROR_TYPES:
        return ""
    if kind == "bad_data":
        return " (bad_data: the query is not valid PromQL; check spec.metrics.queries)"
    return f" ({kind})"
