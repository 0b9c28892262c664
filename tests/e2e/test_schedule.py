"""BenchmarkSchedule end to end: an every-minute schedule on the real API server, and a
regression planted on the MariaDB stand-in (a concurrent workload during one run)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from testbed.cluster import Testbed
from testbed.kube import stop_process, wait_for
from testbed.runs import (
    GROUP,
    VERSION,
    condition,
    create_run,
    get_run,
    run_manifest,
    tidb_bench_report,
    wait_run,
)

pytestmark = pytest.mark.e2e

SCHEDULES = "benchmarkschedules"
FINAL = ("Succeeded", "Failed", "Cancelled")
CLK_TCK = os.sysconf("SC_CLK_TCK")
# Noise runs are comparable when the foreign load during them differs by less than this.
COMPARABLE_CORES = 0.4
# Steps for the regression test. On 2 cores, 4 client threads oversubscribe the CPUs that
# MariaDB needs too: measured on a quiet machine, 3 s steps at 4 threads swung 54k-87k QPS
# (a noise run dropped 25.9% below its baseline median), at 2 threads 84k-101k. One thread
# is bimodal, whatever else runs: six 3 s sysbench runs in a row at 1 thread measured
# 28.9k, 19.6k, 10.3k, 5.6k, 5.0k and 3.6k QPS, at 2 threads 53k-59k, at 3 threads 36k-44k
# (a CI quiet night at 1 thread came out +29.1%, 95% CI up to +54.2%: Inconclusive). So the
# test measures at 2 and 3 threads, 3 trials each (the verdict is a rank test over trials).
# With other suites' load on the machine an undisturbed night measured 38% below its
# baseline at 1 thread (95% interval -46% … -16%), so the minimum effect is 50%, and the
# planted neighbour runs 16 threads (8 cost 55-90%); production's default stays 10% on
# quieter, bigger machines.
QUIET_STEPS: dict[str, Any] = {
    "threads": [2, 3],
    "durationSeconds": 3,
    "warmupSeconds": 1,
    "repeats": 3,
}
MIN_EFFECT = 50
# A run whose trials' coefficient of variation exceeds this was measured on a changing
# machine; the series is measured again (as for foreign load).
STEADY_CV = 30
# Four runs whose step medians spread wider than this (highest over lowest, per step) were
# measured on a machine whose run-to-run noise reaches the minimum effect: a quiet night
# then cannot be told from a change (seen at 1 thread: medians 7.4k-25.3k QPS in four runs
# at 0.04-0.37 foreign cores, 268%). The series is measured again, as for foreign load.
# Steady series at 2 and 3 threads spread up to 42% and judged every quiet night NoChange.
STEADY_SPREAD_PERCENT = 60
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


#: The waits poll once a second: the bed measures meanwhile, on two cores.
poll = partial(wait_for, interval=1.0)


def sleep_until(when: datetime) -> None:
    time.sleep(max(0.0, (when - datetime.now(UTC)).total_seconds()))


def manual_run(name: str, schedule: str, mariadb: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A run made by hand for a schedule (what `kubectl create job --from=cronjob/x` is to Jobs)."""
    body = run_manifest(name, mariadb, **spec)
    body["metadata"]["labels"] = {LABEL: schedule}
    return body


def step_qps(run: dict[str, Any]) -> dict[int, float]:
    return {s["threads"]: s["qps"] for s in run["status"]["steps"]}


@pytest.fixture
def ns(api: client.ApiClient, namespace: str, controller: Any) -> Iterator[str]:
    """The test's namespace; afterwards its schedules and runs are deleted and waited for
    while the controller still runs, so kopf's finalizers come off them. A run left behind
    in an active phase would hold the shared MariaDB target for every other suite."""
    yield namespace
    co = custom(api)
    for plural in (SCHEDULES, "benchmarkruns"):
        for obj in co.list_namespaced_custom_object(GROUP, VERSION, namespace, plural)["items"]:
            with contextlib.suppress(client.ApiException):
                co.delete_namespaced_custom_object(
                    GROUP, VERSION, namespace, plural, obj["metadata"]["name"]
                )
    poll(
        lambda: (
            not any(
                co.list_namespaced_custom_object(GROUP, VERSION, namespace, plural)["items"]
                for plural in (SCHEDULES, "benchmarkruns")
            )
        ),
        60,
        f"schedules and runs in {namespace} deleted",
    )


