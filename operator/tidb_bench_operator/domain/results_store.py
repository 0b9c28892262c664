"""Where a run's results are kept outside its status: ConfigMaps, each within the limits.

A ConfigMap holds at most 1 MiB of data, so one object rewritten after every step cannot hold
a long run (9 steps x 600 s at a 1 s report interval already passes it). The store is laid
out so that every object is within a byte budget by construction, whatever the spec:

    <run>-results            the index: `format` and `steps`, the number of steps (a few
                             bytes, the same after every trial)
    <run>-results-st<i>-p<k> part k of step i's document: the step as status.steps has it,
                             with every note and disturbance (status keeps a bounded few);
                             rewritten when the step records a trial (one step's size)
    <run>-results-t<i>m<m>-p<k> part k of trial m of step i (its full result, notes and
                             disturbances; status keeps a compact line): written once
    <run>-results-s<i>-p<k>  part k of step i's interval series (written once, when the
                             step is recorded; never rewritten)

So a trial writes its own documents only: the bytes one trial sends do not grow with the
trials before it (format 2 rewrote every step's numbers after each trial: quadratic).

A document is cut into parts of at most `budget` characters (the JSON is ASCII: characters
are bytes) and read back by joining its parts in order. Before that, each client's series is
thinned to at most `max_points(clients)` points by merging neighbouring intervals (rates
averaged, latency the worst of the merged lines), so a step's series has a bounded size:
at most MAX_STEP_POINTS points, about 200 bytes each, whatever its duration and interval.
Largest run the schema allows (11 workloads x 32 thread counts = 352 steps, 64 clients,
86 400 s steps at a 1 s interval): 352 steps x at most ceil(14 400 x ~200 B / budget)
parts, each under 1 MiB; tests/unit/domain/test_results_store.py stores it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tidb_bench_operator.domain.objects import JSON
from tidb_bench_operator.errors import StoreError

#: The layout's version, in the index's `format` key.
STORE_FORMAT = "3"
#: The earlier layout (every step in the index's steps.json), still read.
STORE_FORMAT_STEPS_JSON = "2"
#: Kubernetes refuses a ConfigMap whose data is larger than 1 MiB (1 048 576 bytes).
CONFIGMAP_LIMIT = 1024 * 1024
#: Characters of document text per object by default: the limit less room for the keys.
DEFAULT_BUDGET = 1000 * 1000
#: A step's series is thinned to at most this many points over all its clients.
MAX_STEP_POINTS = 14_400
#: ... and at least this many points per client, however many clients there are.
MIN_CLIENT_POINTS = 60


def split(text: str, budget: int) -> list[str]:
    """`text` in parts of at most `budget` characters (at least one part)."""
    if budget < 1:
        raise ValueError("budget must be at least 1")
    return [text[i : i + budget] for i in range(0, len(text), budget)] or [""]


def max_points(clients: int) -> int:
    """How many points each client's series keeps in a step of `clients` clients."""
    return max(MIN_CLIENT_POINTS, MAX_STEP_POINTS // max(clients, 1))


#: The rates of an interval line. The runner stores `Interval.model_dump` (snake_case, the
#: model has no aliases); camelCase is what earlier documents and this module's tests use.
_RATES = (
    "tps", "qps", "read_qps", "write_qps", "other_qps", "errors_per_sec", "reconnects_per_sec",
    "readQps", "writeQps", "otherQps", "errorsPerSec", "reconnectsPerSec",
)  # fmt: skip
_LATENCY = ("latency_ms", "latencyMs")


def thin(series: Sequence[Mapping[str, Any]], limit: int) -> tuple[list[JSON], int]:
    """At most `limit` points: every `k` neighbouring intervals merged into one.

    Rates are averaged over the merged lines, the latency is the worst of them, `t` is the
    last one's. Returns the points and `k` (1: kept as they were).
    """
    if len(series) <= limit:
        return [dict(p) for p in series], 1
    k = math.ceil(len(series) / limit)
    merged: list[JSON] = []
    for start in range(0, len(series), k):
        group = series[start : start + k]
        out = dict(group[-1])
        for key in [k for k in _RATES if any(k in p for p in group)]:
            values = [p[key] for p in group if isinstance(p.get(key), (int, float))]
            out[key] = round(sum(values) / len(values), 3) if values else None
        for key in [k for k in _LATENCY if any(k in p for p in group)]:
            lat = [p[key] for p in group if isinstance(p.get(key), (int, float))]
            out[key] = max(lat) if lat else None
        out["merged"] = len(group)
        merged.append(out)
    return merged, k


@dataclass(frozen=True)
class StepSeries:
    """One step's series document and the notes saying how it was thinned."""

    doc: JSON
    notes: list[str] = field(default_factory=list)


def step_series(
    workload: str, threads: int, per_client: Mapping[str, Sequence[Mapping[str, Any]]]
) -> StepSeries:
    """The stored document of a step: its identity and each client's (thinned) series."""
    limit = max_points(len(per_client))
    clients: dict[str, list[JSON]] = {}
    notes = []
    for client, series in sorted(per_client.items()):
        clients[client], k = thin(series, limit)
        if k > 1:
            notes.append(
                f"client {client}: {len(series)} interval lines kept as {len(clients[client])} "
                f"points of {k} lines each (the results store keeps at most {limit} per client)"
            )
    return StepSeries({"workload": workload, "threads": threads, "clients": clients}, notes)


def dumps(doc: Any) -> str:
    """Compact, ASCII-only JSON (so that one character is one byte)."""
    return json.dumps(doc, separators=(",", ":"), sort_keys=True, ensure_ascii=True)


def part_name(index: str, doc: str, k: int) -> str:
    """The name of part `k` of document `doc` (e.g. "s3", "steps") of the index `index`."""
    return f"{index}-{doc}-p{k}"


@dataclass(frozen=True)
class Part:
    """One ConfigMap of the store: its name, its role label value and its data."""

    name: str
    data: dict[str, str]


def series_parts(
    index: str, step: int, series: StepSeries, budget: int, round_: int = 0
) -> list[Part]:
    """The ConfigMaps holding step `step`'s series (of round `round_`: `s<step>r<round>`)."""
    doc = f"s{step}" if not round_ else f"s{step}r{round_}"
    return _parts(index, doc, dumps(series.doc), budget)


def _parts(index: str, doc: str, text: str, budget: int) -> list[Part]:
    pieces = split(text, budget)
    return [
        Part(part_name(index, doc, k), {"doc": doc, "part": piece, "parts": str(len(pieces))})
        for k, piece in enumerate(pieces)
    ]


def index_part(index: str, steps: int) -> Part:
    """The index ConfigMap: the layout's format and how many steps the run has."""
    return Part(index, {"format": STORE_FORMAT, "steps": str(steps)})


def step_parts(index: str, step: Mapping[str, Any], budget: int) -> list[Part]:
    """The ConfigMaps of one step's document (`st<i>`): the step with all its notes."""
    return _parts(index, f"st{step['index']}", dumps(dict(step)), budget)


def trial_doc(step: int, ordinal: int) -> str:
    """The name of trial `ordinal` (its place in the step's trials, from 0) of step `step`."""
    return f"t{step}m{ordinal}"


def trial_parts(
    index: str, step: int, ordinal: int, trial: Mapping[str, Any], budget: int
) -> list[Part]:
    """The ConfigMaps of one trial's full document (written once)."""
    return _parts(index, trial_doc(step, ordinal), dumps(dict(trial)), budget)


def joined_doc(index: str, doc: str, configmaps: Mapping[str, Mapping[str, str]]) -> str | None:
    """The text of document `doc` from its parts, or None when its first part is missing."""
    first = configmaps.get(part_name(index, doc, 0))
    if first is None:
        return None
    n = _count(first.get("parts", "1"), part_name(index, doc, 0))
    return _joined(index, doc, n, configmaps)


def _joined(index: str, doc: str, n: int, configmaps: Mapping[str, Mapping[str, str]]) -> str:
    pieces = []
    for k in range(n):
        part = configmaps.get(part_name(index, doc, k))
        if part is None:
            raise StoreError(
                f"ConfigMap {part_name(index, doc, k)} (part {k + 1} of {n} of {doc}) is missing"
            )
        pieces.append(part.get("part", ""))
    return "".join(pieces)


_SERIES_DOC = re.compile(r"s(\d+)(?:r(\d+))?")
_STEP_DOC = re.compile(r"st(\d+)")
_TRIAL_DOC = re.compile(r"t(\d+)m(\d+)")


@dataclass(frozen=True)
class StoredResults:
    """A run's stored results put back together."""

    steps: list[JSON]
    series: dict[str, JSON]


def read_store(
    index: str,
    configmaps: Mapping[str, Mapping[str, str]],
    loads: Callable[[str], Any] = json.loads,
) -> StoredResults:
    """Put a run's results back together from its ConfigMaps' data, by name.

    `configmaps` holds the run's results ConfigMaps (label tidbbench.io/role=results). Reads
    this layout (each step's document with its full trials put back in), format 2 (every
    step in steps.json) and the single ConfigMap of earlier releases (`steps.json` and a
    `series.json` with every step). A missing part is named in the StoreError; a document
    that is not a JSON list (steps) or object (series) is a StoreError too. `loads` parses
    JSON (a stricter reader for documents from users).
    """
    data = configmaps.get(index)
    if data is None:
        raise StoreError(f"ConfigMap {index} (the index of the run's results) is missing")
    if data.get("format") not in (STORE_FORMAT, STORE_FORMAT_STEPS_JSON):
        return StoredResults(
            steps=_list(loads(data.get("steps.json") or "[]"), "steps.json"),
            series=_dict(loads(data.get("series.json") or "{}"), "series.json"),
        )
    docs: dict[str, int] = {}
    for name, part in configmaps.items():
        if name.startswith(f"{index}-") and "doc" in part:
            docs[part["doc"]] = _count(part.get("parts", "1"), name)

    def read(doc: str, n: int) -> Any:
        return loads(_joined(index, doc, n, configmaps))

    if data.get("format") == STORE_FORMAT:
        steps = _steps_of(docs, read)
    elif "steps.json" in data:
        steps = loads(data["steps.json"])
    else:
        steps = read("steps", _count(data.get("steps.parts", "0"), index))
    # Keyed as before stores were split: "<step>", and "<step>.<round>" for later rounds.
    series = {
        ".".join(found.groups(default="")).rstrip("."): _dict(read(doc, n), doc)
        for doc, n in sorted(docs.items())
        if (found := _SERIES_DOC.fullmatch(doc)) is not None
    }
    return StoredResults(steps=_list(steps, "steps.json"), series=series)


def _steps_of(docs: Mapping[str, int], read: Callable[[str, int], Any]) -> list[JSON]:
    """Format 3's steps in order, each with its trials' full documents in place."""
    steps: dict[int, JSON] = {}
    trials: dict[int, dict[int, JSON]] = {}
    for doc, n in docs.items():
        if (found := _STEP_DOC.fullmatch(doc)) is not None:
            steps[int(found[1])] = _dict(read(doc, n), doc)
        elif (found := _TRIAL_DOC.fullmatch(doc)) is not None:
            trials.setdefault(int(found[1]), {})[int(found[2])] = _dict(read(doc, n), doc)
    out = []
    for i in sorted(steps):
        step = dict(steps[i])
        if i in trials:
            step["trials"] = [trials[i][m] for m in sorted(trials[i])]
        out.append(step)
    return out


#: More parts than this in one document cannot come from this store (see the module's bound).
MAX_PARTS = 10_000


def _count(text: str, where: str) -> int:
    if not text.isdigit() or int(text) > MAX_PARTS:
        raise StoreError(f"ConfigMap {where}: part count {text[:20]!r} is not 0..{MAX_PARTS}")
    return int(text)


def _list(value: Any, what: str) -> list[JSON]:
    if not isinstance(value, list):
        raise StoreError(f"{what} is not a list of step objects")
    return value


def _dict(value: Any, what: str) -> JSON:
    if not isinstance(value, dict):
        raise StoreError(f"{what} is not a JSON object")
    return value
