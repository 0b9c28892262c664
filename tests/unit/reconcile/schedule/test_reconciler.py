"""ScheduleReconciler against the in-memory stand-in for the Kubernetes adapter and a fake clock."""

from __future__ import annotations

import copy
import statistics
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.fake_kube import FakeClock, FakeKube, rfc3339
from tidb_bench_operator.domain.api.resources import parse_schedule_spec
from tidb_bench_operator.domain.schedule import compute_run_name, next_fire_time
from tidb_bench_operator.reconcile.schedule.reconciler import ScheduleReconciler

JSON = dict[str, Any]
NS = "bench"
T0 = datetime(2026, 3, 1, 2, 0, 0, tzinfo=UTC)


LATENCY = {"min": 0.05, "avg": 0.08, "max": 2.0, "percentile": 95, "value": 0.1}


def _result(threads: int, qps: float) -> JSON:
    return {
        "workload": "oltp_point_select", "threads": threads, "clients": 1, "tps": qps,
        "qps": qps, "readQps": qps, "writeQps": 0.0, "otherQps": 0.0, "latencyMs": LATENCY,
        "errorsPerSec": 0.0, "reconnectsPerSec": 0.0, "events": int(qps * 10),
        "durationSeconds": 10.0, "sysbenchVersion": "1.0.20",
    }  # fmt: skip


def schedule_body(**spec: Any) -> JSON:
    body: JSON = {
        "apiVersion": "tidbbench.io/v1alpha1",
        "kind": "BenchmarkSchedule",
        "metadata": {
            "name": "nightly",
            "namespace": NS,
            "uid": "sched-uid",
            "generation": 1,
            "creationTimestamp": rfc3339(T0 - timedelta(seconds=30)),
        },
        "spec": {
            "schedule": "* * * * *",
            "template": {
                "target": {"host": "tidb.example", "port": 4000},
                "credentials": {"secretRef": {"name": "db"}},
                "threads": [2, 4],
            },
            **spec,
        },
        "status": {},
    }
    return body


class World:
    """A schedule, the reconciler and the fake API, with status patches applied as kopf would."""

    def __init__(self, **spec: Any) -> None:
        self.clock = FakeClock(T0)
        self.kube = FakeKube(self.clock)
        self.body = schedule_body(**spec)
        self.reconciler = ScheduleReconciler(self.kube, clock=self.clock)

    def tick(self) -> JSON:
        out = self.reconciler.reconcile(copy.deepcopy(self.body))
        status = self.body.setdefault("status", {})
        for key, value in out.status.items():
            if value is None:
                status.pop(key, None)
            else:
                status[key] = value
        return status

    def at(self, seconds_after_t0: float) -> JSON:
        self.clock.now = T0 + timedelta(seconds=seconds_after_t0)
        return self.tick()

    def run_names(self) -> list[str]:
        return sorted(name for _, name in self.kube.runs)

    def run(self, name: str) -> JSON:
        """The stored run (changing it changes what the API server holds)."""
        return self.kube.runs[(NS, name)]

    def reasons(self, kind: str = "BenchmarkSchedule") -> list[str]:
        return self.kube.event_reasons(kind)

    # ---- playing the run controller ------------------------------------------------------
    def finish(
        self,
        name: str,
        qps: dict[int, float] | dict[int, list[float]],
        phase: str = "Succeeded",
        fingerprint: JSON | None = None,
        cpu: dict[int, list[float]] | None = None,
    ) -> None:
        """Mark a run finished with these QPS per thread count (oltp_point_select); a list
        per thread count is that step's trials (spec.repeats), a number one measurement.
        `cpu`: per thread count, each trial's server CPU ms per query (resource data)."""
        steps = []
        for i, (threads, value) in enumerate(sorted(qps.items())):
            trials = value if isinstance(value, list) else []
            per_query = (cpu or {}).get(threads, [])
            median = statistics.median(trials) if trials else value
            steps.append(
                {
                    "index": i,
                    "workload": "oltp_point_select",
                    "threads": threads,
                    "phase": "Succeeded",
                    "qps": median,
                    "tps": median,
                    "valid": True,
                    "latencyMs": LATENCY,
                    "trials": [
                        {"round": r, "valid": True, "result": _result(threads, q)}
                        | ({"cpuMsPerQuery": per_query[r]} if per_query else {})
                        for r, q in enumerate(trials)
                    ],
                }
            )
        self.run(name)["status"] = {
            "phase": phase,
            "fingerprint": fingerprint,
            "steps": steps if phase == "Succeeded" else [],
            "startedAt": rfc3339(self.clock() - timedelta(seconds=20)),
            "finishedAt": rfc3339(self.clock()),
        }


