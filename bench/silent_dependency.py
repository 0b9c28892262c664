"""Benchmark: one normal run beside eight runs whose database accepts and never answers.

In memory, no test bed: the controller's Driver (its real scheduling loop, slots and thread
pool) on the fake API (tests/testbed/fake_kube.py). Eight *silent* runs sit in Preflight:
each look connects with the real MySQL adapter (adapters/mysql.py, the preflight's 5 s
timeout) to a port on 127.0.0.1 that accepts connections and never sends a byte, and looks
again 5 s later (Enforce's re-check). The *normal* run measures steps of `--step-seconds`:
it is looked at every second while a step runs (the reconciler's default), each look costs
`--look-ms` (its API calls), and the look that sees a step's end reads the clients' results
and starts the next step (`--finish-ms`). Its per-step controller overhead is the time from
one step's end to the next step's start.

Printed: the median overhead per step of the normal run alone, beside the eight silent runs,
and (the design before controller/lanes.py: every look holds its slot to the end, i.e.
no slow lane) beside them with the slow lane off (the MySQL greeting timeout still in: before
it, each silent look held its slot 65 s, not 5); medians over `--repeat` repetitions of
`--steps` steps each, and the ratios. Target: beside/alone within 1.2.

    make bench-stall        # or: .venv/bin/python bench/silent_dependency.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "operator"), str(ROOT / "tests")]

from testbed.fake_kube import FakeKube  # noqa: E402
from tidb_bench_operator.adapters import mysql  # noqa: E402
from tidb_bench_operator.controller.driver import Driver  # noqa: E402
from tidb_bench_operator.domain.queue import ADMITTED, Turn, queue_entry  # noqa: E402
from tidb_bench_operator.errors import DatabaseError  # noqa: E402
from tidb_bench_operator.reconcile.run import Outcome  # noqa: E402
from tidb_bench_operator.reconcile.schedule.reconciler import ScheduleOutcome  # noqa: E402

JSON = dict[str, Any]
TARGET = 1.2
SILENT_RUNS = 8
#: The preflight connector's timeout and Enforce's re-check interval.
PREFLIGHT_TIMEOUT, PREFLIGHT_RECHECK = 5.0, 5.0


class SilentPort:
    """A port on 127.0.0.1 that accepts every connection and never answers."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(128)
        self.port = int(self.listener.getsockname()[1])
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.held.append(conn)  # kept open, never written to

    def close(self) -> None:
        self.listener.close()
        for conn in self.held:
            conn.close()


class Api(FakeKube):
    """The fake API with what the Driver also writes."""

    def patch_benchmark_schedule_status(self, namespace: str, name: str, status: JSON) -> JSON:
        return {"metadata": {"name": name, "namespace": namespace}, "status": status}


class Runs:
    """The normal run's steps, and the silent runs' preflight against the silent port."""

    def __init__(self, port: int, steps: int, step_seconds: float, look: float, finish: float):
        self.port, self.steps, self.step_seconds = port, steps, step_seconds
        self.look, self.finish = look, finish
        self.step = -1
        self.step_end = 0.0
        self.overheads: list[float] = []
        self.done = asyncio.Event()
        self.loop: asyncio.AbstractEventLoop | None = None

    def reconcile(self, body: JSON, turn: Turn = ADMITTED) -> Outcome:
        if body["metadata"]["name"].startswith("silent"):
            dsn = mysql.DSN("127.0.0.1", self.port, "bench", "secret")
            try:
                with mysql.connect(dsn, timeout=PREFLIGHT_TIMEOUT):
                    pass
            except DatabaseError:
                pass
            return Outcome(status={}, requeue_seconds=PREFLIGHT_RECHECK)
        time.sleep(self.look)
        now = time.monotonic()
        if self.step >= 0 and now < self.step_end:
            return Outcome(status={})  # the step runs: looked at again in a second
        if self.step >= 0:
            time.sleep(self.finish)  # its clients' results read, stored
            self.overheads.append(time.monotonic() - self.step_end)
        self.step += 1
        if self.step == self.steps:
            assert self.loop is not None
            self.loop.call_soon_threadsafe(self.done.set)
            return Outcome(status={"phase": "Succeeded"})
        self.step_end = time.monotonic() + self.step_seconds
        return Outcome(status={"currentStep": self.step})

    def settled(self, body: JSON, status: JSON) -> JSON:
        return status

    def failed(self, body: JSON, exc: Exception) -> float:
        raise exc

    def forget(self, uid: str) -> None:
        pass

    def health(self) -> dict[str, str]:
        return {}


