"""What runs inside a benchmark pod (and behind `tidb-bench run`): one sysbench step, measured.

The result goes to the termination message (at most 4 KiB, read from pod status, so the
controller never depends on pod logs being readable); the full interval series is printed
as one `TIDB-BENCH-SERIES` line at the end of the log for the results ConfigMap.

Why over 500 lines: it is the whole of a benchmark pod's life (stopping on SIGTERM, running
sysbench with the password and certificates kept out of argv, the step, the dataset, the
entry point), each part used only here and by `tidb-bench run`.
"""

from __future__ import annotations

import os
import resource
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from tidb_bench_operator.adapters import mysql
from tidb_bench_operator.adapters.tls import context_from_dir, sysbench_tls_files
from tidb_bench_operator.config import Credentials
from tidb_bench_operator.domain.api.runner_message import (
    ClientCpu,
    DatasetReport,
    RunnerFailure,
    StepReport,
    failure,
)
from tidb_bench_operator.domain.manifests import USER_ENV
from tidb_bench_operator.domain.sysbench import (
    build_sysbench_argv,
    diagnose_failure,
    parse_sysbench_output,
    to_step_result,
)
from tidb_bench_operator.domain.sysbench.config_file import (
    PASSWORD_OPTION,
    config_line,
    uncarried,
)
from tidb_bench_operator.domain.sysbench.custom import CustomScript, custom_failure
from tidb_bench_operator.domain.sysbench.diagnose import QUEUE_FULL
from tidb_bench_operator.domain.sysbench.preset import events_note
from tidb_bench_operator.domain.sysbench.rate import QUEUE_FULL_NOTE, result_before_queue_full
from tidb_bench_operator.domain.sysbench.warmup import (
    analyze_statements,
    has_secondary_index,
    warmup_statements,
)
from tidb_bench_operator.domain.untrusted import HIDDEN_USER, hide_credentials
from tidb_bench_operator.errors import ParseError, SysbenchError, TidbBenchError

TERMINATION_LOG = "/dev/termination-log"
#: The most threads a prepare loads with (1.0.20's prepare is parallel: one table a thread).
PREPARE_THREADS = 8
# Above this share of the CPU the client had, the client itself may be the bottleneck
# (docs/field-story.md: a client path capped QPS at 10k while the cluster could do 49k).
CLIENT_SATURATION_SHARE = 0.9


@dataclass
class StepPlan:
    """One measured step, as the Job's args describe it (no credentials)."""

    workload: str
    threads: int
    duration: int
    host: str
    port: int
    db: str = "sbtest"
    tables: int = 1
    table_size: int = 10000
    warmup: int = 0
    report_interval: int = 10
    percentile: int = 95
    rand_type: str | None = None
    ignore_errors: str | None = None
    auto_inc: bool = True
    extra_args: list[str] = field(default_factory=list)
    start_at: datetime | None = None
    max_start_skew: float = 3.0
    #: The mounted MySQL client certificate Secret (ca.crt, tls.crt, tls.key); None: no TLS.
    tls_dir: str | None = None
    #: This client's share of a rate step's target (sysbench --rate, events/s); None: closed loop.
    rate: int | None = None
    #: The step ends after this many events (--events), durationSeconds its cap; None: time.
    events: int | None = None
    #: A custom workload's script (its ConfigMap mounted); None: the built-in `workload`.
    custom: CustomScript | None = None

    def dsn(self, creds: Credentials) -> mysql.DSN:
        """The runner's own SQL connection (dataset checks): with TLS when the plan has it."""
        tls = None if self.tls_dir is None else context_from_dir(self.tls_dir)
        return mysql.DSN(
            self.host,
            self.port,
            creds.user,
            creds.password,
            tls=tls,
            tls_source=f"the Secret mounted at {self.tls_dir}" if self.tls_dir else None,
            user_source=f"{USER_ENV} (the run's credentials Secret)",
        )


# ---------------------------------------------------------------------------- stopping
#: After SIGTERM, sysbench gets this long to exit before it is killed.
SYSBENCH_STOP_SECONDS = 2.0