def test_a_due_run_is_created_from_the_template_owned_by_and_labelled_for_the_schedule() -> None:
    world = World()
    status = world.at(1)
    [name] = world.run_names()
    run = world.run(name)
    assert name == f"nightly-{int(T0.timestamp()) // 60}"
    assert run["metadata"]["labels"]["tidbbench.io/schedule"] == "nightly"
    owner = run["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "BenchmarkSchedule",
        "nightly",
        "sched-uid",
    )
    assert run["metadata"]["annotations"]["tidbbench.io/scheduled-at"] == "2026-03-01T02:00:00Z"
    assert run["spec"] == world.body["spec"]["template"]
    assert status["lastScheduleTime"] == "2026-03-01T02:00:00Z"
    assert status["active"] == [name]
    assert world.reasons() == ["Scheduled"]


def test_looking_again_within_the_same_minute_creates_nothing_more() -> None:
    world = World()
    world.at(1)
    world.at(3)
    world.at(59)
    assert len(world.run_names()) == 1


def test_forbid_holds_the_next_run_back_while_one_is_active_with_one_event() -> None:
    world = World()
    world.at(1)
    status = world.at(61)
    world.at(63)
    assert len(world.run_names()) == 1
    assert world.reasons() == ["Scheduled", "Skipped"]
    assert "concurrencyPolicy Forbid" in status["message"]
    held = next(c for c in status["conditions"] if c["type"] == "Scheduling")
    assert (held["status"], held["reason"]) == ("False", "ConcurrencyForbid")


def test_the_held_back_run_starts_once_the_active_one_finishes() -> None:
    world = World()
    world.at(1)
    world.at(61)
    world.finish(world.run_names()[0], {2: 1000.0, 4: 1900.0})
    status = world.at(75)
    assert len(world.run_names()) == 2
    assert status["lastScheduleTime"] == "2026-03-01T02:01:00Z"


def test_allow_creates_beside_the_active_run() -> None:
    world = World(concurrencyPolicy="Allow")
    world.at(1)
    status = world.at(61)
    assert len(world.run_names()) == 2
    assert len(status["active"]) == 2


def test_replace_deletes_the_active_run_and_creates_the_new_one() -> None:
    world = World(concurrencyPolicy="Replace")
    world.at(1)
    first = world.run_names()[0]
    status = world.at(61)
    assert first not in world.run_names()
    assert status["active"] == world.run_names()
    assert "Replaced" in world.reasons()


def test_a_suspended_schedule_creates_nothing_and_says_so_once() -> None:
    world = World(suspend=True)
    status = world.at(1)
    world.at(61)
    assert world.run_names() == []
    assert world.reasons() == ["Suspended"]
    assert "suspended" in status["message"]


def test_after_controller_downtime_only_one_catch_up_run_is_made() -> None:
    world = World()
    world.at(1)
    world.finish(world.run_names()[0], {2: 1000.0})
    world.at(3600 + 1)  # an hour later: 60 fire times passed
    world.at(3600 + 3)
    assert len(world.run_names()) == 2


def test_finished_runs_beyond_the_limits_are_deleted_but_history_keeps_the_baseline() -> None:
    world = World(successfulRunsHistoryLimit=2, regression={"baselineRuns": 4})
    for minute in range(5):
        world.at(minute * 60 + 1)
        newest = max(world.run_names(), key=lambda n: int(n.rsplit("-", 1)[1]))
        world.finish(newest, {2: 1000.0 + minute, 4: 2000.0})
    status = world.at(5 * 60 + 1)
    kept = [n for n in world.run_names() if world.run(n).get("status")]
    assert len(kept) == 2
    assert len(world.kube.deleted_runs) == 3
    assert [h["name"] for h in status["history"]][-2:] == kept
    assert len(status["history"]) == 5  # regression.trendRuns (30) keeps all five
    assert all(h["steps"] for h in status["history"])


