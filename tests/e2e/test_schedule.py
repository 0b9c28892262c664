"""BenchmarkSchedule end to end: an every-minute schedule on the real API server, and a
regression planted in the MariaDB stand-in (its general query log, written to a table)."""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pymysql
import pytest
from kubernetes import client

from testbed.runs import GROUP, VERSION, create_run, get_run, run_manifest, wait_run

pytestmark = pytest.mark.e2e

SCHEDULES = "benchmarkschedules"
FINAL = ("Succeeded", "Failed", "Cancelled")
LABEL = "tidbbench.io/schedule"


# ---------------------------------------------------------------------- helpers
def schedule_manifest(name: str, mariadb: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A BenchmarkSchedule whose template is the fast run against the MariaDB stand-in."""
    template = run_manifest("unused", mariadb, durationSeconds=2)["spec"]
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "BenchmarkSchedule",
        "metadata": {"name": name},
        "spec": {"schedule": "* * * * *", "template": template, **spec},
    }


def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def get_schedule(api: client.ApiClient, ns: str, name: str) -> dict[str, Any]:
    return dict(custom(api).get_namespaced_custom_object(GROUP, VERSION, ns, SCHEDULES, name))


def runs_of(api: client.ApiClient, ns: str, schedule: str) -> list[dict[str, Any]]:
    items = custom(api).list_namespaced_custom_object(
        GROUP, VERSION, ns, "benchmarkruns", label_selector=f"{LABEL}={schedule}"
    )["items"]
    return sorted(items, key=lambda r: r["metadata"]["creationTimestamp"])


def schedule_events(core: client.CoreV1Api, ns: str, name: str) -> list[Any]:
    evs = core.list_namespaced_event(
        ns, field_selector=f"involvedObject.name={name},involvedObject.kind=BenchmarkSchedule"
    ).items
    return sorted(evs, key=lambda e: int(e.metadata.resource_version))


def ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def poll(predicate: Any, timeout: float, what: str, interval: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"{what} not seen within {timeout:.0f}s")


def sleep_until(when: datetime) -> None:
    time.sleep(max(0.0, (when - datetime.now(UTC)).total_seconds()))


def manual_run(name: str, schedule: str, mariadb: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A run made by hand for a schedule (what `kubectl create job --from=cronjob/x` is to Jobs)."""
    body = run_manifest(name, mariadb, **spec)
    body["metadata"]["labels"] = {LABEL: schedule}
    return body


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next(
        (c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None
    )


def step_qps(run: dict[str, Any]) -> dict[int, float]:
    return {s["threads"]: s["qps"] for s in run["status"]["steps"]}


# ---------------------------------------------------------------------- the every-minute schedule
def test_an_every_minute_schedule_fires_on_time_holds_back_under_forbid_trims_and_suspends(
    api: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    db_secret: str,
    mariadb: dict[str, Any],
    controller: Any,
) -> None:
    name = "minutely"
    now = datetime.now(UTC)
    if 60 - now.second < 12:  # leave time to arrange the Forbid case before the first fire
        sleep_until(now.replace(second=0, microsecond=0) + timedelta(minutes=1, seconds=1))
    custom(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, SCHEDULES,
        schedule_manifest(
            name, mariadb, concurrencyPolicy="Forbid", successfulRunsHistoryLimit=1,
            failedRunsHistoryLimit=1, regression={"baselineRuns": 2, "maxQpsDropPercent": 50},
        ),
    )  # fmt: skip
    first_fire = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)

    # Forbid: a run of the schedule made by hand is still active at the first fire time, so
    # that run is held back, and made once the manual run has finished.
    sleep_until(first_fire - timedelta(seconds=6))
    hold_for = int((first_fire - datetime.now(UTC)).total_seconds()) + 10
    create_run(
        api, namespace,
        manual_run("by-hand", name, mariadb, threads=[1], durationSeconds=hold_for,
                   extraArgs=["--rate=200"]),  # light: it holds the slot, not the server
    )  # fmt: skip
    skipped = poll(
        lambda: [e for e in schedule_events(core, namespace, name) if e.reason == "Skipped"],
        40,
        "a Skipped event while by-hand is active",
    )
    assert "concurrencyPolicy Forbid" in skipped[0].message
    assert "by-hand" in skipped[0].message
    assert [r["metadata"]["name"] for r in runs_of(api, namespace, name)] == ["by-hand"]
    by_hand = wait_run(api, namespace, "by-hand", timeout=150)
    assert by_hand["status"]["phase"] == "Succeeded"
    first = poll(
        lambda: [r for r in runs_of(api, namespace, name) if r["metadata"]["name"] != "by-hand"],
        20,
        "the held-back run after by-hand finished",
    )[0]
    fired = ts(first["metadata"]["annotations"]["tidbbench.io/scheduled-at"])
    # The first fire time, unless other suites' runs kept by-hand waiting past the next one:
    # then only the latest missed time gets a run.
    assert fired >= first_fire and fired.second == 0
    assert ts(first["metadata"]["creationTimestamp"]) >= ts(by_hand["status"]["finishedAt"])
    owner = first["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("BenchmarkSchedule", name)

    # On time: with nothing active, the next fire time gets its run within a few seconds.
    def idle() -> bool:
        runs = runs_of(api, namespace, name)
        return all((r.get("status") or {}).get("phase") in FINAL for r in runs) and not (
            get_schedule(api, namespace, name)["status"].get("active")
        )

    poll(idle, 180, "no active run of the schedule")
    next_fire = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    second_name = f"{name}-{int(next_fire.timestamp()) // 60}"
    second = poll(
        lambda: next(
            (r for r in runs_of(api, namespace, name) if r["metadata"]["name"] == second_name),
            None,
        ),
        75,
        f"run {second_name}",
    )
    late = ts(second["metadata"]["creationTimestamp"]) - next_fire
    assert timedelta(0) <= late <= timedelta(seconds=4), late

    # Suspend: no run for the next fire time; the active one still finishes and is recorded.
    custom(api).patch_namespaced_custom_object(
        GROUP, VERSION, namespace, SCHEDULES, name, {"spec": {"suspend": True}}
    )
    wait_run(api, namespace, second_name, timeout=150)
    sleep_until(next_fire + timedelta(minutes=1, seconds=6))
    after = f"{name}-{int(next_fire.timestamp()) // 60 + 1}"
    assert after not in [r["metadata"]["name"] for r in runs_of(api, namespace, name)]
    assert "Suspended" in [e.reason for e in schedule_events(core, namespace, name)]

    # History: successfulRunsHistoryLimit 1 keeps one run object (the newest), while
    # status.history keeps baselineRuns (2) entries, each with its steps.
    poll(lambda: len(runs_of(api, namespace, name)) == 1, 20, "runs trimmed to one")
    assert [r["metadata"]["name"] for r in runs_of(api, namespace, name)] == [second_name]
    status = get_schedule(api, namespace, name)["status"]
    assert len(status["history"]) == 2
    assert status["history"][-1]["name"] == second_name
    assert all(h["outcome"] == "Succeeded" and h["steps"] for h in status["history"])
    assert status["lastSuccessfulRun"] == second_name
    assert status["active"] == []
    print(
        f"\nschedule {name}: first fire {first_fire:%H:%M:%S} held back while by-hand ran, "
        f"made at {ts(first['metadata']['creationTimestamp']):%H:%M:%S}; {second_name} made "
        f"{late.total_seconds():.0f}s after {next_fire:%H:%M:%S}; nothing at the suspended "
        f"{next_fire + timedelta(minutes=1):%H:%M}; history {[h['name'] for h in status['history']]}"
    )


# ---------------------------------------------------------------------- regression
@contextlib.contextmanager
def general_log_to_table(mariadb: dict[str, Any]) -> Iterator[None]:
    """Turn on MariaDB's general query log, written to the mysql.general_log table.

    A real and common cause of a slower night: someone enables query logging to debug and
    forgets it. Every statement then also writes a row to a CSV table under a lock. Undone
    on exit, and the table emptied.
    """
    conn = pymysql.connect(unix_socket=str(mariadb["socket"]), user="root", autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("SET GLOBAL log_output = 'TABLE'")
            cur.execute("SET GLOBAL general_log = ON")
        yield
    finally:
        with conn.cursor() as cur:
            cur.execute("SET GLOBAL general_log = OFF")
            cur.execute("SET GLOBAL log_output = 'FILE'")
            cur.execute("TRUNCATE TABLE mysql.general_log")
        conn.close()


def test_a_planted_general_log_regression_is_flagged_and_five_runs_of_noise_are_not(
    api: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    db_secret: str,
    mariadb: dict[str, Any],
    controller: Any,
) -> None:
    name = "nightly"
    custom(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, SCHEDULES,
        schedule_manifest(
            name, mariadb, schedule="0 3 * * *", suspend=True, successfulRunsHistoryLimit=3,
            regression={"baselineRuns": 5, "maxQpsDropPercent": 25},
        ),
    )  # fmt: skip

    def recorded(run: str) -> dict[str, Any]:
        """The run once the schedule has recorded and judged it."""

        def judged() -> dict[str, Any] | None:
            obj = get_run(api, namespace, run)
            return obj if condition(obj, "Regressed") else None

        return dict(poll(judged, 20, f"Regressed condition on {run}"))

    noise: list[dict[int, float]] = []
    verdicts: list[str] = []
    for i in range(1, 6):
        run = f"noise-{i}"
        create_run(api, namespace, manual_run(run, name, mariadb, durationSeconds=3))
        assert wait_run(api, namespace, run, timeout=180)["status"]["phase"] == "Succeeded"
        judged = recorded(run)
        noise.append(step_qps(judged))
        cond = condition(judged, "Regressed")
        assert cond is not None
        verdicts.append(cond["status"])
        print(f"\n{run}: QPS {noise[-1]} Regressed={cond['status']}: {cond['message']}")
    assert verdicts == ["Unknown", "False", "False", "False", "False"]

    planted = "planted"
    create_run(api, namespace, manual_run(planted, name, mariadb, durationSeconds=3))
    # Plant only once the run holds the cluster (other suites' runs wait meanwhile), so the
    # slow-down hits this run alone.
    wait_run(api, namespace, planted, phases=("Preparing", "Running", "Succeeded", "Failed"))
    with general_log_to_table(mariadb):
        wait_run(api, namespace, planted, timeout=120)
    judged = recorded(planted)
    cond = condition(judged, "Regressed")
    assert cond is not None and cond["status"] == "True", cond
    print(f"\n{planted}: QPS {step_qps(judged)}: {cond['message']}")
    for threads in (2, 4):
        values = [n[threads] for n in noise]
        spread = (max(values) - min(values)) / statistics.median(values) * 100
        drop = (statistics.median(values) - step_qps(judged)[threads]) / statistics.median(values)
        print(
            f"threads {threads}: noise {values} spread {spread:.1f}%, planted {drop * 100:.1f}% lower"
        )

    events = [
        e
        for e in core.list_namespaced_event(
            namespace, field_selector=f"involvedObject.name={planted}"
        ).items
        if e.reason == "Regressed"
    ]
    assert events and events[0].type == "Warning"
    assert "baseline median" in events[0].message and "this run" in events[0].message
    assert "delta -" in events[0].message

    def flagged_and_trimmed() -> dict[str, Any] | None:
        st = dict(get_schedule(api, namespace, name)["status"])
        return st if st.get("regressed") and len(runs_of(api, namespace, name)) == 3 else None

    status = poll(flagged_and_trimmed, 20, "schedule regressed and runs trimmed to 3")
    assert status["lastSuccessfulRun"] == planted
    assert [h["name"] for h in status["history"]] == [f"noise-{i}" for i in range(2, 6)] + [planted]
    assert status["history"][-1]["regressed"] is True
    sched_cond = condition({"status": status}, "Regressed")
    assert sched_cond is not None and sched_cond["status"] == "True"
    assert [r["metadata"]["name"] for r in runs_of(api, namespace, name)] == [
        "noise-4",
        "noise-5",
        planted,
    ]
