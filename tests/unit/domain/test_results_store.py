"""The results store: every object within a ConfigMap's limit, whatever run the schema allows."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
from tidb_bench_operator.domain.api.run_status import StepStatus
from tidb_bench_operator.domain.manifests import RunRef, build_results_configmap
from tidb_bench_operator.domain.results_store import (
    CONFIGMAP_LIMIT,
    DEFAULT_BUDGET,
    MAX_STEP_POINTS,
    Part,
    StoreError,
    index_part,
    max_points,
    read_store,
    series_parts,
    split,
    step_parts,
    step_series,
    thin,
    trial_parts,
)
from unit.domain.experiment.support import LOCK_CLIENTS, series

RUN = RunRef("r" * 253, "n" * 63, "u" * 36)  # the longest names Kubernetes allows
INDEX = "results-index-" + "x" * 49


def worst_point(t: int) -> dict[str, Any]:
    """An interval line with the widest numbers sysbench prints."""
    big = 123456789.123
    return {
        "t": float(t), "threads": 4096, "tps": big, "qps": big, "readQps": big,
        "writeQps": big, "otherQps": big, "percentile": 100, "latencyMs": 99999.999,
        "errorsPerSec": big, "reconnectsPerSec": big,
    }  # fmt: skip


def limits() -> dict[str, Any]:
    """The schema's maxima for the size of a run."""
    fields = BenchmarkRunSpec.model_fields

    def bound(name: str, kind: str) -> Any:
        return next(getattr(m, kind) for m in fields[name].metadata if hasattr(m, kind))

    return {
        "workloads": bound("workloads", "max_length"),
        "threads": bound("threads", "max_length"),
        "clients": bound("clients", "le"),
        "duration": bound("duration_seconds", "le"),
        "interval": bound("report_interval_seconds", "ge"),
    }


def object_bytes(part: Part) -> int:
    """What Kubernetes counts against the 1 MiB limit: the data's keys and values."""
    cm = build_results_configmap(RUN, part.name, part.data)
    return sum(len(k.encode()) + len(v.encode()) for k, v in cm["data"].items())


def test_split_keeps_every_character_in_order_and_each_part_within_the_budget() -> None:
    text = "".join(chr(65 + i % 26) for i in range(10_001))
    parts = split(text, 1000)
    assert len(parts) == 11 and all(len(p) <= 1000 for p in parts)
    assert "".join(parts) == text
    assert split("", 10) == [""]


def test_thinning_merges_neighbours_averaging_rates_and_keeping_the_worst_latency() -> None:
    series = [{**worst_point(t), "qps": float(t), "latencyMs": float(t % 7)} for t in range(1, 11)]
    points, k = thin(series, 4)
    assert k == 3 and len(points) == 4
    assert [p["qps"] for p in points] == [2.0, 5.0, 8.0, 10.0]
    assert [p["latencyMs"] for p in points] == [3.0, 6.0, 2.0, 3.0]
    assert [p["t"] for p in points] == [3.0, 6.0, 9.0, 10.0]
    assert [p["merged"] for p in points] == [3, 3, 3, 1]
    assert thin(series, 10) == (series, 1)


def test_thinning_the_runners_snake_case_lines_averages_errors_and_keeps_the_worst_latency() -> (
    None
):
    # the write lock's two-client recording as the runner stores it (Interval.model_dump)
    lines = series(LOCK_CLIENTS["0"])
    points, k = thin(lines, 8)
    assert k == 3 and len(points) == 8
    lock = points[3]  # [ 10s ] to [ 12s ]: the lock began in [ 11s ]
    assert lock["qps"] == round((4136.16 + 54.54 + 0.0) / 3, 3)
    assert lock["latency_ms"] == 121.08  # [ 12s ] printed 0.00 (no query): not a latency
    assert "latencyMs" not in lock and "errorsPerSec" not in lock
    ignored = series("sysbench-1.0.20_oltp_read_write_deadlocks-ignored_recorded.txt")
    first, _ = thin(ignored, 2)[0]
    assert first["errors_per_sec"] == round((312.48 + 322.18 + 264.13) / 3, 3)
    assert first["latency_ms"] == 12.98