def test_a_failed_run_is_recorded_and_trimmed_by_the_failed_limit() -> None:
    world = World(failedRunsHistoryLimit=0)
    world.at(1)
    world.finish(world.run_names()[0], {}, phase="Failed")
    status = world.at(30)
    assert world.run_names() == []
    assert status["history"][0]["outcome"] == "Failed"


def test_the_first_successful_run_has_no_baseline_and_says_so_on_the_run() -> None:
    world = World()
    world.at(1)
    name = world.run_names()[0]
    world.finish(name, {2: 1000.0, 4: 2000.0})
    status = world.at(30)
    cond = next(c for c in world.run(name)["status"]["conditions"] if c["type"] == "Regressed")
    assert (cond["status"], cond["reason"]) == ("Unknown", "InsufficientBaseline")
    assert status["regressed"] is False
    assert status["lastSuccessfulRun"] == name
    assert status["lastPeakQps"] == 2000.0


def _noise_then(
    world: World,
    values: list[dict[int, list[float]]],
    cpu: list[dict[int, list[float]] | None] | None = None,
) -> JSON:
    status: JSON = {}
    for minute, qps in enumerate(values):
        world.at(minute * 60 + 1)
        newest = max(world.run_names(), key=lambda n: int(n.rsplit("-", 1)[1]))
        world.finish(newest, qps, cpu=cpu[minute] if cpu else None)
        status = world.at(minute * 60 + 30)
    return status


def _trials(level: float, jitter: float = 0.02) -> list[float]:
    return [level * (1 - jitter), level, level * (1 + jitter)]


NOISE = [1000.0, 960.0, 1030.0, 985.0, 1010.0, 950.0]


def test_run_to_run_noise_is_not_a_regression() -> None:
    world = World(regression={"baselineRuns": 5, "maxQpsDropPercent": 15})
    noise = [{2: _trials(q), 4: _trials(q * 1.9)} for q in NOISE]
    status = _noise_then(world, noise)
    assert status["regressed"] is False
    assert [h.get("regressed") for h in status["history"]] == [None] + [False] * 5
    assert [h.get("verdict") for h in status["history"]][:2] == ["Inconclusive", "Inconclusive"]
    assert status["history"][-1]["verdict"] == "NoChange"
    assert "Regressed" not in world.reasons()


def test_a_planted_drop_is_flagged_with_p_value_and_interval_on_the_run_and_schedule() -> None:
    world = World(
        regression={"baselineRuns": 5, "maxQpsDropPercent": 15}, successfulRunsHistoryLimit=10
    )
    noise = [{2: _trials(q), 4: _trials(q * 1.9)} for q in NOISE[:5]]
    status = _noise_then(world, [*noise, {2: _trials(640.0), 4: _trials(800.0)}])
    newest = max(world.run_names(), key=lambda n: int(n.rsplit("-", 1)[1]))
    run_status = world.run(newest)["status"]
    cond = next(c for c in run_status["conditions"] if c["type"] == "Regressed")
    assert (cond["status"], cond["reason"]) == ("True", "QpsDrop")
    verdict = run_status["regression"]
    assert verdict["verdict"] == "Regressed"
    four = next(s for s in verdict["steps"] if s["threads"] == 4)
    # 3 trials below all 15 baseline trials: the exact two-sided p is 2 / C(18, 3)
    assert four["pValue"] == pytest.approx(2 / 816, abs=1e-6)
    assert four["effectPercent"] == pytest.approx(-57.9, abs=0.1)
    assert four["intervalLowPercent"] <= four["effectPercent"] <= four["intervalHighPercent"] < -15
    assert status["regressed"] is True and status["verdict"] == "Regressed"
    assert status["history"][-1]["regressed"] is True
    assert status["history"][-1]["baselineQps"] == 1900.0
    sched = next(c for c in status["conditions"] if c["type"] == "Regressed")
    assert sched["status"] == "True"
    [event] = [
        e
        for e in world.kube.events
        if e["reason"] == "Regressed" and e["involvedObject"]["kind"] == "BenchmarkRun"
    ]
    assert event["type"] == "Warning"
    assert "oltp_point_select at 4 threads: 800 vs 1,900 QPS, -57.9% (95% CI" in event["message"]
    assert "3 vs 15 trials from 5 run(s)" in event["message"]