class Stopper:
    """What a SIGTERM (the run deleted or cancelled, the pod evicted) does to the runner.

    The runner is PID 1 of its container, and a PID 1 without a handler ignores SIGTERM:
    sysbench would load the database for the whole grace period. So the handler stops the
    current sysbench (its own process group: SIGTERM, SIGKILL after SYSBENCH_STOP_SECONDS)
    and wakes a waiting rendezvous; the step then ends as a "cancelled" failure.
    """

    def __init__(self) -> None:
        self.requested = threading.Event()
        self.proc: subprocess.Popen[str] | None = None

    def handle(self, _signum: int, _frame: object = None) -> None:
        self.requested.set()
        self.kill(signal.SIGTERM)
        timer = threading.Timer(SYSBENCH_STOP_SECONDS, self.kill, args=(signal.SIGKILL,))
        timer.daemon = True
        timer.start()

    def kill(self, sig: int) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)

    def check(self) -> None:
        """Raise the "cancelled" failure once a stop was asked for."""
        if self.requested.is_set():
            raise SysbenchError(
                "cancelled", "the runner was stopped (SIGTERM: its pod was deleted or evicted)"
            )

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self.handle)
        signal.signal(signal.SIGINT, self.handle)


STOP = Stopper()


# ---------------------------------------------------------------------------- sysbench exec
def _config_file(creds: Credentials, directory: str) -> str:
    """A 0600 sysbench --config-file holding the password, so it is in no process argv.

    The value is quoted (domain/sysbench/config_file.py: sysbench cuts a bare one at
    whitespace); a password it cannot carry at all fails here, named by its kind only (the
    controller refuses such a password at Pending, so this is `tidb-bench run`'s check).
    """
    problem = uncarried(creds.password)
    if problem is not None:
        raise SysbenchError(
            "password", f"the password has {problem}: sysbench cannot be given it; change it"
        )
    line = config_line(PASSWORD_OPTION, creds.password)
    path = Path(directory) / "sysbench.cfg"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, stat.S_IRUSR | stat.S_IWUSR)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(line)
    return str(path)


def shown_argv(argv: Sequence[str]) -> str:
    """A sysbench command line to print: the user (a Secret's) and any password masked."""
    shown = []
    for arg in argv:
        if arg.startswith("--mysql-user="):
            arg = f"--mysql-user={HIDDEN_USER}"
        elif arg.startswith("--mysql-password="):
            arg = "--mysql-password=<password>"
        shown.append(arg)
    return " ".join(shown)


@dataclass
class Execution:
    """Output, exit code and CPU use of one sysbench process."""

    output: str
    exit_code: int
    wall_seconds: float
    cpu_seconds: float


def exec_sysbench(
    argv: Sequence[str],
    creds: Credentials,
    out: TextIO | None,
    prefix: str = "",
    tls_dir: str | None = None,
    lua_path: str | None = None,
) -> Execution:
    """Run sysbench with the password in a private config file; stream lines to `out`.

    With `tls_dir`, sysbench connects with `--mysql-ssl=on`, run in the private directory
    that holds the certificate files under the names it expects. With `lua_path` (a custom
    workload's directory, custom.py), LUA_PATH is set so its `require`s find its files.
    """
    with tempfile.TemporaryDirectory(prefix="tidb-bench-") as tmp:
        cfg = _config_file(creds, tmp)
        ssl_args: list[str] = []
        if tls_dir is not None:
            sysbench_tls_files(tls_dir, tmp)
            ssl_args = ["--mysql-ssl=on"]
        # --config-file must come before the test name to apply to the driver options.
        full = [argv[0], f"--config-file={cfg}", *ssl_args, *argv[1:]]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        STOP.check()
        try:
            # Its own process group, so that a stop reaches sysbench and anything it started.
            proc = subprocess.Popen(
                full,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                bufsize=1,
                process_group=0,
                cwd=tmp,
                env=None if lua_path is None else {**os.environ, "LUA_PATH": lua_path},
            )
        except FileNotFoundError as exc:
            raise SysbenchError(
                "not-installed",
                "sysbench is not installed or not on PATH (apt-get install sysbench)",
            ) from exc
        lines: list[str] = []
        STOP.proc = proc
        if STOP.requested.is_set():  # the signal came between the check and the start
            STOP.kill(signal.SIGKILL)
        with proc:  # closes the pipe (one fd per sysbench run otherwise leaks) and waits
            assert proc.stdout is not None
            for raw in proc.stdout:
                # MySQL errors name the account ('user'@'host'): hidden from the log and report.
                line = hide_credentials(raw, creds.user, creds.password)
                lines.append(line)
                if out is not None:
                    out.write(prefix + line)
                    out.flush()
        STOP.proc = None
        code = proc.returncode
        wall = time.monotonic() - start
        STOP.check()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Execution("".join(lines), code, wall, cpu)


