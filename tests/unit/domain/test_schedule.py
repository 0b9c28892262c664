"""BenchmarkSchedule decisions on a controllable clock: fire times, zones, DST, catch-up, history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from tidb_bench_operator.domain.api.schedule import BenchmarkScheduleSpec, HistoryEntry
from tidb_bench_operator.domain.schedule import (
    ActiveRun,
    ScheduleState,
    compute_run_name,
    decide,
    history_entry,
    iter_fire_times,
    next_fire_time,
    trim_history,
)
from tidb_bench_operator.errors import SpecError

NEW_YORK = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")


def spec(schedule: str = "0 2 * * *", **extra: Any) -> BenchmarkScheduleSpec:
    """A schedule spec with a minimal template, plus `extra` fields (camelCase or snake)."""
    template = {"cluster": {"name": "basic"}, "credentials": {"secretRef": {"name": "creds"}}}
    return BenchmarkScheduleSpec.model_validate(
        {"schedule": schedule, "template": template, **extra}
    )


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


class Clock:
    """A controllable clock: tests move it instead of sleeping."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now


def state(last: datetime | None = None, created: datetime | None = None) -> ScheduleState:
    return ScheduleState(
        name="nightly", created_at=created or utc(2026, 1, 1), last_schedule_time=last
    )


def fire_times(s: BenchmarkScheduleSpec, after: datetime, count: int) -> list[datetime]:
    times = iter_fire_times(s, after)
    return [next(times) for _ in range(count)]


# --------------------------------------------------------------------------- fire times


def test_an_every_minute_schedule_fires_on_each_minute_boundary() -> None:
    s = spec("* * * * *")
    assert next_fire_time(s, utc(2026, 6, 1, 12, 0, 30)) == utc(2026, 6, 1, 12, 1)
    # Strictly after: a fire time equal to `after` is already past.
    assert next_fire_time(s, utc(2026, 6, 1, 12, 1)) == utc(2026, 6, 1, 12, 2)


def test_an_every_minute_schedule_creates_one_run_per_minute_as_the_clock_moves() -> None:
    s = spec("* * * * *")
    clock = Clock(utc(2026, 6, 1, 12, 0, 0))
    last: datetime | None = None
    created: list[str] = []
    for _ in range(5):  # look every 20 seconds until 12:01:40
        clock.advance(seconds=20)
        decision = decide(s, state(last, created=utc(2026, 6, 1, 11, 59, 50)), clock.now, [])
        if decision.action == "create":
            assert decision.run_name is not None and decision.scheduled_time is not None
            created.append(decision.run_name)
            last = decision.scheduled_time
    minutes = int(utc(2026, 6, 1, 12, 0).timestamp()) // 60
    assert created == [f"nightly-{minutes}", f"nightly-{minutes + 1}"]


def test_the_same_daily_time_is_a_different_instant_in_tokyo_and_utc() -> None:
    after = utc(2026, 6, 1, 0, 0)
    assert next_fire_time(spec("0 2 * * *"), after) == utc(2026, 6, 1, 2, 0)
    # 02:00 JST (UTC+9) is 17:00 UTC the day before; the first one after midnight UTC on
    # June 1st is June 1st 17:00 UTC (June 2nd 02:00 in Tokyo).
    tokyo = next_fire_time(spec("0 2 * * *", timeZone="Asia/Tokyo"), after)
    assert tokyo == utc(2026, 6, 1, 17, 0)
    assert tokyo.astimezone(ZoneInfo("Asia/Tokyo")).hour == 2


def test_fire_times_are_returned_in_utc_whatever_the_zone_of_after() -> None:
    after = datetime(2026, 6, 1, 9, 0, tzinfo=ZoneInfo("Asia/Tokyo"))
    fire = next_fire_time(spec("0 2 * * *"), after)
    assert fire == utc(2026, 6, 1, 2, 0) and fire.tzinfo is UTC


