"""A long run's size stays bounded: the status, the bytes each trial sends, the Jobs kept.

Before, every trial (its notes and disturbances) stayed in status.steps, each merge patch
resent the whole list, the results index was rewritten after every trial, and every
trial's Jobs were kept until the TTL: bytes sent grew with the square of the trials.
"""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import pairwise

from testbed.sizes import largest_run_steps_bytes, run_trials
from tidb_bench_operator.cli.sources import with_stored_trials
from tidb_bench_operator.domain.api.results import Latency, StepResult
from tidb_bench_operator.domain.api.run_status import StepStatus
from tidb_bench_operator.domain.api.trial import MAX_STATUS_TRIALS, STATUS_NOTE_CHARS, Trial, cut
from tidb_bench_operator.domain.status import steps_json_patch

#: The bound docs/how-a-run-goes.md states: status.steps of any run the schema allows, with
#: each step's server resources (domain/resources/bound.py: 64 KiB a run, a headline a step).
STEPS_BOUND = 1152 * 1024
#: What one trial may send at most (status patches) and write (results store), whatever
#: came before it: a bound that does not grow with the run.
PER_TRIAL_BOUND = 16 * 1024
NOW = datetime(2026, 12, 2, tzinfo=UTC)


def _result() -> StepResult:
    return StepResult(
        workload="oltp_point_select", threads=8, clients=1, tps=100.0, qps=100.0,
        read_qps=100.0, write_qps=0.0, other_qps=0.0, errors_per_sec=0.0,
        reconnects_per_sec=0.0, events=6000, duration_seconds=60.0, sysbench_version="1.0.20",
        latency_ms=Latency(min=0.1, avg=0.5, max=3.0, percentile=95, value=1.0),
    )  # fmt: skip


def test_the_largest_run_the_schema_allows_keeps_status_steps_under_the_bound() -> None:
    size, steps, listed = largest_run_steps_bytes()
    assert (steps, listed) == (352, MAX_STATUS_TRIALS // 352)
    assert size <= STEPS_BOUND, size


def test_a_measured_step_in_status_keeps_bounded_notes_and_compact_trials() -> None:
    full = Trial(round=0, result=_result(), valid=True, notes=["x"] * 9, finished_at=NOW)
    step = StepStatus(
        index=3, workload="oltp_point_select", threads=8, notes=[f"n{i}" for i in range(9)],
        job_names=["a"], pod_names=["b"], trials=[full] * 3,
    )  # fmt: skip
    kept = step.bounded(2)
    assert kept.notes == ["n0", "n1", "more notes: in the run's results store (document st3)",
                          "n7", "n8"]  # fmt: skip
    assert kept.bounded(2).notes == kept.notes, "bounding twice changes nothing"
    assert (kept.job_names, kept.pod_names, kept.trials_stored) == ([], [], 3)
    assert [t.model_dump(exclude_none=True) for t in kept.trials] == [
        {"round": 0, "qps": 100.0, "valid": True}
    ] * 2
    assert len(step.bounded(3).trials) == 3 and step.bounded(3).trials_stored is None


def test_a_long_run_sends_and_stores_a_bounded_amount_per_trial_and_keeps_few_jobs() -> None:
    rows = list(run_trials(threads=8, repeats=12, clients=2))
    assert len(rows) == 96
    sent = [b.patch_bytes - a.patch_bytes for a, b in pairwise(rows)]
    written = [b.store_written - a.store_written for a, b in pairwise(rows)]
    assert max(sent) <= PER_TRIAL_BOUND, max(sent)
    assert max(written) <= PER_TRIAL_BOUND, max(written)
    # Linear: the last trials send no more than twice what the first ones did.
    assert sum(sent[-10:]) <= 2 * sum(sent[:10]), (sent[:10], sent[-10:])
    assert max(r.jobs_alive for r in rows) <= 2 + 1, "the running trial's clients and prepare"
    assert rows[-1].status_bytes <= 64 * 1024, rows[-1].status_bytes


def test_a_patch_of_one_changed_step_replaces_that_step_alone() -> None:
    old = {"phase": "Running", "steps": [{"index": 0, "qps": 1.0}, {"index": 1}]}
    merge = {"currentStep": 1, "steps": [{"index": 0, "qps": 1.0}, {"index": 1, "qps": 2.0}]}
    assert steps_json_patch(old, merge) == [
        {"op": "add", "path": "/status/currentStep", "value": 1},
        {"op": "test", "path": "/status/steps/1/index", "value": 1},
        {"op": "replace", "path": "/status/steps/1", "value": {"index": 1, "qps": 2.0}},
    ]
    assert steps_json_patch(old, {"phase": "Succeeded"}) is None, "no steps: a merge patch"
    assert steps_json_patch({}, merge) is None, "the first steps: a merge patch"
    removal = steps_json_patch({**old, "waitingFor": "ns/a"}, {**merge, "waitingFor": None})
    assert removal is not None and {"op": "remove", "path": "/status/waitingFor"} in removal


def test_the_report_reads_the_trials_and_notes_status_left_to_the_store() -> None:
    status_steps = [
        {"index": 0, "qps": 5.0, "trials": [{"round": 0, "qps": 5.0}], "notes": ["a"]},
        {"index": 1, "qps": 6.0},
    ]
    full = {"round": 0, "qps": 5.0, "result": {"qps": 5.0}, "notes": ["warm-up"]}
    stored = [{"index": 0, "trials": [full], "notes": ["a", "b"], "qps": 1.0}]
    merged = with_stored_trials(status_steps, stored)
    assert merged == [
        {"index": 0, "qps": 5.0, "trials": [full], "notes": ["a", "b"]},
        {"index": 1, "qps": 6.0},
    ], "status's numbers stand; trials, notes and disturbances come from the store"


def test_a_long_note_in_status_keeps_its_beginning_and_what_happened_at_its_end() -> None:
    note = (
        "attempt 1 stopped at 2026-12-02T07:39:39+00:00: Job dbgone-s0-c0: sysbench 1.0.20: "
        "mysql_stmt_execute() returned error 2013 (Lost connection to server during query) "
        "at the 3rd query of the transaction; run again"
    )
    kept = cut(note)
    assert len(kept) == STATUS_NOTE_CHARS
    assert kept.startswith("attempt 1 stopped at 2026-12-02T07:39:39+00:00: Job dbgone-s0-c0")
    assert kept.endswith("; run again") and "…" in kept
    assert cut("short") == "short"