def available_cpus() -> float:
    """CPUs this process may use: the cgroup v2 quota if set, else the affinity mask."""
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        if quota != "max":
            return int(quota) / int(period)
    except (OSError, ValueError):
        pass
    return float(len(os.sched_getaffinity(0)))


def connection_args(plan: StepPlan, creds: Credentials) -> dict[str, Any]:
    """The build_sysbench_argv arguments every command of a plan shares (a custom
    workload's script instead of the built-in test, without the sbtest tables' options)."""
    shared: dict[str, Any] = dict(
        workload=plan.workload,
        host=plan.host,
        port=plan.port,
        user=creds.user,
        db=plan.db,
        tables=plan.tables,
    )
    if plan.custom is not None:
        shared.update(tables=None, script=plan.custom.path, script_options=plan.custom.options)
    return shared


def exec_plan(
    plan: StepPlan, argv: Sequence[str], creds: Credentials, out: TextIO | None, prefix: str = ""
) -> Execution:
    """exec_sysbench with the plan's TLS and, for a custom workload, its Lua path."""
    lua_path = None if plan.custom is None else plan.custom.lua_path()
    return exec_sysbench(argv, creds, out, prefix=prefix, tls_dir=plan.tls_dir, lua_path=lua_path)


def _succeeded(ex: Execution, message: str, workload: str | None = None) -> Execution:
    """`ex` when sysbench exited 0; else the SysbenchError its output explains (or `message`)."""
    if ex.exit_code != 0:
        failure = diagnose_failure(parse_sysbench_output(ex.output, workload=workload))
        raise failure or SysbenchError("fatal", message)
    return ex


# ---------------------------------------------------------------------------- the step
def wait_for_start(start_at: datetime | None, now: Callable[[], datetime]) -> float:
    """Sleep until start_at; return how late we are (seconds, >= 0)."""
    if start_at is None:
        return 0.0
    delay = (start_at - now()).total_seconds()
    if delay > 0:
        STOP.requested.wait(delay)  # a stop ends the wait at once
        STOP.check()
        return 0.0
    return -delay