# ---------------------------------------------------------------------- the every-minute schedule
def test_an_every_minute_schedule_fires_on_time_holds_back_under_forbid_trims_and_suspends(
    api: client.ApiClient,
    core: client.CoreV1Api,
    ns: str,
    db_secret: str,
    mariadb: dict[str, Any],
) -> None:
    namespace = ns
    name = "minutely"
    now = datetime.now(UTC)
    if 60 - now.second < 12:  # leave time to arrange the Forbid case before the first fire
        sleep_until(now.replace(second=0, microsecond=0) + timedelta(minutes=1, seconds=1))
    custom(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, SCHEDULES,
        schedule_manifest(
            name, mariadb, concurrencyPolicy="Forbid", successfulRunsHistoryLimit=1,
            failedRunsHistoryLimit=1,
            regression={"baselineRuns": 2, "maxQpsDropPercent": 50, "trendRuns": 0},
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
class ForeignCpu:
    """CPU used on this machine by anything but the measured run, in cores, over a window.

    The test bed is one 2-core machine shared with other suites: their load halves a
    sweep's QPS when it comes and goes. Ours is MariaDB plus the node agent's children (the
    runner pods and their sysbench, counted once reaped); the rest of the busy time in
    /proc/stat is foreign.
    """

    def __init__(self, bed: Path) -> None:
        self.mariadb = int((bed / "mariadb" / "run" / "mysqld.pid").read_text())
        self.agent = int((bed / "agent.pid").read_text())
        self.start = self._sample()

    @staticmethod
    def _busy() -> float:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        # user nice system (idle iowait) irq softirq steal
        return sum(fields[i] for i in (0, 1, 2, 5, 6, 7)) / CLK_TCK

    @staticmethod
    def _used(pid: int, children: bool) -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])
        if children:
            ticks += int(fields[13]) + int(fields[14])
        return ticks / CLK_TCK

    def _sample(self) -> tuple[float, float, float]:
        ours = self._used(self.mariadb, False) + self._used(self.agent, True)
        return time.monotonic(), self._busy(), ours

    def cores(self) -> float:
        """Average foreign cores since this probe was made."""
        t0, busy0, ours0 = self.start
        t1, busy1, ours1 = self._sample()
        return ((busy1 - busy0) - (ours1 - ours0)) / max(t1 - t0, 1e-6)


