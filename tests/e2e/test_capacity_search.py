"""The capacity search against the full thread sweep, on the same bed, with real sysbench.

The sweep runs first and measures every threads level of the range at the search's
precision; the SLO is then placed from the sweep's own latencies, between two neighbouring
levels in the middle of the range where p95 crosses it cleanly; the search runs with that
SLO and must find the same point within its precision in at most half the sweep's steps.
"""

from __future__ import annotations

import itertools
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from testbed.cluster import Testbed
from testbed.runs import RunBed, assert_quiet, run_manifest

pytestmark = pytest.mark.e2e
TIDB_BENCH = str(Path(sys.executable).parent / "tidb-bench")

#: The range and its precision: the sweep measures every PRECISION threads from MIN to MAX.
MIN, MAX, PRECISION = 2, 26, 2
#: oltp_read_write on one small table: its p95 rises steeply with threads on two cores
#: (row locks and the CPU), so neighbouring levels are told apart through the noise.
WORKLOAD = "oltp_read_write"
COMMON: dict[str, Any] = {
    "workloads": [WORKLOAD],
    "durationSeconds": 3,
    "reportIntervalSeconds": 1,
    "dataset": {"tables": 1, "tableSize": 1000},
}


def p95(step: dict[str, Any]) -> float:
    return float(step["latencyMs"]["value"])


def slo_between(sweep: list[dict[str, Any]]) -> tuple[float, int]:
    """An SLO from the sweep's latencies, and the sweep's answer to it.

    Among neighbouring levels in the middle half of the range, the pair where p95 jumps the
    most and the sweep crosses cleanly: every level up to the lower one meets the SLO (the
    geometric mean of the pair's p95), every level from the upper one misses it. The sweep's
    answer is the lower level: the most threads meeting the SLO.
    """
    by_threads = sorted(sweep, key=lambda s: s["threads"])
    width = MAX - MIN
    candidates = []
    for low, high in itertools.pairwise(by_threads):
        if not MIN + width / 4 <= low["threads"] <= MAX - width / 4:
            continue
        slo = round(math.sqrt(p95(low) * p95(high)), 1)
        below = [s for s in by_threads if s["threads"] <= low["threads"]]
        above = [s for s in by_threads if s["threads"] >= high["threads"]]
        if all(p95(s) < slo for s in below) and all(p95(s) >= slo for s in above):
            candidates.append((p95(high) / p95(low), slo, low["threads"]))
    assert candidates, (
        "the sweep's p95 crosses no level in the middle of the range cleanly (too noisy): "
        + str([(s["threads"], p95(s)) for s in by_threads])
    )
    _, slo, threads = max(candidates)
    return slo, threads


def test_the_search_finds_the_sweeps_slo_point_within_its_precision_in_at_most_half_the_steps(
    bed: RunBed, controller: Any, testbed: Testbed
) -> None:
    levels = list(range(MIN, MAX + 1, PRECISION))
    began = time.monotonic()
    bed.create(run_manifest("sweep", bed.mariadb, threads=levels, **COMMON))
    sweep_run = bed.wait("sweep", timeout=240)
    sweep_seconds = time.monotonic() - began
    assert sweep_run["status"]["phase"] == "Succeeded", sweep_run["status"]
    sweep = sweep_run["status"]["steps"]
    assert [s["threads"] for s in sweep] == levels and all(s["valid"] for s in sweep)
    slo, sweep_answer = slo_between(sweep)

    began = time.monotonic()
    search_body = run_manifest(
        "search", bed.mariadb, slo={"latencyMs": slo}, repeats=2,
        capacitySearch={"minThreads": MIN, "maxThreads": MAX, "precision": PRECISION},
        **COMMON,
    )  # fmt: skip
    search_body["spec"].pop("threads")
    bed.create(search_body)
    run = bed.wait("search", timeout=240)
    search_seconds = time.monotonic() - began
    status = run["status"]
    assert status["phase"] == "Succeeded", status
    assert_quiet(run)
    steps = status["steps"]
    found = status["summary"]["capacity"][0]
    report = (
        f"SLO p95 < {slo} ms; sweep {[(s['threads'], p95(s)) for s in sweep]} "
        f"({sweep_seconds:.0f}s) answers {sweep_answer}; search "
        f"{[(s['threads'], p95(s)) for s in steps]} ({search_seconds:.0f}s): {found}"
    )
    print(report)

    # The same point within the precision, in at most half the sweep's steps.
    assert found["verdict"] == "Found", report
    assert abs(found["bestThreads"] - sweep_answer) <= PRECISION, report
    assert found["missThreads"] - found["bestThreads"] <= PRECISION, report
    assert len(steps) == found["stepsMeasured"] <= len(sweep) / 2, report
    # Ordinary steps: in status with their numbers, each measured spec.repeats times,
    # its p95 that of its median trial; the ends first, then midpoints of the bracket.
    assert [s["threads"] for s in steps[:2]] == [MIN, MAX], report
    assert [s["index"] for s in steps] == list(range(len(steps)))
    for s in steps:
        assert s["phase"] == "Succeeded" and s["valid"] is True, s
        assert [t["round"] for t in s["trials"]] == [0, 1] and s["qpsTrials"]["n"] == 2, s
        assert s["qps"] > 0 and s["sysbenchVersion"] == "1.0.20"
    for s in steps[2:]:
        assert MIN < s["threads"] < MAX, report
    best = next(s for s in steps if s["threads"] == found["bestThreads"])
    assert p95(best) < slo and found["bestQps"] == best["qps"], report
    assert p95(best) == found["bestLatencyMs"]
    miss = next(s for s in steps if s["threads"] == found["missThreads"])
    assert p95(miss) >= slo, report
    # The reference's second point: the most throughput the search saw.
    top = max(steps, key=lambda s: s["qps"])
    assert (found["maxThreads"], found["maxQps"]) == (top["threads"], top["qps"])
    # One line says it: the headline, `kubectl describe`, the Markdown report.
    assert status["summary"]["headline"].startswith(found["headline"])
    assert f"capacity under p95 < {slo:g} ms: {found['bestThreads']} threads" in found["headline"]
    kubectl = ["kubectl", "--kubeconfig", str(testbed.kubeconfig), "-n", bed.namespace]
    described = subprocess.run(
        [*kubectl, "describe", "benchmarkrun", "search"], capture_output=True, text=True,
        check=True,
    ).stdout  # fmt: skip
    assert f"{found['bestThreads']} threads" in described and "Best Threads" in described
    markdown = subprocess.run(
        [TIDB_BENCH, "report", "search", "--namespace", bed.namespace], capture_output=True,
        text=True, check=True, env={**os.environ, "KUBECONFIG": str(testbed.kubeconfig)},
    ).stdout  # fmt: skip
    assert f"- Capacity search (Found): {found['headline']}." in markdown