def run_step(
    plan: StepPlan,
    creds: Credentials,
    out: TextIO | None = sys.stdout,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> StepReport:
    """Warm up, measure, parse; returns the step's report (raises SysbenchError on failure)."""
    late = wait_for_start(plan.start_at, now)
    started_at = now()
    custom = plan.custom
    common: dict[str, Any] = dict(
        connection_args(plan, creds),
        threads=plan.threads,
        table_size=plan.table_size if custom is None else None,
        rand_type=plan.rand_type,
        ignore_errors=plan.ignore_errors,
        auto_inc=plan.auto_inc if custom is None else None,
        extra_args=(plan.extra_args if custom is None else custom.args)
        + ([f"--rate={plan.rate}"] if plan.rate else []),
    )
    notes: list[str] = []
    if plan.rate:
        notes.append(f"open loop at {plan.rate}/s (--rate): latency includes time queued")
    if plan.warmup > 0:
        # sysbench 1.0.20 has no --warmup-time (only its master branch has; `sysbench --help`
        # of 1.0.20 lists none): warm up with a separate run
        # of the same workload and threads, and discard its numbers.
        warm = build_sysbench_argv(command="run", time_seconds=plan.warmup, **common)
        if out is not None:
            out.write(f"tidb-bench: warm-up for {plan.warmup}s (results discarded)\n")
        w = exec_plan(plan, warm, creds, out, prefix="[warm-up] ")
        warmed = parse_sysbench_output(w.output, workload=plan.workload)
        full = plan.rate and any(line.startswith(QUEUE_FULL) for line in warmed.fatal)
        try:
            if not full:  # a warm-up whose queue filled still warmed: measuring says the rest
                _succeeded(w, f"warm-up exited {w.exit_code}", workload=plan.workload)
        except SysbenchError as exc:
            raise exc if custom is None else custom_failure(custom, exc) from exc
        notes.append(f"warm-up: a separate {plan.warmup}s run before measuring, discarded")
        if plan.rate:  # its queue ends with its process: measuring starts with none queued
            queued = "filled its queue" if full else f"left {warmed.queue_last or 0} queued"
            notes.append(f"warm-up at the same rate {queued}; measuring started with none queued")
    argv = build_sysbench_argv(
        command="run",
        time_seconds=plan.duration,
        report_interval=plan.report_interval,
        percentile=plan.percentile,
        histogram=True,
        events=plan.events,
        **common,
    )
    if out is not None:
        out.write("tidb-bench: " + shown_argv(argv) + "\n")
    ex = exec_plan(plan, argv, creds, out)
    parsed = parse_sysbench_output(ex.output, workload=plan.workload, threads=plan.threads)
    try:
        step = to_step_result(parsed, plan.workload, plan.threads)  # raises SysbenchError
    except (SysbenchError, ParseError) as exc:
        if custom is not None:
            raise custom_failure(custom, exc, exit_code=ex.exit_code) from exc
        kind = exc.kind if isinstance(exc, SysbenchError) else None
        before = result_before_queue_full(parsed, plan.workload, plan.threads)
        if kind != "rate-queue-full" or before is None:
            raise
        step = before
        notes.append(f"{exc}; {QUEUE_FULL_NOTE.format(before.duration_seconds)}")
    cpus = available_cpus()
    used = ex.cpu_seconds / ex.wall_seconds if ex.wall_seconds > 0 else 0.0
    saturated = used >= CLIENT_SATURATION_SHARE * cpus
    if saturated:
        notes.append(
            f"client CPU {used:.2f} of {cpus:g} cores: the client may be the bottleneck; "
            "give the runner more CPU or add clients"
        )
    if plan.events:
        notes.append(events_note(plan.events, step.events, step.duration_seconds, plan.duration))
    notes.extend(parsed.notes)
    return StepReport(
        result=step,
        started_at=started_at.isoformat(),
        late_seconds=round(late, 3),
        late=late > plan.max_start_skew,
        cpu=ClientCpu(used=round(used, 3), available=cpus, saturated=saturated),
        notes=notes,
        histogram=list(parsed.histogram or []),
        series=[i.model_dump(mode="json", by_alias=True) for i in parsed.intervals],
        queue_max=parsed.queue_max,
        queue_last=parsed.queue_last,
    )


def failure_report(exc: Exception) -> RunnerFailure:
    """The failure message for an exception: a sysbench failure's kind, else its type."""
    kind = exc.kind if isinstance(exc, SysbenchError) else type(exc).__name__
    return failure(kind, str(exc))


# ---------------------------------------------------------------------------- dataset
def sbtest_tables(n: int) -> list[str]:
    return [f"sbtest{i}" for i in range(1, n + 1)]


def prepare_dataset(
    plan: StepPlan, creds: Credentials, policy: str, out: TextIO | None = sys.stdout
) -> DatasetReport:
    """IfMissing: reuse tables whose row counts match; Always: drop and load; Never: check."""
    dsn = plan.dsn(creds)
    tables = sbtest_tables(plan.tables)
    with mysql.connect(dsn) as conn:
        if not mysql.database_exists(conn, plan.db):
            if policy == "Never":
                raise TidbBenchError(
                    f"database {plan.db!r} does not exist on {dsn.where()} and dataset.prepare "
                    "is Never; create and load it, or set dataset.prepare: IfMissing"
                )
            mysql.query(conn, f"CREATE DATABASE IF NOT EXISTS `{plan.db}`")
        counts = mysql.table_row_counts(conn, plan.db, tables)
    wrong = {t: c for t, c in counts.items() if c != plan.table_size}
    if policy == "Never":
        if wrong:
            raise TidbBenchError(
                f"dataset.prepare is Never but {plan.db} has "
                + ", ".join(
                    f"{t}: {'missing' if c is None else f'{c} rows'}" for t, c in wrong.items()
                )
                + f" (expected {plan.table_size} rows each); load it or set prepare: IfMissing"
            )
        return DatasetReport(action="verified", tables=len(tables))
    if policy == "IfMissing" and not wrong:
        if out is not None:
            out.write(
                f"tidb-bench: {len(tables)} tables with {plan.table_size} rows exist: reused\n"
            )
        return DatasetReport(action="reused", tables=len(tables))
    common: dict[str, Any] = dict(connection_args(plan, creds), extra_args=plan.extra_args)
    if any(c is not None for c in counts.values()):
        # Partial or stale tables (another size, an interrupted prepare): start over.
        ex = exec_sysbench(
            build_sysbench_argv(command="cleanup", **common), creds, out, tls_dir=plan.tls_dir
        )
        _succeeded(ex, f"sysbench cleanup exited {ex.exit_code}")
    argv = build_sysbench_argv(
        command="prepare",
        table_size=plan.table_size,
        auto_inc=plan.auto_inc,
        threads=min(plan.tables, PREPARE_THREADS),
        **common,
    )
    ex = exec_sysbench(argv, creds, out, tls_dir=plan.tls_dir)
    _succeeded(ex, f"sysbench prepare exited {ex.exit_code}: " + ex.output[-500:])
    reason = "missing" if all(c is None for c in counts.values()) else "stale"
    return DatasetReport(
        action="prepared", reason=reason, tables=len(tables), seconds=round(ex.wall_seconds, 1)
    )


def analyze_and_warm(
    plan: StepPlan,
    creds: Credentials,
    report: DatasetReport,
    *,
    analyze: bool,
    warm_up: bool,
    out: TextIO | None = sys.stdout,
) -> DatasetReport:
    """After prepare or reuse: ANALYZE TABLE every table, then read each through its index.

    The order is TiDB's sysbench procedure's: statistics first, then the cache is warmed last,
    so nothing the analysis reads evicts what the warm-up loaded. domain/warmup.py says why.
    """
    if not (analyze or warm_up):
        return report
    dsn = plan.dsn(creds)
    update: dict[str, Any] = {}
    with mysql.connect(dsn, timeout=30.0) as conn:
        if analyze:
            started = time.monotonic()
            mysql.run_statements(conn, analyze_statements(plan.db, plan.tables))
            update["analyzed"] = plan.tables
            update["analyze_seconds"] = round(time.monotonic() - started, 2)
        if warm_up:
            started = time.monotonic()
            statements = warmup_statements(
                plan.db, plan.tables, has_secondary_index(plan.extra_args)
            )
            mysql.run_statements(conn, statements)
            update["warmed"] = plan.tables
            update["warm_up_seconds"] = round(time.monotonic() - started, 2)
    if out is not None:
        out.write(f"tidb-bench: dataset practice {update}\n")
    return report.model_copy(update=update)


def cleanup_dataset(
    plan: StepPlan, creds: Credentials, out: TextIO | None = sys.stdout
) -> DatasetReport:
    """Drop the dataset's tables (`sysbench cleanup`)."""
    argv = build_sysbench_argv(command="cleanup", **connection_args(plan, creds))
    ex = exec_sysbench(argv, creds, out, tls_dir=plan.tls_dir)
    _succeeded(ex, f"sysbench cleanup exited {ex.exit_code}")
    return DatasetReport(action="cleaned", tables=plan.tables)