@contextlib.contextmanager
def noisy_neighbour(mariadb: dict[str, Any], threads: int = 8) -> Iterator[None]:
    """Another workload on the same database while the run measures: sysbench oltp_read_only
    with `threads` threads, straight at the MariaDB stand-in (not through the controller).

    A real cause of a slow night: a report or batch job scheduled into the benchmark window.
    It only reads the sysbench table, and it is stopped on exit.
    """
    sysbench = shutil.which("sysbench")
    assert sysbench, "sysbench is part of the test bed"
    # The password in a 0600 config file, as the runner does it: never in a process argv.
    secrets_dir = tempfile.TemporaryDirectory(prefix="neighbour-")
    cfg = Path(secrets_dir.name) / "sysbench.cfg"
    cfg.touch(mode=0o600)
    cfg.write_text(f"mysql-password={mariadb['password']}\n")
    proc = subprocess.Popen(
        [
            sysbench, f"--config-file={cfg}", "oltp_read_only",
            f"--mysql-host={mariadb['host']}", f"--mysql-port={mariadb['port']}",
            f"--mysql-user={mariadb['user']}", f"--mysql-db={mariadb['database']}",
            "--tables=1", "--table-size=1000",
            f"--threads={threads}", "--time=300", "run",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        time.sleep(1)  # connected and loading before the measured step starts
        assert proc.poll() is None, "the neighbour sysbench exited at once"
        yield
    finally:
        stop_process(proc, 10)
        secrets_dir.cleanup()


# Serial (`make e2e`): its quiet nights must measure the same, which other suites' load on the
# same MariaDB and CPUs breaks by design (ForeignCpu measures how alone it was).
@pytest.mark.serial
def test_nightly_runs_with_three_trials_flag_a_planted_slowdown_and_not_a_quiet_night(
    api: client.ApiClient,
    core: client.CoreV1Api,
    ns: str,
    db_secret: str,
    mariadb: dict[str, Any],
    testbed: Testbed,
    tmp_path: Path,
) -> None:
    namespace = ns
    name = ""

    def recorded(run: str) -> dict[str, Any]:
        """The run once the schedule has recorded and judged it."""

        def judged() -> dict[str, Any] | None:
            obj = get_run(api, namespace, run)
            return obj if condition(obj, "Regressed") else None

        return dict(poll(judged, 20, f"Regressed condition on {run}"))

    def measure(run: str) -> tuple[dict[str, Any], float]:
        create_run(api, namespace, manual_run(run, name, mariadb, **QUIET_STEPS))
        # Generous: every suite's runs share the one MariaDB target, one at a time.
        wait_run(api, namespace, run, phases=("Preparing", "Running", *FINAL), timeout=300)
        probe = ForeignCpu(testbed.state)
        assert wait_run(api, namespace, run, timeout=240)["status"]["phase"] == "Succeeded"
        foreign = probe.cores()
        judged = recorded(run)
        cond = condition(judged, "Regressed")
        assert cond
        print(
            f"\n{run}: median QPS {step_qps(judged)}, foreign load {foreign:.2f} cores, "
            f"Regressed={cond['status']} ({cond['reason']}): {cond['message']}"
        )
        return judged, foreign

    # A baseline of three runs of 3 trials each, then a quiet night judged against its 9
    # trials per step. When another suite's load came or went between them (foreign CPU
    # differing by more than COMPARABLE_CORES), their differences are that load, not noise:
    # the series is measured again under a fresh schedule (three series at most), and the
    # test fails if the machine never stays steady for four runs.
    for attempt in range(3):
        name = f"nightly-{attempt}"
        custom(api).create_namespaced_custom_object(
            GROUP, VERSION, namespace, SCHEDULES,
            schedule_manifest(
                name, mariadb, schedule="0 3 * * *", suspend=True,
                successfulRunsHistoryLimit=3,
                regression={"baselineRuns": 3, "maxQpsDropPercent": MIN_EFFECT},
            ),
        )  # fmt: skip
        runs = [measure(f"{name}-base-{i}") for i in range(1, 4)]
        quiet, foreign = measure(f"{name}-quiet")
        loads = [f for _, f in runs] + [foreign]
        # Trials that disagree by more than STEADY_CV within one run mean the machine
        # changed under the run (seen: 1-thread QPS 14k in one run, 61k in the next).
        cvs = [
            (s.get("qpsTrials") or {}).get("cvPercent") or 0.0
            for r in [*(r for r, _ in runs), quiet]
            for s in r["status"]["steps"]
        ]
        medians = [step_qps(r) for r in [*(r for r, _ in runs), quiet]]
        spread = max(
            100.0 * (max(m[t] for m in medians) / max(min(m[t] for m in medians), 1.0) - 1.0)
            for t in medians[0]
        )
        steady = max(cvs) <= STEADY_CV and spread <= STEADY_SPREAD_PERCENT
        if max(loads) - min(loads) < COMPARABLE_CORES and steady:
            reasons = [(condition(r, "Regressed") or {}).get("reason") for r, _ in runs]
            assert reasons[0] == "InsufficientBaseline"
            assert reasons[1] == "Inconclusive", "3 trials against 3 cannot reach p < 0.05"
            assert reasons[2] != "QpsDrop"
            break
        print(
            f"foreign load varied {min(loads):.2f}-{max(loads):.2f} cores, trials' CV up to "
            f"{max(cvs):.0f}%, step medians spread {spread:.0f}%: not noise"
        )
    else:
        # Not a skip: a suite that cannot judge noise has not shown that noise is not flagged.
        pytest.fail(
            f"foreign CPU load varied by {COMPARABLE_CORES} cores or more, a run's trials "
            f"by more than {STEADY_CV}% CV, or the runs' step medians by more than "
            f"{STEADY_SPREAD_PERCENT}%, in all three series: "
            "run this test on a quiet machine (another suite shared the test bed)"
        )

    for step in quiet["status"]["steps"]:
        assert len(step["trials"]) == 3 and step["qpsTrials"]["n"] == 3
        assert step["qpsTrials"]["ciLow"] <= step["qps"] <= step["qpsTrials"]["ciHigh"]
    verdict = quiet["status"]["regression"]
    assert verdict["verdict"] == "NoChange", verdict
    assert all(s["baselineTrials"] == 9 and s["trials"] == 3 for s in verdict["steps"])
    assert (condition(quiet, "Regressed") or {}).get("status") == "False"

    planted = f"{name}-planted"
    create_run(api, namespace, manual_run(planted, name, mariadb, **QUIET_STEPS))
    # Plant only once the run holds the cluster (other suites' runs wait meanwhile), so the
    # slow-down hits this run alone.
    wait_run(
        api, namespace, planted, phases=("Preparing", "Running", "Succeeded", "Failed"), timeout=300
    )
    with noisy_neighbour(mariadb, threads=16):
        wait_run(api, namespace, planted, timeout=240)
    judged = recorded(planted)
    cond = condition(judged, "Regressed")
    assert cond and cond["status"] == "True", cond
    verdict = judged["status"]["regression"]
    assert verdict["verdict"] == "Regressed"
    flagged = [s for s in verdict["steps"] if s["verdict"] == "Regressed"]
    assert flagged, verdict
    for s in flagged:
        assert s["pValue"] < 0.05 and s["pAdjusted"] < 0.05
        assert s["intervalLowPercent"] <= s["effectPercent"] <= s["intervalHighPercent"]
        assert s["effectPercent"] <= -MIN_EFFECT
        print(
            f"threads {s['threads']}: {s['medianQps']:,.0f} vs {s['baselineMedianQps']:,.0f} "
            f"QPS, {s['effectPercent']:+.1f}% (95% CI {s['intervalLowPercent']:+.1f}% … "
            f"{s['intervalHighPercent']:+.1f}%), p {s['pValue']:.4f}, corrected {s['pAdjusted']:.4f}"
        )

    def regressed_events() -> list[Any]:
        return [
            e
            for e in core.list_namespaced_event(
                namespace, field_selector=f"involvedObject.name={planted}"
            ).items
            if e.reason == "Regressed"
        ]

    # The run's condition is patched before its Event is posted: wait for the Event.
    events = poll(regressed_events, 20, f"the Regressed Event of {planted}")
    assert events[0].type == "Warning"
    assert "(95% CI" in events[0].message and ", p 0.0" in events[0].message
    assert "3 vs 9 trials from 3 run(s)" in events[0].message

    def flagged_and_trimmed() -> dict[str, Any] | None:
        st = dict(get_schedule(api, namespace, name)["status"])
        return st if st.get("regressed") and len(runs_of(api, namespace, name)) == 3 else None

    status = poll(flagged_and_trimmed, 20, "schedule regressed and runs trimmed to 3")
    assert status["lastSuccessfulRun"] == planted and status["verdict"] == "Regressed"
    assert [h["name"] for h in status["history"]] == [
        *(f"{name}-base-{i}" for i in range(1, 4)),
        f"{name}-quiet",
        planted,
    ]
    assert [h.get("verdict") for h in status["history"]][-2:] == ["NoChange", "Regressed"]
    sched_cond = condition({"status": status}, "Regressed")
    assert sched_cond and sched_cond["status"] == "True"
    assert [r["metadata"]["name"] for r in runs_of(api, namespace, name)] == [
        f"{name}-base-3",
        f"{name}-quiet",
        planted,
    ]

    # The report of the planted night: each step's trials and interval in the table and on
    # the chart, and the verdict with its p-values under the schedule's baseline.
    chart = tmp_path / "planted.svg"
    report = tidb_bench_report(
        testbed.kubeconfig, planted, "--namespace", namespace, "--svg", str(chart)
    )
    print("\n" + report)
    assert "| QPS (median) | QPS 95% interval | CV |" in report
    for step in judged["status"]["steps"]:
        low, high = step["qpsTrials"]["ciLow"], step["qpsTrials"]["ciHigh"]
        assert (
            f"| {step['threads']} | {step['qps']:,.0f} | {low:,.0f}–{high:,.0f} (n=3) |" in report
        )
    assert "## Against the schedule's baseline" in report and "| **Regressed** |" in report
    svg = chart.read_text()
    assert svg.count('class="qps-interval"') == len(judged["status"]["steps"])
    assert svg.count('class="trial"') == 3 * len(judged["status"]["steps"])
    # The schedule's trend: its five nights, one panel per step.
    trend = tmp_path / "trend.svg"
    report = tidb_bench_report(
        testbed.kubeconfig, f"schedule/{name}", "--namespace", namespace, "--svg", str(trend)
    )
    assert f"| 5 | {planted} |" in report and "Latest verdict: **Regressed**" in report
    assert trend.read_text().count('class="trend"') == len(judged["status"]["steps"])