def test_macros_are_spelled_out_for_the_cron_library() -> None:
    assert next_fire_time(spec("@daily"), utc(2026, 6, 1, 5)) == utc(2026, 6, 2)
    assert next_fire_time(spec("@hourly"), utc(2026, 6, 1, 5, 10)) == utc(2026, 6, 1, 6)


def test_a_naive_after_is_refused_rather_than_guessed() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        next_fire_time(spec(), datetime(2026, 6, 1))


def test_an_expression_the_cron_library_rejects_is_a_spec_error_on_schedule() -> None:
    with pytest.raises(SpecError) as caught:
        next_fire_time(spec("61 2 * * *"), utc(2026, 6, 1))
    assert caught.value.field == "schedule"


# --------------------------------------------------------------------------- DST


def test_a_wall_time_skipped_by_spring_forward_fires_once_at_the_end_of_the_gap() -> None:
    # America/New_York, 2026-03-08: 02:00 EST jumps to 03:00 EDT, so 02:30 does not exist.
    # cronsim (like Debian cron) runs such a job immediately after the change: 03:00 EDT.
    times = fire_times(spec("30 2 * * *", timeZone="America/New_York"), utc(2026, 3, 7, 12), 3)
    local = [t.astimezone(NEW_YORK) for t in times]
    assert [(t.day, t.hour, t.minute) for t in local] == [(8, 3, 0), (9, 2, 30), (10, 2, 30)]
    assert times[0] == utc(2026, 3, 8, 7, 0)


def test_spring_forward_in_berlin_moves_the_0230_run_to_0300_cest() -> None:
    # Europe/Berlin, 2026-03-29: 02:00 CET jumps to 03:00 CEST.
    fire = next_fire_time(spec("30 2 * * *", timeZone="Europe/Berlin"), utc(2026, 3, 28, 12))
    assert fire == utc(2026, 3, 29, 1, 0)
    assert fire.astimezone(BERLIN).strftime("%H:%M %Z") == "03:00 CEST"


def test_a_wall_time_repeated_by_fall_back_fires_once_at_its_first_occurrence() -> None:
    # America/New_York, 2026-11-01: 01:59 EDT is followed by 01:00 EST; 01:30 happens twice.
    times = fire_times(spec("30 1 * * *", timeZone="America/New_York"), utc(2026, 10, 31, 12), 2)
    assert times == [utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]  # EDT, then EST


def test_after_the_first_pass_of_a_repeated_hour_the_second_pass_does_not_fire() -> None:
    first = utc(2026, 11, 1, 5, 30)  # 01:30 EDT, the run just made
    s = spec("30 1 * * *", timeZone="America/New_York")
    assert next_fire_time(s, first) == utc(2026, 11, 2, 6, 30)
    # Even asking from inside the second pass (01:15 EST) does not go back to 01:30 EDT.
    assert next_fire_time(s, utc(2026, 11, 1, 6, 15)) == utc(2026, 11, 2, 6, 30)


def test_fall_back_on_the_controller_clock_makes_exactly_one_run_for_the_repeated_hour() -> None:
    s = spec("30 1 * * *", timeZone="America/New_York")
    clock = Clock(utc(2026, 11, 1, 4, 0))
    last: datetime | None = None
    made: list[datetime] = []
    while clock.now < utc(2026, 11, 1, 9, 0):
        decision = decide(s, state(last, created=utc(2026, 11, 1, 4, 0)), clock.now, [])
        if decision.action == "create":
            assert decision.scheduled_time is not None
            made.append(decision.scheduled_time)
            last = decision.scheduled_time
        clock.advance(minutes=5)
    assert made == [utc(2026, 11, 1, 5, 30)]


def test_an_hourly_schedule_runs_in_real_hours_so_the_repeated_hour_fires_twice() -> None:
    # Debian cron (and cronsim) schedule jobs with `*` in the minute or hour field "normally":
    # two real hours pass during the repeated 01:00 hour, so an hourly job runs in both.
    times = fire_times(spec("0 * * * *", timeZone="America/New_York"), utc(2026, 11, 1, 4, 30), 3)
    assert times == [utc(2026, 11, 1, 5), utc(2026, 11, 1, 6), utc(2026, 11, 1, 7)]