def test_a_run_measured_once_is_inconclusive_and_says_to_repeat() -> None:
    world = World(regression={"baselineRuns": 3, "maxQpsDropPercent": 15})
    status = _noise_then(world, [{2: [1000.0]}, {2: [1010.0]}, {2: [990.0]}, {2: [500.0]}])
    assert status["history"][-1]["verdict"] == "Inconclusive"
    assert status["regressed"] is False
    cond = next(c for c in status["conditions"] if c["type"] == "Regressed")
    assert (cond["status"], cond["reason"]) == ("Unknown", "Inconclusive")
    assert "spec.repeats >= 3" in str(world.run(max(world.run_names()))["status"])


def test_a_good_run_after_a_regression_clears_the_schedule_flag() -> None:
    world = World(regression={"baselineRuns": 3, "maxQpsDropPercent": 15})
    status = _noise_then(
        world,
        [{2: _trials(q)} for q in (1000.0, 1010.0, 990.0, 500.0, 1005.0, 1000.0)],
    )
    assert [h.get("regressed") for h in status["history"]][-3:] == [True, False, False]
    assert status["regressed"] is False


def test_the_fingerprint_diff_names_the_image_that_changed() -> None:
    world = World(regression={"baselineRuns": 2, "maxQpsDropPercent": 15})
    old = {"images": {"tidb": "pingcap/tidb:v8.1.0"}, "replicas": {"tidb": 2}}
    new = {"images": {"tidb": "pingcap/tidb:v8.1.1"}, "replicas": {"tidb": 2}}
    for minute, (level, fp) in enumerate(
        [(1000.0, old), (1000.0, old), (1000.0, old), (600.0, new)]
    ):
        world.at(minute * 60 + 1)
        newest = max(world.run_names(), key=lambda n: int(n.rsplit("-", 1)[1]))
        world.finish(newest, {2: _trials(level)}, fingerprint=fp)
        status = world.at(minute * 60 + 30)
    newest = max(world.run_names(), key=lambda n: int(n.rsplit("-", 1)[1]))
    run_status = world.run(newest)["status"]
    assert run_status["fingerprintDiff"] == ["tidb image pingcap/tidb:v8.1.0 → pingcap/tidb:v8.1.1"]
    cond = next(c for c in run_status["conditions"] if c["type"] == "Regressed")
    assert (
        "differs from the baseline: tidb image pingcap/tidb:v8.1.0 → pingcap/tidb:v8.1.1"
        in (cond["message"])
    )
    assert status["verdict"] == "Regressed"


def test_a_level_shift_in_the_history_is_a_change_point_named_by_its_first_run() -> None:
    world = World(
        regression={"baselineRuns": 3, "maxQpsDropPercent": 30}, successfulRunsHistoryLimit=1
    )
    levels = [1000.0, 1010.0, 995.0, 1005.0, 990.0, 1000.0, 880.0, 885.0, 870.0, 890.0, 875.0]
    names = []
    for minute, level in enumerate(levels):
        world.at(minute * 60 + 1)
        newest = max(world.run_names(), key=lambda n: int(n.rsplit("-", 1)[1]))
        names.append(newest)
        world.finish(newest, {2: _trials(level, 0.005)})
        status = world.at(minute * 60 + 30)
    [point] = status["changePoints"]
    assert (point["run"], point["previousRun"], point["threads"]) == (names[6], names[5], 2)
    assert point["changePercent"] == pytest.approx(-12, abs=1.5)
    assert world.reasons().count("ChangePoint") == 1
    assert len(status["history"]) == len(levels), "the trend outlives the deleted runs"


def test_an_invalid_spec_creates_nothing_and_says_which_field() -> None:
    world = World(timeZone="Mars/Olympus")
    status = world.at(1)
    assert world.run_names() == []
    assert "timeZone" in status["message"]
    assert world.reasons() == ["InvalidSpec"]
    world.at(3)
    assert world.reasons() == ["InvalidSpec"]


def test_a_cron_expression_the_library_rejects_is_reported_not_raised() -> None:
    world = World(schedule="61 * * * *")
    status = world.at(1)
    assert world.run_names() == []
    assert "schedule" in status["message"]


def test_a_run_created_by_hand_with_the_label_is_held_back_by_forbid_and_compared() -> None:
    world = World()
    world.clock.now = T0 - timedelta(seconds=10)
    world.kube.create_benchmark_run(
        {
            "metadata": {
                "name": "manual-1",
                "namespace": NS,
                "labels": {"tidbbench.io/schedule": "nightly"},
            },
            "spec": world.body["spec"]["template"],
        }
    )
    world.at(1)
    assert world.run_names() == ["manual-1"]
    assert world.reasons() == ["Skipped"]
    world.finish("manual-1", {2: 1000.0})
    status = world.at(20)
    assert len(world.run_names()) == 2
    assert status["history"][0]["name"] == "manual-1"