class Schedules:
    def reconcile(self, body: JSON) -> ScheduleOutcome:
        return ScheduleOutcome(status={}, next_time=None)


def run_body(name: str, cluster: str, phase: str) -> JSON:
    return {
        "metadata": {"name": name, "namespace": "bench", "uid": f"u-{name}", "generation": 1,
                     "creationTimestamp": "2026-01-01T00:00:00Z", "resourceVersion": "1"},
        "spec": {"cluster": {"name": cluster, "namespace": "tidb"},
                 "credentials": {"secretRef": {"name": "db"}},
                 "workloads": ["oltp_point_select"], "threads": [1]},
        "status": {"phase": phase},
    }  # fmt: skip


def once(args: argparse.Namespace, port: int, silent: int, slow_lane: bool) -> list[float]:
    """The normal run's per-step overheads with `silent` silent runs beside it."""
    api = Api()
    runs = Runs(port, args.steps, args.step_seconds, args.look_ms / 1000, args.finish_ms / 1000)
    driver = Driver(runs=runs, schedules=Schedules(), kube=api,
                    slow_looks=32 if slow_lane else 0)  # fmt: skip
    bodies = [run_body(f"silent-{i}", f"silent-{i}", "Preflight") for i in range(silent)]
    bodies.append(run_body("normal", "normal", "Running"))
    for body in bodies:
        api.add_run(body)
    index: dict[str, list[Any]] = {}
    for body in bodies:
        found = queue_entry(body)
        if found:
            index.setdefault(found[0], []).append(found[1])

    async def measure() -> None:
        runs.loop = asyncio.get_running_loop()
        loop = asyncio.create_task(driver.run())
        for body in bodies:
            driver.run_event("ADDED", body, index)
        await runs.done.wait()
        loop.cancel()

    asyncio.run(measure())
    return runs.overheads


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag, kind, default in (
        ("--repeat", int, 5), ("--steps", int, 6), ("--step-seconds", float, 2.3),
        ("--look-ms", float, 20.0), ("--finish-ms", float, 50.0),
        ("--old-repeat", int, 2),  # with the slow lane off (the design before; slow)
    ):  # fmt: skip
        p.add_argument(flag, type=kind, default=default)
    args = p.parse_args()
    silent = SilentPort()
    t0 = time.monotonic()
    dsn = mysql.DSN("127.0.0.1", silent.port, "bench", "secret")
    try:
        with mysql.connect(dsn, timeout=PREFLIGHT_TIMEOUT):
            pass
    except DatabaseError as exc:
        print(f"one preflight connect to the silent port: {time.monotonic() - t0:.1f} s ({exc})")
    alone: list[float] = []
    beside: list[float] = []
    old: list[float] = []
    rep_alone, rep_beside = [], []
    try:
        for i in range(args.repeat):  # alternated: the machine's drift hits both alike
            a = once(args, silent.port, 0, True)
            b = once(args, silent.port, SILENT_RUNS, True)
            alone += a
            beside += b
            rep_alone.append(statistics.median(a))
            rep_beside.append(statistics.median(b))
            print(f"repetition {i + 1}: median overhead per step alone {rep_alone[-1]:.3f} s, "
                  f"beside {SILENT_RUNS} silent runs {rep_beside[-1]:.3f} s")  # fmt: skip
        for _ in range(args.old_repeat):
            old += once(args, silent.port, SILENT_RUNS, False)
    finally:
        silent.close()
    m_alone, m_beside = statistics.median(alone), statistics.median(beside)
    ratio = m_beside / m_alone
    print()
    print(f"normal run, {args.steps} steps of {args.step_seconds:g} s, looks of "
          f"{args.look_ms:g} ms, {args.repeat} repetitions: per-step controller "
          f"overhead")  # fmt: skip
    print(f"{'':34} {'median (s)':>10} {'max (s)':>8} {'ratio':>6}")
    print(f"{'alone':34} {m_alone:10.3f} {max(alone):8.3f} {1.0:6.2f}")
    print(f"{f'beside {SILENT_RUNS} silent runs':34} {m_beside:10.3f} {max(beside):8.3f} "
          f"{ratio:6.2f}")  # fmt: skip
    if old:
        m_old = statistics.median(old)
        print(f"{'beside them, slow lane off (before)':34} {m_old:10.3f} {max(old):8.3f} "
              f"{m_old / m_alone:6.2f}")  # fmt: skip
    print(
        f"median of the repetitions' ratios: "
        f"{statistics.median(b / a for a, b in zip(rep_alone, rep_beside, strict=True)):.2f}"
    )
    ok = ratio <= TARGET
    print(f"target beside/alone <= {TARGET}: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