def test_a_days_step_at_one_second_is_thinned_to_the_bound_and_says_so() -> None:
    m = limits()
    one_client = [worst_point(t) for t in range(m["duration"] // m["interval"])]
    stored = step_series("oltp_read_write", 4096, {"0": one_client})
    assert len(stored.doc["clients"]["0"]) <= MAX_STEP_POINTS
    assert "86400 interval lines kept as" in stored.notes[0]
    for clients in (1, 2, 7, 64):
        assert max_points(clients) * clients <= max(MAX_STEP_POINTS, 60 * clients)
        points, _ = thin(one_client, max_points(clients))
        assert len(points) <= max_points(clients)


def test_the_largest_run_the_schema_allows_is_stored_within_the_object_limit() -> None:
    m = limits()
    steps_n = m["workloads"] * m["threads"]
    assert (steps_n, m["clients"], m["duration"], m["interval"]) == (352, 64, 86400, 1)
    # The largest step document thinning can give: every client at its point bound.
    per = max_points(m["clients"])
    worst_step = step_series(
        "oltp_read_write", 4096,
        {str(c): [worst_point(t) for t in range(per)] for c in range(m["clients"])},
    )  # fmt: skip
    single = step_series("oltp_read_write", 4096, {"0": [worst_point(t) for t in range(14_400)]})
    step_objects = max(
        len(series_parts(INDEX, 351, s, DEFAULT_BUDGET)) for s in (worst_step, single)
    )
    for s in (worst_step, single):
        for part in series_parts(INDEX, 351, s, DEFAULT_BUDGET):
            assert object_bytes(part) <= CONFIGMAP_LIMIT
    notes = [f"note {i}: " + "n" * 200 for i in range(8)]
    steps = [
        StepStatus(index=i, workload="oltp_read_write", threads=4096, clients=64, qps=1e9,
                   tps=1e9, notes=notes, job_names=[f"{'r' * 62}-{c}" for c in range(64)]
                   ).model_dump(by_alias=True, exclude_none=True, mode="json")
        for i in range(steps_n)
    ]  # fmt: skip
    step_docs = [p for step in steps for p in step_parts(INDEX, step, DEFAULT_BUDGET)]
    assert len(step_docs) == steps_n, "one object per step's document"
    index = [index_part(INDEX, steps_n), *step_docs]
    for part in index:
        assert object_bytes(part) <= CONFIGMAP_LIMIT
    total = steps_n * step_objects + len(index)
    # Said in docs/how-a-run-goes.md: the largest run is held in this many objects (and one
    # per trial, when it has repeats).
    assert total <= steps_n * 5 + 1, total
    # And read back: the index, the steps' documents and one step's series.
    maps = {p.name: p.data for p in [*index, *series_parts(INDEX, 0, worst_step, DEFAULT_BUDGET)]}
    back = read_store(INDEX, maps)
    assert back.steps == json.loads(json.dumps(steps))
    assert back.series["0"] == json.loads(json.dumps(worst_step.doc))


def test_a_steps_trials_are_read_back_in_place_of_its_compact_ones() -> None:
    step = {"index": 2, "phase": "Succeeded", "trials": [{"round": 0, "qps": 1.0}] * 2}
    trials = [{"round": r, "qps": float(r), "notes": [f"trial {r}"]} for r in (0, 1)]
    parts = [
        index_part(INDEX, 3),
        *step_parts(INDEX, step, 64),
        *(p for m, t in enumerate(trials) for p in trial_parts(INDEX, 2, m, t, 32)),
    ]
    back = read_store(INDEX, {p.name: p.data for p in parts})
    assert back.steps == [{**step, "trials": trials}]


def test_format_2_with_every_step_in_the_index_is_still_read() -> None:
    steps = [{"index": 0, "phase": "Succeeded"}]
    two = {"format": "2", "steps.json": json.dumps(steps)}
    assert read_store(INDEX, {INDEX: two}).steps == steps


def test_a_small_budget_spreads_a_step_over_several_objects_and_reads_back() -> None:
    doc = step_series("oltp_point_select", 1, {"0": [worst_point(t) for t in range(50)]})
    parts = series_parts(INDEX, 3, doc, 1024)
    assert len(parts) > 3 and all(len(p.data["part"]) <= 1024 for p in parts)
    index = [index_part(INDEX, 4), *step_parts(INDEX, {"index": 3, "phase": "Succeeded"}, 1024)]
    back = read_store(INDEX, {p.name: p.data for p in [*index, *parts]})
    assert back.series == {"3": json.loads(json.dumps(doc.doc))}
    missing = {p.name: p.data for p in [*index, *parts] if p.name != parts[1].name}
    with pytest.raises(StoreError, match=f"{parts[1].name} \\(part 2 of {len(parts)} of s3\\)"):
        read_store(INDEX, missing)


def test_the_single_configmap_of_earlier_releases_is_still_read() -> None:
    old = {"steps.json": json.dumps([{"index": 0}]), "series.json": json.dumps({"0": {"a": 1}})}
    back = read_store("x-results", {"x-results": old})
    assert back.steps == [{"index": 0}] and back.series == {"0": {"a": 1}}
    with pytest.raises(StoreError, match="x-results"):
        read_store("x-results", {})