@pytest.mark.parametrize("policy", ["Forbid", "Allow", "Replace"])
def test_a_restart_before_the_status_patch_finds_the_run_instead_of_making_another(
    policy: str,
) -> None:
    world = World(concurrencyPolicy=policy)
    world.clock.now = T0 + timedelta(seconds=1)
    world.reconciler.reconcile(copy.deepcopy(world.body))  # status patch lost
    world.at(2)
    assert len(world.run_names()) == 1
    assert world.reasons() == ["Scheduled"]


def test_a_finished_run_whose_status_cannot_be_read_is_neither_recorded_nor_deleted() -> None:
    world = World(failedRunsHistoryLimit=0, successfulRunsHistoryLimit=0)
    world.at(1)
    name = world.run_names()[0]
    world.run(name)["status"] = {"phase": "Succeeded", "steps": [{"threads": "many"}]}
    status = world.at(30)
    assert world.run_names() == [name]
    assert status["history"] == []


def test_the_gitops_example_is_a_valid_schedule_that_fires_at_two_in_shanghai() -> None:
    root = Path(__file__).resolve().parents[4]
    doc = yaml.safe_load(
        (root / "examples/gitops/benchmarks/nightly-point-select.yaml").read_text()
    )
    spec = parse_schedule_spec(doc["spec"])
    fire = next_fire_time(spec, datetime(2026, 3, 1, 12, 0, tzinfo=UTC))
    assert fire == datetime(2026, 3, 1, 18, 0, tzinfo=UTC)  # 02:00 CST is 18:00 UTC the day before


def test_invalid_trials_never_enter_a_baseline_and_the_verdict_counts_them() -> None:
    world = World(regression={"baselineRuns": 3, "maxQpsDropPercent": 15})
    for minute, level in enumerate([1000.0, 1000.0, 1000.0, 1000.0]):
        world.at(minute * 60 + 1)
        newest = max(world.run_names(), key=lambda n: int(n.rsplit("-", 1)[1]))
        world.finish(newest, {2: _trials(level)})
        if minute == 1:  # a disturbed trial: 10 QPS, marked invalid
            trial = world.run(newest)["status"]["steps"][0]["trials"][1]
            trial["valid"] = False
            trial["result"]["qps"] = 10.0
        status = world.at(minute * 60 + 30)
    assert status["history"][1]["steps"][0]["trials"] == [980.0, 1020.0]
    assert status["history"][1]["invalidTrials"] == 1
    newest = max(world.run_names(), key=lambda n: int(n.rsplit("-", 1)[1]))
    verdict = world.run(newest)["status"]["regression"]
    assert verdict["excludedInvalid"] == 1 and verdict["steps"][0]["baselineTrials"] == 8
    assert "1 invalid trial(s) excluded" in verdict["message"]


OTHER_OWNER = {"kind": "BenchmarkSchedule", "name": "other", "uid": "other-uid"}


def test_a_foreign_run_holding_the_name_is_reported_and_never_adopted_as_created() -> None:
    world = World()
    world.clock.now = T0 + timedelta(seconds=1)
    due = T0.replace(second=0)
    name = compute_run_name("nightly", due, NS)
    world.kube.create_benchmark_run(
        {
            "metadata": {
                "name": name,
                "namespace": NS,
                "ownerReferences": [
                    {"kind": "BenchmarkSchedule", "name": "other", "uid": "other-uid"}
                ],
            },
            "spec": world.body["spec"]["template"],
        }
    )
    status = world.tick()
    condition = next(c for c in status["conditions"] if c["type"] == "Scheduling")
    assert condition["reason"] == "NameTaken"
    assert f"BenchmarkRun {NS}/{name} exists and is not owned by this schedule" in status["message"]
    assert world.reasons() == ["NameTaken"]
    assert name not in status.get("active", [])
    world.at(2)
    assert world.reasons() == ["NameTaken"], "reported once, not at every look"


