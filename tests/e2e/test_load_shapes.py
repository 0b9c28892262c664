"""Load shapes end to end against the MariaDB stand-in: rate steps (sysbench --rate, one rate
unreachable), and write steps bounded by events with a pause between steps."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from testbed.runs import RunBed, why_not

pytestmark = pytest.mark.e2e

#: Beyond what two threads serve on the bed under --rate (31,000 events a second in most
#: gates, 49,000 in one, 13,000 closed-loop): the queue grows by some 30,000 events a second,
#: and sysbench may stop on a full queue near the end of the 4 s, in which case the step's
#: numbers come from its interval reports.
UNREACHABLE = 60_000


def test_a_rate_sweep_marks_the_rate_it_cannot_reach_and_meets_the_lower_ones(
    bed: RunBed, controller: Any
) -> None:
    name = "rates"
    bed.start(
        name,
        threads=[2],
        rates=[1000, 2000, UNREACHABLE],
        durationSeconds=4,
        warmupSeconds=1,
        # So loose that the unreachable step's latency (seconds of queueing) is under it: it
        # must still not be recommended, because it did not measure latency at its rate.
        slo={"latencyMs": 600_000},
    )
    run = bed.wait(name, timeout=240)
    st = run["status"]
    assert st["phase"] == "Succeeded", why_not(st)
    steps = st["steps"]
    assert [s["targetRate"] for s in steps] == [1000, 2000, UNREACHABLE]
    assert all(s["threads"] == 2 and s["valid"] is True for s in steps), why_not(st)
    for s in steps[:2]:
        rate = s["rate"]
        # Reached: within the 5% tolerance below; above it only by the arrivals' randomness
        # (sysbench draws exponential gaps: sqrt(4,000) is 1.6% of 4,000 events).
        assert rate["reached"] is True, s["notes"]
        assert rate["shortfallPercent"] <= 5.0
        assert 0.95 * s["targetRate"] <= rate["achieved"] <= 1.15 * s["targetRate"], rate
        assert rate["achieved"] == s["tps"]
        assert not any(n.startswith("RATE NOT REACHED") for n in s["notes"])
        assert any("open loop at" in n for n in s["notes"])
        assert any("measuring started with none queued" in n for n in s["notes"])
    short = steps[2]
    rate = short["rate"]
    # Short by more than the 5% tolerance; how much more is the machine's speed.
    assert rate["reached"] is False and rate["shortfallPercent"] > 5, rate
    assert rate["queueMax"] > 1000 and rate["queueAtEnd"] > 0, rate
    assert any(n.startswith("RATE NOT REACHED: target 60,000/s") for n in short["notes"])
    # Queueing is in its latency: far above the reached steps'.
    assert short["latencyMs"]["value"] > 10 * steps[1]["latencyMs"]["value"]

    summary = st["summary"]
    assert summary["peakQps"] == short["qps"]  # the most it did, at the unreachable rate
    assert summary["highestReachedRate"] == 2000
    assert summary["recommendedRate"] == 2000
    assert summary["recommendedQps"] == steps[1]["qps"]
    assert "60,000/s not" in summary["headline"]
    recorded = [e.message for e in bed.events(name) if e.reason == "StepSucceeded"]
    assert any("target 60,000/s NOT REACHED" in m for m in recorded), recorded
    assert any("target 1,000/s reached" in m for m in recorded), recorded


def test_a_rate_sweep_over_several_thread_counts_is_refused_naming_the_field(
    bed: RunBed, controller: Any
) -> None:
    bed.start("rates-bad", threads=[2, 4], rates=[100])
    run = bed.wait("rates-bad")
    st = run["status"]
    assert st["phase"] == "Failed"
    failed = next(c for c in st["conditions"] if c["type"] == "Failed")
    assert "spec.threads" in failed["message"] and "one thread count" in failed["message"]
    assert bed.jobs("rates-bad") == []


def test_write_steps_end_after_their_events_and_steps_wait_out_the_pause(
    bed: RunBed, controller: Any
) -> None:
    name = "events"
    bed.start(
        name,
        workloads=["oltp_update_non_index"],
        threads=[1, 2],
        writeEvents=[3000, 6000],
        durationSeconds=60,  # the cap: the events end each step well before it
        pauseSeconds=4,
    )
    run = bed.wait(name, timeout=240)
    st = run["status"]
    assert st["phase"] == "Succeeded", why_not(st)
    first, second = st["steps"]
    assert (first["events"], second["events"]) == (3000, 6000), why_not(st)
    for step, events in ((first, 3000), (second, 6000)):
        assert step["durationSeconds"] < 60
        assert any(n.startswith(f"bounded by events: ended after {events:,} events") for n in
                   step["notes"]), step["notes"]  # fmt: skip
    finished = datetime.fromisoformat(first["finishedAt"].replace("Z", "+00:00"))
    started = datetime.fromisoformat(second["startedAt"].replace("Z", "+00:00"))
    assert (started - finished).total_seconds() >= 4, (finished, started)
