"""Real CPU and memory of processes from /proc: what the node agent's cAdvisor exports, and
what a test reads itself to check it.

CPU is utime+stime of /proc/<pid>/stat (every thread of the process) divided by
SC_CLK_TCK; memory is the resident set (rss pages times the page size). A `Counter` sums
a changing set of processes so that the sum never goes down, as a cgroup's cpuacct would
not: a process that exits keeps its last seconds, or passes them on to the parent that
reaped it (cutime+cstime).
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class ProcStat:
    """One process as /proc/<pid>/stat shows it now."""

    pid: int
    ppid: int
    session: int
    #: Start time in clock ticks since boot: with the pid, it names one process for good.
    start: int
    cpu_seconds: float
    #: cutime+cstime: the seconds of the children it has waited for.
    children_seconds: float
    rss_bytes: int


def read_stat(pid: int) -> ProcStat | None:
    """The process's stat, None when it is gone (or a kernel thread we cannot read)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ")".
    fields = text.rsplit(")", 1)[1].split()
    # fields[0] is field 3 (state): field n is fields[n - 3].
    return ProcStat(
        pid=pid,
        ppid=int(fields[1]),
        session=int(fields[3]),
        start=int(fields[19]),
        cpu_seconds=(int(fields[11]) + int(fields[12])) / CLK_TCK,
        children_seconds=(int(fields[13]) + int(fields[14])) / CLK_TCK,
        rss_bytes=int(fields[21]) * PAGE_SIZE,
    )


def scan() -> dict[int, ProcStat]:
    """Every process on the machine, read once."""
    found = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            stat = read_stat(int(entry.name))
            if stat is not None:
                found[stat.pid] = stat
    return found


class Counter:
    """Cumulative CPU seconds of the processes shown to it, a counter that never goes down.

    A process counts utime+stime plus the cutime+cstime of the children it has reaped (the
    kernel adds a reaped child's whole time there). A process gone from /proc counts no
    more when its parent is still shown (that parent reaped it: its seconds moved into the
    parent's), else it keeps its last seconds (reaped elsewhere: the time since its last
    sample is lost, as it is to any sampler).
    """

    def __init__(self) -> None:
        #: (pid, start) -> (seconds with reaped children, parent pid), as last seen.
        self._last: dict[tuple[int, int], tuple[float, int]] = {}
        #: (pid, start) -> seconds it used while not counted (before it was bound, say).
        self._uncounted: dict[tuple[int, int], float] = {}
        self._total = 0.0

    def count_from_now(self, procs: Iterable[ProcStat]) -> None:
        """Count these processes from now on only: what they used before (since birth, or
        since they were last shown) stays out, as a container's counter starts at its start."""
        for p in procs:
            key = (p.pid, p.start)
            now = p.cpu_seconds + p.children_seconds
            last = self._last.get(key, (0.0, 0))[0]
            self._uncounted[key] = self._uncounted.get(key, 0.0) + max(0.0, now - last)
            self._last[key] = (max(now, last), p.ppid)

    def update(self, procs: Iterable[ProcStat]) -> None:
        live = {(p.pid, p.start): p for p in procs}
        for key, p in live.items():
            before = self._last.get(key, (0.0, 0))[0]
            self._last[key] = (max(before, p.cpu_seconds + p.children_seconds), p.ppid)
        pids = {pid for pid, _ in live}
        total = 0.0
        for key, (seconds, ppid) in list(self._last.items()):
            if key not in live and ppid in pids:
                del self._last[key]  # in its parent's children's seconds from now on
                self._uncounted.pop(key, None)
            else:
                total += seconds - self._uncounted.get(key, 0.0)
        # A child gone before its parent's stat showed it reaped: wait for the next sample.
        self._total = max(self._total, total)

    @property
    def seconds(self) -> float:
        return self._total


def pid_file_pid(path: Path) -> int | None:
    """The pid a test bed pid file names (e.g. `<state>/mariadb.pid`), None when absent."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def mariadb_pid(state: Path) -> int | None:
    """The MariaDB stand-in server's pid (testbed.services starts `mariadbd` itself)."""
    return pid_file_pid(state / "mariadb.pid")


def burner_pids(namespace: str, pod: str, procs: dict[int, ProcStat] | None = None) -> list[int]:
    """The processes of the CPU burner the node agent runs for the pod (testbed.burner)."""
    procs = scan() if procs is None else procs
    found = []
    for pid in procs:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"testbed.burner" in argv and f"--pod={namespace}/{pod}".encode() in argv:
            found.append(pid)
    return found


class CpuSampler:
    """Samples the cumulative CPU seconds of some processes over time, in a thread.

    `pids` is called at every sample (a burner restarted with another rate has new pids);
    `samples` holds (time.time(), cumulative seconds). `cores(start, end)` is the mean
    over any window inside the sampled span, interpolating between samples.
    """

    def __init__(
        self, pids: Callable[[dict[int, ProcStat]], Iterable[int]], interval: float = 0.25
    ):
        self._pids = pids
        self._interval = interval
        self._counter = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.samples: list[tuple[float, float]] = []

    def __enter__(self) -> CpuSampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> None:
        procs = scan()
        self._counter.update(procs[p] for p in self._pids(procs) if p in procs)
        self.samples.append((time.time(), self._counter.seconds))

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.sample()

    def seconds_at(self, at: float) -> float:
        """Cumulative seconds at `at`, linear between the samples around it."""
        points = self.samples
        if not points or at < points[0][0] or at > points[-1][0]:
            raise ValueError(f"{at} is outside the sampled span")
        for (t0, s0), (t1, s1) in itertools.pairwise(points):
            if t0 <= at <= t1:
                return s0 if t1 == t0 else s0 + (s1 - s0) * (at - t0) / (t1 - t0)
        return points[-1][1]

    def cores(self, start: float, end: float) -> float:
        """Mean cores used from `start` to `end` (time.time() seconds)."""
        return (self.seconds_at(end) - self.seconds_at(start)) / (end - start)