def test_two_schedules_sharing_54_characters_get_their_own_runs_on_the_same_minute() -> None:
    stem = "n" * 54
    first = World()
    second = World()
    first.body["metadata"].update(name=stem + "-aaaaa", uid="uid-a")
    second.body["metadata"].update(name=stem + "-bbbbb", uid="uid-b")
    second.kube = first.kube
    second.reconciler = ScheduleReconciler(first.kube, clock=first.clock)
    second.clock = first.clock
    first.at(1)
    second.at(1)
    names = first.run_names()
    assert len(names) == 2 and all(len(n) <= 63 for n in names)
    assert second.reasons().count("Scheduled") == 2


# ------------------------------------------------------------------ efficiency (CPU per query)

#: Server CPU ms per query of a quiet night's trials (49k QPS on 5.6 cores: 0.114 ms).
CPU_NOISE = [0.114, 0.111, 0.117, 0.113, 0.116, 0.112]


def _efficiency_world(last_cpu: float) -> tuple[World, JSON]:
    """Five quiet nights, then one at the same QPS whose CPU per query is `last_cpu`."""
    world = World(
        regression={"baselineRuns": 5, "maxQpsDropPercent": 15}, successfulRunsHistoryLimit=10
    )
    qps = [{2: _trials(q), 4: _trials(q * 1.9)} for q in NOISE]
    cpu: list[dict[int, list[float]] | None] = [
        {2: _trials(c), 4: _trials(c * 1.1)} for c in [*CPU_NOISE[:5], last_cpu]
    ]
    return world, _noise_then(world, qps, cpu)


def test_cpu_per_query_up_forty_percent_at_the_same_qps_is_an_efficiency_regression() -> None:
    world, status = _efficiency_world(0.114 * 1.4)
    assert status["verdict"] != "Regressed" and status["regressed"] is False
    assert status["efficiency"] == "Regressed"
    assert status["history"][-1]["efficiency"] == "Regressed"
    assert status["history"][-1]["steps"][0]["cpuMsPerQuery"] == pytest.approx(_trials(0.114 * 1.4))
    newest = max(world.run_names(), key=lambda n: int(n.rsplit("-", 1)[1]))
    run_status = world.run(newest)["status"]
    verdict = run_status["efficiency"]
    assert verdict["metric"] == "cpuMsPerQuery" and verdict["verdict"] == "Regressed"
    two = next(s for s in verdict["steps"] if s["threads"] == 2)
    assert two["effectPercent"] == pytest.approx(40.0, abs=1.0)
    assert 15 < two["intervalLowPercent"] <= two["effectPercent"] <= two["intervalHighPercent"]
    conds = {c["type"]: c for c in run_status["conditions"]}
    assert (conds["EfficiencyRegressed"]["status"], conds["EfficiencyRegressed"]["reason"]) == (
        "True",
        "CpuPerQueryUp",
    )
    assert conds["Regressed"]["status"] != "True"
    sched = next(c for c in status["conditions"] if c["type"] == "EfficiencyRegressed")
    assert sched["status"] == "True"
    [event] = [
        e
        for e in world.kube.events
        if e["reason"] == "EfficiencyRegressed" and e["involvedObject"]["kind"] == "BenchmarkRun"
    ]
    assert event["type"] == "Warning"
    assert "0.16 vs 0.114 CPU ms/query, +40.0% (95% CI" in event["message"]


def test_cpu_per_query_noise_is_no_efficiency_change() -> None:
    world, status = _efficiency_world(CPU_NOISE[5])
    assert status["efficiency"] == "NoChange"
    assert "EfficiencyRegressed" not in world.reasons()
    sched = next(c for c in status["conditions"] if c["type"] == "EfficiencyRegressed")
    assert (sched["status"], sched["reason"]) == ("False", "NoChange")


def test_a_run_without_resource_data_gets_no_efficiency_verdict_and_says_so() -> None:
    world = World(regression={"baselineRuns": 3, "maxQpsDropPercent": 15})
    status = _noise_then(world, [{2: _trials(q)} for q in NOISE[:4]])
    assert "efficiency" not in status
    assert all("efficiency" not in h for h in status["history"])
    sched = next(c for c in status["conditions"] if c["type"] == "EfficiencyRegressed")
    assert (sched["status"], sched["reason"]) == ("Unknown", "NoResourceData")
    assert "no resource data" in sched["message"]
    newest = max(world.run_names(), key=lambda n: int(n.rsplit("-", 1)[1]))
    assert "efficiency" not in world.run(newest)["status"]