# --------------------------------------------------------------------------- decide


def test_a_schedule_not_yet_due_does_nothing_and_says_when_it_will_fire() -> None:
    decision = decide(spec(), state(utc(2026, 6, 1, 2)), utc(2026, 6, 1, 14), [])
    assert decision.action == "nothing"
    assert decision.next_time == utc(2026, 6, 2, 2)
    assert "not due until 2026-06-02T02:00:00Z" in decision.reason


def test_a_due_run_is_created_with_a_name_derived_from_its_fire_time() -> None:
    due = utc(2026, 6, 2, 2)
    decision = decide(spec(), state(utc(2026, 6, 1, 2)), due + timedelta(seconds=5), [])
    assert decision.action == "create"
    assert decision.scheduled_time == due
    assert decision.run_name == f"nightly-{int(due.timestamp()) // 60}"
    assert decision.missed == 0
    assert decision.next_time == utc(2026, 6, 3, 2)


def test_a_restart_before_status_was_written_names_the_same_run_again() -> None:
    now = utc(2026, 6, 2, 2, 0, 30)
    first = decide(spec(), state(utc(2026, 6, 1, 2)), now, [])
    again = decide(spec(), state(utc(2026, 6, 1, 2)), now + timedelta(seconds=40), [])
    assert first.run_name == again.run_name


def test_a_due_run_that_already_exists_is_not_created_twice() -> None:
    now = utc(2026, 6, 2, 2, 0, 30)
    name = compute_run_name("nightly", utc(2026, 6, 2, 2))
    decision = decide(spec(), state(utc(2026, 6, 1, 2)), now, [ActiveRun(name=name)])
    assert decision.action == "nothing"
    assert decision.run_name == name
    assert "already exists" in decision.reason


def test_three_hours_of_downtime_on_an_hourly_schedule_make_exactly_one_catch_up_run() -> None:
    last = utc(2026, 6, 1, 9)
    now = utc(2026, 6, 1, 12, 20)  # 10:00, 11:00 and 12:00 were missed
    decision = decide(spec("0 * * * *"), state(last), now, [])
    assert decision.action == "create"
    assert decision.scheduled_time == utc(2026, 6, 1, 12)
    assert decision.missed == 2
    assert "3 fire times passed" in decision.reason
    assert "only the latest, 2026-06-01T12:00:00Z, gets a run" in decision.reason


def test_after_the_catch_up_run_the_next_look_creates_nothing_more() -> None:
    s = spec("0 * * * *")
    clock = Clock(utc(2026, 6, 1, 12, 20))
    first = decide(s, state(utc(2026, 6, 1, 9)), clock.now, [])
    assert first.action == "create" and first.scheduled_time is not None
    second = decide(s, state(first.scheduled_time), clock.advance(seconds=30), [])
    assert second.action == "nothing"


def test_months_of_downtime_on_an_every_minute_schedule_still_make_one_run() -> None:
    decision = decide(spec("* * * * *"), state(utc(2026, 1, 1)), utc(2026, 4, 1, 0, 0, 30), [])
    assert decision.action == "create"
    assert decision.scheduled_time == utc(2026, 4, 1)
    assert "100+ fire times passed" in decision.reason


def test_a_missed_run_older_than_the_starting_deadline_is_skipped_and_the_reason_says_so() -> None:
    s = spec("0 2 * * *", startingDeadlineSeconds=600)
    decision = decide(s, state(utc(2026, 6, 1, 2)), utc(2026, 6, 2, 5), [])
    assert decision.action == "nothing"
    assert decision.run_name is None
    assert decision.scheduled_time == utc(2026, 6, 2, 2)
    assert "startingDeadlineSeconds (600s)" in decision.reason
    assert "10800s late" in decision.reason
    assert decision.next_time == utc(2026, 6, 3, 2)


def test_a_late_run_within_the_starting_deadline_is_still_created() -> None:
    s = spec("0 2 * * *", startingDeadlineSeconds=600)
    decision = decide(s, state(utc(2026, 6, 1, 2)), utc(2026, 6, 2, 2, 5), [])
    assert decision.action == "create"
    assert "300s late" in decision.reason


def test_forbid_skips_while_a_run_is_active_and_names_it() -> None:
    active = [ActiveRun(name="nightly-29650000")]
    decision = decide(spec(), state(utc(2026, 6, 1, 2)), utc(2026, 6, 2, 2, 0, 10), active)
    assert decision.action == "skip"
    assert decision.run_name is None and decision.delete_runs == ()
    assert "Forbid" in decision.reason and "nightly-29650000" in decision.reason


def test_forbid_creates_the_held_back_run_once_the_active_one_finished() -> None:
    s = spec()
    clock = Clock(utc(2026, 6, 2, 2, 0, 10))
    active = [ActiveRun(name="nightly-29650000")]
    assert decide(s, state(utc(2026, 6, 1, 2)), clock.now, active).action == "skip"
    later = decide(s, state(utc(2026, 6, 1, 2)), clock.advance(minutes=20), [])
    assert later.action == "create" and later.scheduled_time == utc(2026, 6, 2, 2)


def test_allow_creates_beside_an_active_run() -> None:
    active = [ActiveRun(name="nightly-29650000")]
    s = spec(concurrencyPolicy="Allow")
    decision = decide(s, state(utc(2026, 6, 1, 2)), utc(2026, 6, 2, 2, 0, 10), active)
    assert decision.action == "create"
    assert decision.delete_runs == ()
    assert "Allow" in decision.reason


def test_replace_returns_the_active_runs_to_delete_before_creating() -> None:
    active = [ActiveRun(name="nightly-a"), ActiveRun(name="nightly-b")]
    s = spec(concurrencyPolicy="Replace")
    decision = decide(s, state(utc(2026, 6, 1, 2)), utc(2026, 6, 2, 2, 0, 10), active)
    assert decision.action == "replace"
    assert decision.delete_runs == ("nightly-a", "nightly-b")
    assert decision.run_name == compute_run_name("nightly", utc(2026, 6, 2, 2))


def test_replace_with_nothing_active_is_a_plain_create() -> None:
    s = spec(concurrencyPolicy="Replace")
    decision = decide(s, state(utc(2026, 6, 1, 2)), utc(2026, 6, 2, 2, 0, 10), [])
    assert decision.action == "create"


def test_a_suspended_schedule_does_nothing_even_when_runs_are_due() -> None:
    decision = decide(spec(suspend=True), state(utc(2026, 6, 1, 2)), utc(2026, 6, 5), [])
    assert decision.action == "nothing"
    assert decision.run_name is None
    assert "suspend" in decision.reason


def test_a_new_schedule_does_not_fire_for_times_before_it_was_created() -> None:
    created = utc(2026, 6, 1, 3)
    decision = decide(spec(), state(None, created=created), utc(2026, 6, 1, 4), [])
    assert decision.action == "nothing"
    decision = decide(spec(), state(None, created=created), utc(2026, 6, 2, 2, 0, 5), [])
    assert decision.action == "create" and decision.scheduled_time == utc(2026, 6, 2, 2)


def test_a_long_schedule_name_is_shortened_so_the_run_name_fits_63_characters() -> None:
    name = compute_run_name("n" * 70, utc(2026, 6, 2, 2))
    assert len(name) == 63 and name.endswith(f"-{int(utc(2026, 6, 2, 2).timestamp()) // 60}")


# --------------------------------------------------------------------------- history


def entry(name: str, outcome: str) -> HistoryEntry:
    return HistoryEntry.model_validate({"name": name, "outcome": outcome})


def test_history_trimming_keeps_the_newest_runs_of_each_outcome() -> None:
    entries = [
        entry("s1", "Succeeded"),
        entry("f1", "Failed"),
        entry("s2", "Succeeded"),
        entry("c1", "Cancelled"),
        entry("s3", "Succeeded"),
        entry("s4", "Succeeded"),
        entry("f2", "Failed"),
    ]
    keep, delete = trim_history(entries, successful_limit=3, failed_limit=1)
    assert [e.name for e in keep] == ["s2", "s3", "s4", "f2"]
    assert delete == ["s1", "f1", "c1"]


def test_history_within_the_limits_deletes_nothing() -> None:
    entries = [entry("s1", "Succeeded"), entry("f1", "Failed")]
    assert trim_history(entries, 3, 1) == (entries, [])


def test_a_limit_of_zero_deletes_every_run_of_that_outcome() -> None:
    entries = [entry("s1", "Succeeded"), entry("f1", "Failed")]
    keep, delete = trim_history(entries, 3, 0)
    assert [e.name for e in keep] == ["s1"] and delete == ["f1"]


def test_a_history_entry_takes_the_peak_from_the_summary() -> None:
    status = {
        "phase": "Succeeded",
        "summary": {"peakQps": 49193.0, "peakThreads": 128},
        "finishedAt": "2026-06-02T02:40:00Z",
    }
    made = history_entry("nightly-1", status)
    assert (made.name, made.outcome, made.peak_qps) == ("nightly-1", "Succeeded", 49193.0)
    assert made.finished_at == utc(2026, 6, 2, 2, 40)


def test_a_history_entry_without_a_summary_uses_the_best_valid_step() -> None:
    steps = [
        {"index": 0, "workload": "oltp_point_select", "threads": 64, "qps": 39562.0},
        {
            "index": 1,
            "workload": "oltp_point_select",
            "threads": 128,
            "qps": 60000.0,
            "valid": False,
        },
        {"index": 2, "workload": "oltp_point_select", "threads": 256, "qps": 44952.0},
    ]
    made = history_entry("nightly-1", {"phase": "Failed", "steps": steps})
    assert made.outcome == "Failed" and made.peak_qps == 44952.0


def test_a_running_run_has_no_history_entry_yet() -> None:
    with pytest.raises(ValueError, match="not finished"):
        history_entry("nightly-1", {"phase": "Running"})


def test_a_cut_run_name_carries_a_hash_of_the_schedule_so_shared_beginnings_differ() -> None:
    at = utc(2026, 6, 2, 2)
    a = compute_run_name("n" * 54 + "-aaaaa", at, "bench")
    b = compute_run_name("n" * 54 + "-bbbbb", at, "bench")
    other_ns = compute_run_name("n" * 54 + "-aaaaa", at, "team-b")
    assert len({a, b, other_ns}) == 3
    assert all(len(n) <= 63 for n in (a, b, other_ns))
    assert a == compute_run_name("n" * 54 + "-aaaaa", at, "bench"), "the same time, the same name"
    assert a.endswith(f"-{int(at.timestamp()) // 60}")


def test_a_name_that_fits_is_not_changed() -> None:
    assert compute_run_name("nightly", utc(2026, 6, 2, 2), "bench") == compute_run_name(
        "nightly", utc(2026, 6, 2, 2)
    )


def test_rate_steps_stay_out_of_the_history_a_regression_is_judged_on() -> None:
    from tidb_bench_operator.domain.api.run_status import BenchmarkRunStatus
    from tidb_bench_operator.domain.schedule import compute_history_steps

    def done(**extra: Any) -> dict[str, Any]:
        return {"workload": "oltp_point_select", "threads": 4, "phase": "Succeeded",
                "valid": True, "qps": 1000.0, **extra}  # fmt: skip

    status = BenchmarkRunStatus.model_validate(
        {"steps": [done(index=0), done(index=1, threads=8), done(index=2, targetRate=1000)]}
    )
    assert [(s.threads, s.qps) for s in compute_history_steps(status)] == [(4, 1000.0), (8, 1000.0)]
