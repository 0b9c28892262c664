"""sysbench 1.0.20/1.1: argv building, output parsing, failure diagnosis and combining clients."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from tidb_bench_operator.domain.results import Latency, StepResult
from tidb_bench_operator.errors import ParseError, SpecError, SysbenchError

# --------------------------------------------------------------------------------------
# Workloads and options
# --------------------------------------------------------------------------------------

#: The OLTP Lua tests Debian's sysbench 1.0.20 installs under /usr/share/sysbench/ (also
#: the CRD's enum for spec.workloads: domain/models.py uses this type).
Workload = Literal[
    "oltp_point_select",
    "oltp_read_only",
    "oltp_read_write",
    "oltp_write_only",
    "oltp_update_index",
    "oltp_update_non_index",
    "oltp_insert",
    "oltp_delete",
    "select_random_points",
    "select_random_ranges",
    "bulk_insert",
]
LUA_WORKLOADS: tuple[str, ...] = get_args(Workload)

#: --rand-type values of 1.0.20 (master drops `special` and adds `zipfian`; FACTS.md 5.7).
RAND_TYPES: tuple[str, ...] = ("uniform", "gaussian", "special", "pareto")

Command = Literal["prepare", "run", "cleanup"]

_BOOL_VALUES = frozenset({"on", "off", "true", "false", "yes", "no", "1", "0"})

#: sysbench options a spec may pass through `extraArgs`, with the kind of value each takes.
#: This is the one allow-list (the spec validator and the runner both use it). Everything
#: the builder sets itself (threads, time, connection, password, tables, ...) is in
#: OWNED_OPTIONS instead; everything that reads local files or changes what the process
#: executes (--config-file, --luajit-cmd, --mysql-socket), or what its output means
#: (--verbosity, --forced-shutdown, --histogram), is deliberately absent.
EXTRA_ARG_KINDS: dict[str, str] = {
    "range-size": "int",
    "point-selects": "int",
    "simple-ranges": "int",
    "sum-ranges": "int",
    "order-ranges": "int",
    "distinct-ranges": "int",
    "index-updates": "int",
    "non-index-updates": "int",
    "delete-inserts": "int",
    "range-selects": "bool",
    "skip-trx": "bool",
    "secondary": "bool",
    "create-secondary": "bool",
    "mysql-storage-engine": "word",
    "db-ps-mode": "ps-mode",
    "rand-spec-iter": "int",
    "rand-spec-pct": "int",
    "rand-spec-res": "number",
    "rand-pareto-h": "number",
    "rand-seed": "int",
    # 1.0.20's --mysql-ssl=on reads client-key.pem, client-cert.pem and cacert.pem from the
    # working directory (FACTS.md 5.7): the runner has to put them there.
    "mysql-ssl": "bool",
    "mysql-compression": "bool",
    # --rate turns the run into a fixed-arrival-rate latency test: results are then capped
    # by design, which is legitimate but must be asked for explicitly.
    "rate": "int",
    "thread-stack-size": "size",
}

#: Options the builder owns, with the spec field a user should set instead.
OWNED_OPTIONS: dict[str, str] = {
    "threads": "threads",
    "num-threads": "threads",
    "time": "durationSeconds",
    "max-time": "durationSeconds",
    "events": "durationSeconds",
    "max-requests": "durationSeconds",
    "report-interval": "reportIntervalSeconds",
    "percentile": "percentile",
    "histogram": "percentile",
    "rand-type": "randType",
    "tables": "dataset.tables",
    "table-size": "dataset.tableSize",
    "auto-inc": "dataset.autoInc",
    "mysql-ignore-errors": "ignoreErrors",
    "mysql-host": "target.host",
    "mysql-port": "target.port",
    "mysql-user": "credentials.userKey",
    "mysql-password": "credentials.passwordKey",
    "mysql-db": "database",
    "db-driver": "target (always the mysql driver)",
    "warmup-time": "warmupSeconds (sysbench 1.0.20 has no --warmup-time)",
}

_ARG_RE = re.compile(r"--(?P<name>[a-z][a-z0-9_-]*)(?:=(?P<value>[^=].*))?", re.DOTALL)
# Patterns below are used with fullmatch: `$` would accept a trailing newline.
_SAFE_VALUE_RE = re.compile(r"[A-Za-z0-9_.,:+/%-]+")
_SAFE_NAME_RE = re.compile(r"[A-Za-z0-9_.:@%/-]+")
_DB_NAME_RE = re.compile(r"[A-Za-z0-9_$]{1,64}")
_IGNORE_CODE_RE = re.compile(r"[0-9]{1,5}")


def validate_workload(name: str, *, field: str = "workloads") -> str:
    """Return `name` if it is a Lua test sysbench 1.0.20 ships, else raise SpecError."""
    if name not in LUA_WORKLOADS:
        raise SpecError(
            field,
            f"unknown sysbench workload {name!r}",
            "one of: " + ", ".join(LUA_WORKLOADS),
        )
    return name


def _check_extra_value(name: str, kind: str, value: str | None) -> str | None:
    """Return a problem description when `value` does not fit option `name`, else None."""
    if value is None:
        # sysbench reads a bare `--flag` as `--flag=on`; only booleans may be bare.
        return None if kind == "bool" else f"--{name} needs a value (--{name}=...)"
    if not _SAFE_VALUE_RE.fullmatch(value):
        return f"value {value!r} contains characters other than letters, digits and _.,:+/%-"
    checks: dict[str, tuple[bool, str]] = {
        "int": (value.isdigit(), "a non-negative integer"),
        "number": (re.fullmatch(r"[0-9]+(\.[0-9]+)?", value) is not None, "a number"),
        "bool": (value.lower() in _BOOL_VALUES, "on or off"),
        "word": (re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", value) is not None, "a name"),
        "ps-mode": (value in ("auto", "disable"), "auto or disable"),
        "size": (re.fullmatch(r"[0-9]+[KMGkmg]?", value) is not None, "a size such as 64K"),
    }
    ok, expected = checks[kind]
    return None if ok else f"--{name} must be {expected}, got {value!r}"


def validate_extra_args(extra_args: Sequence[str], *, field: str = "extraArgs") -> list[str]:
    """Check every extra argument against EXTRA_ARG_KINDS; return them unchanged or raise SpecError.

    An argument must look like `--name=value` or `--name` (booleans only), use an allowed
    option (dashes and underscores are interchangeable, as in sysbench), and have a plain
    value: no whitespace, quotes or shell characters, so the argv is safe to log and show.
    """
    allowed = ", ".join(f"--{name}" for name in sorted(EXTRA_ARG_KINDS))
    for i, arg in enumerate(extra_args):
        where = f"{field}[{i}]"
        match = _ARG_RE.fullmatch(arg)
        if match is None:
            raise SpecError(
                where,
                f"{arg!r} is not of the form --name=value or --name",
                f"allowed options: {allowed}",
            )
        name = match.group("name").replace("_", "-")
        if name in OWNED_OPTIONS:
            raise SpecError(
                where,
                f"--{name} is set by the controller",
                f"use spec.{OWNED_OPTIONS[name]} instead",
            )
        kind = EXTRA_ARG_KINDS.get(name)
        if kind is None:
            raise SpecError(where, f"--{name} is not allowed", f"allowed: {allowed}")
        problem = _check_extra_value(name, kind, match.group("value"))
        if problem is not None:
            raise SpecError(where, problem)
    return list(extra_args)


def build_sysbench_argv(
    *,
    workload: str,
    command: Command,
    host: str,
    port: int,
    user: str,
    db: str = "sbtest",
    threads: int = 1,
    time_seconds: int | None = None,
    report_interval: int | None = None,
    percentile: int | None = None,
    rand_type: str | None = None,
    tables: int | None = None,
    table_size: int | None = None,
    ignore_errors: Sequence[int | str] | str | None = None,
    auto_inc: bool | None = None,
    histogram: bool = False,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """Build the sysbench argv (starting with "sysbench") for one prepare/run/cleanup.

    The result never contains the password, so it is safe to log and to put in Job args.
    sysbench 1.0.20 reads no password environment variable: the runner appends
    `--mysql-password=...` (from its env) at exec time, after this argv.
    Run-only options (time, report interval, percentile, histogram, rand type) are left
    out of prepare/cleanup. Invalid values raise SpecError naming the spec field.
    """
    validate_workload(workload, field="workloads")
    if command not in ("prepare", "run", "cleanup"):
        raise SpecError("", f"unknown sysbench command {command!r}", "prepare, run or cleanup")
    if not host or not _SAFE_NAME_RE.fullmatch(host):
        raise SpecError("target.host", f"invalid host {host!r}")
    if not 1 <= port <= 65535:
        raise SpecError("target.port", f"port {port} is outside 1..65535")
    if not user or not _SAFE_NAME_RE.fullmatch(user):
        raise SpecError(
            "credentials.userKey", "the user name is empty or contains unusual characters"
        )
    if not _DB_NAME_RE.fullmatch(db):
        raise SpecError("database", f"invalid database name {db!r}", "letters, digits, _ and $")
    if threads < 1:
        raise SpecError("threads", f"threads must be >= 1, got {threads}")

    argv = [
        "sysbench",
        workload,
        "--db-driver=mysql",
        f"--mysql-host={host}",
        f"--mysql-port={port}",
        f"--mysql-user={user}",
        f"--mysql-db={db}",
    ]
    if tables is not None:
        if tables < 1:
            raise SpecError("dataset.tables", f"tables must be >= 1, got {tables}")
        argv.append(f"--tables={tables}")
    if table_size is not None and command != "cleanup":
        if table_size < 1:
            raise SpecError("dataset.tableSize", f"tableSize must be >= 1, got {table_size}")
        argv.append(f"--table-size={table_size}")
    if auto_inc is not None and command != "cleanup":
        argv.append(f"--auto-inc={'on' if auto_inc else 'off'}")
    if command != "cleanup":
        # prepare is a parallel command in 1.0.20 (one table per thread), so threads apply.
        argv.append(f"--threads={threads}")
    if command == "run":
        argv.extend(_run_options(time_seconds, report_interval, percentile, rand_type, histogram))
    if ignore_errors is not None and command != "cleanup":
        argv.append(f"--mysql-ignore-errors={_ignore_errors_value(ignore_errors)}")
    argv.extend(validate_extra_args(extra_args))
    argv.append(command)
    return argv


def _run_options(
    time_seconds: int | None,
    report_interval: int | None,
    percentile: int | None,
    rand_type: str | None,
    histogram: bool,
) -> list[str]:
    """The `run`-only options, validated."""
    out: list[str] = []
    if time_seconds is not None:
        # --time=0 means "no time limit" to sysbench; without --events it never ends.
        if time_seconds < 1:
            raise SpecError("durationSeconds", f"must be >= 1, got {time_seconds}")
        out.append(f"--time={time_seconds}")
    if report_interval is not None and report_interval > 0:
        out.append(f"--report-interval={report_interval}")
    if percentile is not None:
        if not 0 <= percentile <= 100:
            raise SpecError("percentile", f"must be 0..100 (0 disables), got {percentile}")
        out.append(f"--percentile={percentile}")
    if rand_type is not None:
        if rand_type not in RAND_TYPES:
            raise SpecError(
                "randType", f"unknown --rand-type {rand_type!r}", "one of " + ", ".join(RAND_TYPES)
            )
        out.append(f"--rand-type={rand_type}")
    if histogram:
        # sysbench 1.0.20 refuses the pair with "FATAL: --histogram cannot be used with
        # --percentile=0" (recorded in tests/data/sysbench).
        if percentile == 0:
            raise SpecError("percentile", "a latency histogram needs a percentile other than 0")
        out.append("--histogram=on")
    return out


def _ignore_errors_value(ignore_errors: Sequence[int | str] | str) -> str:
    """Render --mysql-ignore-errors: `all` or a comma list of MySQL error codes."""
    # The spec's ignoreErrors is one string ("1062,2013" or "all"), as sysbench spells it.
    items = ignore_errors.split(",") if isinstance(ignore_errors, str) else list(ignore_errors)
    texts = [str(item).strip() for item in items]
    if texts == ["all"] or texts == ["none"]:
        return texts[0]
    if not texts or not all(_IGNORE_CODE_RE.fullmatch(text) for text in texts):
        raise SpecError(
            "ignoreErrors",
            f"{ignore_errors!r} is not 'all' or a list of MySQL error numbers",
            "e.g. [1062, 2013, 8028, 9007]",
        )
    return ",".join(texts)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """Return argv with any --mysql-password value replaced by `***` (for logs and errors)."""
    return [
        "--mysql-password=***"
        if re.match(r"^--mysql[-_]password=", arg)
        else ("***" if i > 0 and argv[i - 1] in ("--mysql-password", "--mysql_password") else arg)
        for i, arg in enumerate(argv)
    ]


# --------------------------------------------------------------------------------------
# Parsed output model
# --------------------------------------------------------------------------------------


class _Frozen(BaseModel):
    """Base: immutable parsed values."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Interval(_Frozen):
    """One intermediate report line (`[ 10s ] thds: ...`, --report-interval)."""

    t: float = Field(description="Seconds since the start of the run.")
    threads: int = Field(description="Running threads (`thds:`).")
    tps: float = Field(description="Events per second (`tps:`, or `eps:` for non-DB tests).")
    qps: float | None = Field(description="Queries per second; None for non-DB tests.")
    read_qps: float | None = Field(description="Read queries per second.")
    write_qps: float | None = Field(description="Write queries per second.")
    other_qps: float | None = Field(description="Other queries (BEGIN/COMMIT) per second.")
    percentile: int = Field(description="Which latency percentile (`lat (ms,95%)`).")
    latency_ms: float | None = Field(
        description="Percentile latency; None when no event completed in the interval "
        "(sysbench prints 0.00 then) or when the percentile is disabled (0%)."
    )
    errors_per_sec: float | None = Field(description="Ignored errors per second (`err/s`).")
    reconnects_per_sec: float | None = Field(description="Reconnects per second.")


class RunSummary(_Frozen):
    """The end-of-run (cumulative) report."""

    reads: int | None = Field(default=None, description="`queries performed: read`.")
    writes: int | None = Field(default=None, description="`queries performed: write`.")
    other: int | None = Field(default=None, description="`queries performed: other`.")
    total_queries: int | None = Field(default=None, description="`queries performed: total`.")
    transactions: int | None = Field(default=None, description="`transactions` count.")
    tps: float | None = Field(default=None, description="`transactions` per second.")
    queries: int | None = Field(default=None, description="`queries` count.")
    qps: float | None = Field(default=None, description="`queries` per second.")
    ignored_errors: int | None = Field(default=None, description="`ignored errors` count.")
    errors_per_sec: float | None = Field(default=None, description="Ignored errors per second.")
    reconnects: int | None = Field(default=None, description="`reconnects` count.")
    reconnects_per_sec: float | None = Field(default=None, description="Reconnects per second.")
    unfinished_transactions: int | None = Field(
        default=None, description="`Number of unfinished transactions on forced shutdown`."
    )
    total_time_seconds: float | None = Field(
        default=None,
        description="1.0.20 `General statistics: total time`, 1.1 `Throughput: time elapsed`.",
    )
    total_events: int | None = Field(default=None, description="`total number of events`.")
    events_per_sec: float | None = Field(
        default=None, description="1.1 `events/s (eps)` or the cpu test's `events per second`."
    )
    latency_min_ms: float | None = Field(default=None, description="Latency `min`.")
    latency_avg_ms: float | None = Field(default=None, description="Latency `avg`.")
    latency_max_ms: float | None = Field(default=None, description="Latency `max`.")
    latency_sum_ms: float | None = Field(default=None, description="Latency `sum`.")
    percentile: int | None = Field(
        default=None, description="N of `Nth percentile`; 0 when `percentile stats: disabled`."
    )
    percentile_printed_ms: float | None = Field(
        default=None, description="The percentile value exactly as printed (0.00 included)."
    )
    fairness_events_avg: float | None = Field(default=None, description="Events per thread, avg.")
    fairness_events_stddev: float | None = Field(default=None, description="... stddev.")
    fairness_time_avg: float | None = Field(default=None, description="Busy time per thread, avg.")
    fairness_time_stddev: float | None = Field(default=None, description="... stddev.")

    @property
    def has_sql_statistics(self) -> bool:
        """True when the `SQL statistics:` block (database tests) was present."""
        return self.qps is not None and self.tps is not None

    @property
    def is_complete(self) -> bool:
        """True when the general/throughput and latency blocks were both read."""
        return (
            self.total_time_seconds is not None
            and self.total_events is not None
            and self.latency_avg_ms is not None
        )


class SysbenchRun(_Frozen):
    """Everything parse_sysbench_output understood about one sysbench invocation."""

    version: str | None = Field(description="e.g. 1.0.20 or 1.1.0-df89d34; None if absent.")
    luajit: str | None = Field(default=None, description="e.g. `system LuaJIT 2.1.0-beta3`.")
    workload: str | None = Field(default=None, description="Given by the caller or detected.")
    threads: int | None = Field(description="`Number of threads:` (or the caller's value).")
    report_interval_seconds: int | None = Field(default=None, description="--report-interval.")
    forced_shutdown_seconds: int | None = Field(default=None, description="--forced-shutdown.")
    intervals: list[Interval] = Field(default_factory=list, description="Intermediate reports.")
    histogram: list[tuple[float, int]] | None = Field(
        default=None,
        description="--histogram rows (bucket lower bound in ms as printed, count); None "
        "when no histogram block was printed. Printed values have 3 decimals, so adjacent "
        "sub-0.06 ms buckets can share a value: rows are kept as printed.",
    )
    summary: RunSummary | None = Field(default=None, description="End-of-run report.")
    fatal: list[str] = Field(default_factory=list, description="`FATAL:` messages, in order.")
    warnings: list[str] = Field(default_factory=list, description="`WARNING:` messages.")
    notes: list[str] = Field(
        default_factory=list, description="What the parser inferred (quirks, forced shutdown)."
    )
    invalid_option: str | None = Field(default=None, description="From `invalid option: ...`.")

    @property
    def forced_shutdown(self) -> bool:
        """True when sysbench hit --forced-shutdown (the report then covers a stalled tail)."""
        return any("forcing shutdown" in line for line in self.fatal)

    @property
    def usable_histogram(self) -> list[tuple[float, int]] | None:
        """The histogram if it holds events, else None (empty blocks happen, see notes)."""
        if self.histogram and sum(count for _, count in self.histogram) > 0:
            return self.histogram
        return None


# --------------------------------------------------------------------------------------
# Parser
# --------------------------------------------------------------------------------------

_NUM = r"(-?(?:[0-9]+(?:\.[0-9]*)?|nan|inf))"
_VERSION_RE = re.compile(
    r"^sysbench (?P<version>[0-9]+\.[0-9]+(?:\.[0-9]+)?(?:[-+][0-9A-Za-z.+-]+)?)"
    r"(?: \(using (?P<luajit>[^)]*)\))?\s*$"
)
_THREADS_RE = re.compile(r"^Number of threads: ([0-9]+)\s*$")
_REPORT_EVERY_RE = re.compile(r"^Report intermediate results every ([0-9]+) second\(s\)")
_FORCING_RE = re.compile(r"^Forcing shutdown in ([0-9]+) seconds")
# sb_logger log_timestamp prints "[ %.0fs ] " (no fixed width); the Lua
# sysbench.report_default prints "err/s %4.2f" without a colon (sysbench.lua:145-147).
_INTERVAL_DB_RE = re.compile(
    rf"^\[ {_NUM}s \] thds: ([0-9]+) tps: {_NUM} qps: {_NUM} "
    rf"\(r/w/o: {_NUM}/{_NUM}/{_NUM}\) lat \(ms,([0-9]+)%\): {_NUM} "
    rf"err/s:? {_NUM} reconn/s: {_NUM}\s*$"
)
_INTERVAL_EPS_RE = re.compile(
    rf"^\[ {_NUM}s \] thds: ([0-9]+) eps: {_NUM} lat \(ms,([0-9]+)%\): {_NUM}"
)
_INTERVAL_OTHER_RE = re.compile(r"^\[ [0-9.]+s \] ")
_HIST_ROW_RE = re.compile(r"^\s*([0-9]+\.[0-9]+) \|\**\s* ([0-9]+)\s*$")
_COUNT_RATE_RE = re.compile(r"^\s*([0-9]+)\s+\(" + _NUM + r" per sec\.\)\s*$")
_PERCENTILE_RE = re.compile(r"^\s*([0-9]+)th percentile:\s+" + _NUM + r"\s*$")
_UNFINISHED_RE = re.compile(r"^Number of unfinished transactions on forced shutdown: ([0-9]+)")
_INVALID_OPTION_RE = re.compile(r"^invalid option: (.+?)\s*$")
_FATAL_RE = re.compile(r"^\s*FATAL: (.*?)\s*$")
_WARNING_RE = re.compile(r"^\s*WARNING: (.*?)\s*$")
_PAIR_RE = re.compile(r"^\s*" + _NUM + "/" + _NUM + r"\s*$")
_LUA_PATH_RE = re.compile(r"(?:^|[\s/])([A-Za-z0-9_]+)\.lua(?:\s|$)")

#: OPER_LOG_MAX_VALUE: the top of sysbench's latency histogram, in ms.
_HISTOGRAM_MAX_MS = 1e5

_SECTIONS = {
    "SQL statistics:": "sql",
    "General statistics:": "general",
    "Throughput:": "general",
    "Latency (ms):": "latency",
    "Threads fairness:": "fairness",
    "CPU speed:": "general",
    "Latency histogram (values are in milliseconds)": "histogram",
}


def _f(text: str) -> float:
    return float(text)


def _latency_or_none(events_per_sec: float, percentile: int, printed: float) -> float | None:
    """Interpret an intermediate percentile: 0.00 with no events (or 0%) means 'none'."""
    if percentile == 0:
        return None
    if printed == 0.0 and events_per_sec == 0.0:
        # FACTS.md 5.5 case 1: an empty window makes get_pct return bucket 0 (0.001 ms),
        # printed 0.00 (akopytov/sysbench#242) - there is no latency to report.
        return None
    return printed


def _detect_workload(lines: Sequence[str]) -> str | None:
    """Find the workload on a command line saved with the output (`sysbench oltp_x ... run`)."""
    for line in lines[:5]:
        if "sysbench" not in line and ".lua" not in line:
            continue
        for token in line.split():
            name = token.rsplit("/", 1)[-1].removesuffix(".lua")
            if name in LUA_WORKLOADS:
                return name
        match = _LUA_PATH_RE.search(line)
        if match:
            return match.group(1)
    return None


class _Parser:
    """Line-oriented state machine over sysbench's stdout+stderr."""

    def __init__(self) -> None:
        self.version: str | None = None
        self.luajit: str | None = None
        self.threads: int | None = None
        self.report_interval: int | None = None
        self.forced_shutdown: int | None = None
        self.intervals: list[Interval] = []
        self.histogram: list[tuple[float, int]] | None = None
        self.summary: dict[str, object] = {}
        self.fatal: list[str] = []
        self.warnings: list[str] = []
        self.notes: list[str] = []
        self.invalid_option: str | None = None
        self.section = "header"

    def feed(self, line: str) -> None:
        stripped = line.strip()
        if stripped in _SECTIONS:
            self.section = _SECTIONS[stripped]
            if self.section == "histogram":
                self.histogram = []
            return
        if self._header_line(line):
            return
        if self.section == "histogram":
            row = _HIST_ROW_RE.match(line)
            if row:
                assert self.histogram is not None
                self.histogram.append((_f(row.group(1)), int(row.group(2))))
                return
        if line.startswith("["):
            self._interval_line(line)
            return
        if self.section in ("sql", "general", "latency", "fairness"):
            self._summary_line(stripped)

    def _header_line(self, line: str) -> bool:
        for regex, handler in (
            (_VERSION_RE, self._on_version),
            (_THREADS_RE, self._on_threads),
            (_REPORT_EVERY_RE, self._on_report_every),
            (_FORCING_RE, self._on_forcing),
            (_UNFINISHED_RE, self._on_unfinished),
            (_INVALID_OPTION_RE, self._on_invalid_option),
            (_FATAL_RE, self._on_fatal),
            (_WARNING_RE, self._on_warning),
        ):
            match = regex.match(line)
            if match:
                handler(match)
                return True
        return False

    def _on_version(self, match: re.Match[str]) -> None:
        self.version = match.group("version")
        self.luajit = match.group("luajit")

    def _on_threads(self, match: re.Match[str]) -> None:
        self.threads = int(match.group(1))

    def _on_report_every(self, match: re.Match[str]) -> None:
        self.report_interval = int(match.group(1))

    def _on_forcing(self, match: re.Match[str]) -> None:
        self.forced_shutdown = int(match.group(1))

    def _on_unfinished(self, match: re.Match[str]) -> None:
        self.summary["unfinished_transactions"] = int(match.group(1))

    def _on_invalid_option(self, match: re.Match[str]) -> None:
        self.invalid_option = match.group(1)

    def _on_fatal(self, match: re.Match[str]) -> None:
        self.fatal.append(match.group(1))

    def _on_warning(self, match: re.Match[str]) -> None:
        self.warnings.append(match.group(1))

    def _interval_line(self, line: str) -> None:
        db = _INTERVAL_DB_RE.match(line)
        if db:
            g = db.groups()
            tps, pct, lat = _f(g[2]), int(g[7]), _f(g[8])
            self.intervals.append(
                Interval(
                    t=_f(g[0]),
                    threads=int(g[1]),
                    tps=tps,
                    qps=_f(g[3]),
                    read_qps=_f(g[4]),
                    write_qps=_f(g[5]),
                    other_qps=_f(g[6]),
                    percentile=pct,
                    latency_ms=_latency_or_none(tps, pct, lat),
                    errors_per_sec=_f(g[9]),
                    reconnects_per_sec=_f(g[10]),
                )
            )
            return
        eps = _INTERVAL_EPS_RE.match(line)
        if eps:
            g = eps.groups()
            rate, pct = _f(g[2]), int(g[3])
            self.intervals.append(
                Interval(
                    t=_f(g[0]),
                    threads=int(g[1]),
                    tps=rate,
                    qps=None,
                    read_qps=None,
                    write_qps=None,
                    other_qps=None,
                    percentile=pct,
                    latency_ms=_latency_or_none(rate, pct, _f(g[4])),
                    errors_per_sec=None,
                    reconnects_per_sec=None,
                )
            )
            return
        # `[ Ns ] queue length: %llu, concurrency: %llu` (--rate) and other bracketed
        # lines carry nothing the step result needs.
        if not _INTERVAL_OTHER_RE.match(line):
            self.warnings.append(f"unrecognised line: {line.strip()}")

    def _summary_line(self, stripped: str) -> None:
        if not stripped or ":" not in stripped:
            return
        key, _, rest = stripped.partition(":")
        key = key.strip()
        rest = rest.strip()
        pct = _PERCENTILE_RE.match(stripped)
        if pct:
            self.summary["percentile"] = int(pct.group(1))
            self.summary["percentile_printed_ms"] = _f(pct.group(2))
            return
        if key == "percentile stats" and rest == "disabled":
            self.summary["percentile"] = 0
            return
        simple_ints = {
            "read": "reads",
            "write": "writes",
            "other": "other",
            "total": "total_queries",
            "total number of events": "total_events",
        }
        simple_floats = {
            "min": "latency_min_ms",
            "avg": "latency_avg_ms",
            "max": "latency_max_ms",
            "sum": "latency_sum_ms",
            "events/s (eps)": "events_per_sec",
            "events per second": "events_per_sec",
        }
        count_rates = {
            "transactions": ("transactions", "tps"),
            "queries": ("queries", "qps"),
            "ignored errors": ("ignored_errors", "errors_per_sec"),
            "reconnects": ("reconnects", "reconnects_per_sec"),
        }
        pairs = {
            "events (avg/stddev)": ("fairness_events_avg", "fairness_events_stddev"),
            "execution time (avg/stddev)": ("fairness_time_avg", "fairness_time_stddev"),
        }
        if key in simple_ints and rest.isdigit():
            self.summary[simple_ints[key]] = int(rest)
        elif key in simple_floats:
            self.summary[simple_floats[key]] = _f(rest)
        elif key in ("total time", "time elapsed") and rest.endswith("s"):
            self.summary["total_time_seconds"] = _f(rest[:-1])
        elif key in count_rates:
            # `%-6llu (%.2f per sec.)`: counts are padded to 6 columns, then a space.
            match = _COUNT_RATE_RE.match(rest)
            if match:
                count_key, rate_key = count_rates[key]
                self.summary[count_key] = int(match.group(1))
                self.summary[rate_key] = _f(match.group(2))
        elif key in pairs:
            match = _PAIR_RE.match(rest)
            if match:
                first, second = pairs[key]
                self.summary[first] = _f(match.group(1))
                self.summary[second] = _f(match.group(2))


def parse_sysbench_output(
    text: str, *, workload: str | None = None, threads: int | None = None
) -> SysbenchRun:
    """Parse one sysbench invocation's combined stdout+stderr (1.0.20 or 1.1 format).

    Never raises for a failed run: a run without an end-of-run report comes back with
    `summary=None` and its FATAL lines; diagnose_failure/to_step_result turn that into a
    precise SysbenchError. Raises ParseError only when `threads` contradicts the output.
    `workload` defaults to one found on a saved command line (first lines of the text).
    """
    lines = text.splitlines()
    parser = _Parser()
    for line in lines:
        parser.feed(line)

    if threads is not None and parser.threads is not None and threads != parser.threads:
        raise ParseError(
            f"sysbench output says 'Number of threads: {parser.threads}' but this step "
            f"has threads={threads}: the output belongs to another step"
        )
    summary = RunSummary.model_validate(parser.summary) if _has_summary(parser.summary) else None
    notes = list(parser.notes)
    histogram = parser.histogram
    if summary is not None:
        notes.extend(_summary_notes(summary, histogram, parser.fatal))
    return SysbenchRun(
        version=parser.version,
        luajit=parser.luajit,
        workload=workload if workload is not None else _detect_workload(lines),
        threads=parser.threads if parser.threads is not None else threads,
        report_interval_seconds=parser.report_interval,
        forced_shutdown_seconds=parser.forced_shutdown,
        intervals=parser.intervals,
        histogram=histogram,
        summary=summary,
        fatal=parser.fatal,
        warnings=parser.warnings,
        notes=notes,
        invalid_option=parser.invalid_option,
    )


def _has_summary(values: dict[str, object]) -> bool:
    """A report exists once the total events and latency lines were seen."""
    return "total_events" in values and "latency_avg_ms" in values


def _summary_notes(
    summary: RunSummary, histogram: list[tuple[float, int]] | None, fatal: list[str]
) -> list[str]:
    """Notes a reader of the step needs: quirks and forced shutdowns."""
    notes: list[str] = []
    events = summary.total_events or 0
    if summary.percentile == 0:
        notes.append("percentile stats disabled (--percentile=0): no percentile latency")
    elif summary.percentile_printed_ms == 0.0:
        if events == 0:
            notes.append(
                f"p{summary.percentile} printed as 0.00 with zero events: no latency "
                "(sysbench reports its lowest bucket when empty; akopytov/sysbench#242)"
            )
        else:
            notes.append(
                f"p{summary.percentile} printed as 0.00 with {events} events: latency below "
                "the 0.01 ms display resolution, kept as 0.0 (akopytov/sysbench#479)"
            )
    if (summary.percentile_printed_ms or 0.0) >= _HISTOGRAM_MAX_MS:
        # Latencies >= 100 s land in the last histogram bucket (sb_logger.c:52-54, #242).
        notes.append(
            f"p{summary.percentile} is clamped at sysbench's 100 s histogram limit: "
            "the real value is at least that"
        )
    if summary.unfinished_transactions is not None or any("forcing shutdown" in f for f in fatal):
        unfinished = summary.unfinished_transactions or 0
        notes.append(
            "sysbench forced a shutdown (--forced-shutdown) after the time limit; "
            f"{unfinished} transactions were unfinished, so the report includes a stalled tail"
        )
    if histogram is not None and events > 0 and sum(c for _, c in histogram) == 0:
        # The block can come out empty although events completed (macOS build,
        # akopytov/sysbench#479); such a histogram cannot be merged.
        notes.append(
            f"the --histogram block is empty although {events} events completed "
            "(akopytov/sysbench#479); percentile merging falls back to the worst client"
        )
    return notes


# --------------------------------------------------------------------------------------
# Failure diagnosis
# --------------------------------------------------------------------------------------

_CONNECT_RE = re.compile(
    r"^unable to connect to MySQL server(?: on (?P<where>.*?))?(?:,? aborting\.*)?$"
)
_ERRNO_RE = re.compile(r"^error (?P<errno>[0-9]+): (?P<text>.*)$")
_SQL_ERROR_RE = re.compile(
    r"^(?P<fn>mysql_stmt_execute|mysql_drv_query|mysql_stmt_prepare)\(\) returned error "
    r"(?P<errno>[0-9]+) \((?P<text>.*?)\) for query '(?P<query>.*)$"
)
_SQL_API_RE = re.compile(r'^MySQL error: (?P<errno>[0-9]+) "(?P<text>.*)"$')
_LUA_SQL_ERROR_RE = re.compile(
    r"SQL error, errno = (?P<errno>[0-9]+), state = '(?P<state>[^']*)': (?P<text>.*)$"
)

_CONNECT_HINTS = {
    1044: "the user lacks privileges on the database: GRANT ALL ON <database>.* to the user",
    1045: "check the user and password in the credentials Secret",
    1049: "the database does not exist: create it (spec.database) or let prepare create it",
    2002: "nothing accepts connections there: check target host/port and that TiDB is up",
    2003: "nothing accepts connections there: check target host/port and that TiDB is up",
    2005: "the host name does not resolve: check the TiDB service name / target.host",
    2013: "the server dropped the connection during the handshake: check TiDB logs",
}


def diagnose_failure(run: SysbenchRun) -> SysbenchError | None:
    """Return the SysbenchError that explains why `run` has no usable report, or None.

    Kinds: `invalid-option`, `thread-init-timeout`, `connect`, `sql-error`, `fatal`
    (another FATAL), `no-summary` (output ends early: killed, crashed or truncated).
    """
    if run.summary is not None and run.summary.is_complete:
        return None
    version = f"sysbench {run.version}" if run.version else "sysbench"
    if run.invalid_option is not None:
        hint = ""
        if "--warmup-time" in run.invalid_option:
            hint = (
                " (--warmup-time exists only in sysbench 1.1; 1.0.20 needs a separate warm-up run)"
            )
        return SysbenchError(
            "invalid-option",
            f"{version} rejected option {run.invalid_option}{hint}; remove it or use a "
            "sysbench that supports it",
        )
    fatal = run.fatal
    if any(line.startswith("Worker threads failed to initialize") for line in fatal):
        return SysbenchError(
            "thread-init-timeout",
            f"{version}: worker threads failed to initialize within 30 seconds (connections "
            "hung without an answer); check that TiDB is reachable and accepting connections, "
            "or lower threads",
        )
    conflict = next((line for line in fatal if "cannot be used with" in line), None)
    if conflict is not None:
        return SysbenchError(
            "invalid-option", f"{version} rejected the options: {conflict}; change one of them"
        )
    connect = _diagnose_connect(version, fatal)
    if connect is not None:
        return connect
    sql = _diagnose_sql(version, fatal)
    if sql is not None:
        return sql
    if fatal:
        return SysbenchError(
            "fatal", f"{version} failed: " + " / ".join(_dedupe(fatal)) + "; see the full output"
        )
    last = run.intervals[-1].t if run.intervals else None
    where = f" after the [ {last:.0f}s ] report" if last is not None else ""
    return SysbenchError(
        "no-summary",
        f"{version} output ends{where} without the end-of-run report (process killed, "
        "crashed or output truncated); check the pod's exit code and events "
        "(OOMKilled, activeDeadlineSeconds), then re-run the step",
    )


def _dedupe(lines: Sequence[str]) -> list[str]:
    """Drop repeated lines (sysbench prints one FATAL block per failing thread)."""
    seen: list[str] = []
    for line in lines:
        if line not in seen:
            seen.append(line)
    return seen


def _diagnose_connect(version: str, fatal: list[str]) -> SysbenchError | None:
    where: str | None = None
    connect_failed = False
    for i, line in enumerate(fatal):
        match = _CONNECT_RE.match(line)
        if match is None:
            continue
        connect_failed = True
        where = match.group("where")
        errno_match = _ERRNO_RE.match(fatal[i + 1]) if i + 1 < len(fatal) else None
        if errno_match is not None:
            errno = int(errno_match.group("errno"))
            text = errno_match.group("text")
            hint = _CONNECT_HINTS.get(errno, "check target, credentials and database")
            return SysbenchError(
                "connect",
                f"{version} could not connect to MySQL server on {where or 'the target'}: "
                f"error {errno}: {text}; {hint}",
            )
    if connect_failed or any("connection creation failed" in line for line in fatal):
        return SysbenchError(
            "connect",
            f"{version} could not connect to MySQL server on {where or 'the target'}; check "
            "target host/port, credentials and database",
        )
    return None


def _diagnose_sql(version: str, fatal: list[str]) -> SysbenchError | None:
    for i, line in enumerate(fatal):
        match = _SQL_ERROR_RE.match(line)
        if match is not None:
            query = match.group("query")
            # The query may span lines (CREATE TABLE); the FATAL line holds its first one.
            query = query[:-1] if query.endswith("'") else query + " ..."
            errno = int(match.group("errno"))
            return SysbenchError(
                "sql-error",
                f"{version}: {match.group('fn')}() returned error {errno} "
                f"({match.group('text')}) for query '{query}'; {_sql_hint(errno)}",
            )
        api = _SQL_API_RE.match(line)
        if api is not None:
            errno = int(api.group("errno"))
            before = fatal[i - 1] if i > 0 else "SQL API error"
            return SysbenchError(
                "sql-error",
                f"{version}: {before}: error {errno} ({api.group('text')}); {_sql_hint(errno)}",
            )
        lua = _LUA_SQL_ERROR_RE.search(line)
        if lua is not None:
            errno = int(lua.group("errno"))
            return SysbenchError(
                "sql-error",
                f"{version}: SQL error {errno} ({lua.group('text')}); {_sql_hint(errno)}",
            )
    return None


def _sql_hint(errno: int) -> str:
    """What to do about a SQL error that stopped the run."""
    if errno in (2006, 2013):
        return (
            "the connection was lost mid-run (TiDB restarted or killed?); add the code to "
            "ignoreErrors only if reconnecting is acceptable for this benchmark"
        )
    if errno == 1146:
        return "the benchmark tables are missing: run with dataset.prepare IfMissing or Always"
    if errno == 1050:
        return "the tables already exist: use dataset.prepare IfMissing, or clean up first"
    return "errors not in ignoreErrors stop sysbench; fix the cause or list the code there"


# --------------------------------------------------------------------------------------
# Step results
# --------------------------------------------------------------------------------------


def _percentile_value(summary: RunSummary) -> float | None:
    """The summary percentile, with the 0.00 quirk resolved (FACTS.md 5.5)."""
    if not summary.percentile or summary.percentile_printed_ms is None:
        return None
    if summary.percentile_printed_ms == 0.0 and not summary.total_events:
        return None
    return summary.percentile_printed_ms


def to_step_result(
    run: SysbenchRun,
    workload: str | None = None,
    threads: int | None = None,
    clients: int = 1,
) -> StepResult:
    """Turn a parsed run into the fixed StepResult, from the end-of-run summary's rates.

    Raises SysbenchError (see diagnose_failure) when the run has no report, and ParseError
    when the report is not a database test's (no `SQL statistics:`) or the workload or
    thread count is unknown.
    """
    failure = diagnose_failure(run)
    if failure is not None:
        raise failure
    summary = run.summary
    assert summary is not None  # diagnose_failure returned None, so the report is complete
    if not summary.has_sql_statistics:
        raise ParseError(
            "sysbench output has no 'SQL statistics:' block: not a database workload "
            "(e.g. the cpu test); tidb-bench parses OLTP runs"
        )
    name = workload or run.workload
    if name is None:
        raise ParseError("the workload is unknown: pass it (the output does not name it)")
    step_threads = threads if threads is not None else run.threads
    if step_threads is None:
        raise ParseError("the thread count is unknown: no 'Number of threads:' line")
    qps = summary.qps or 0.0
    total_queries = summary.total_queries or 0

    def share(count: int | None) -> float:
        # The summary prints per-second rates only for transactions and queries; split the
        # query rate by the read/write/other counts so the three always add up to qps.
        if not total_queries or count is None:
            return 0.0
        return round(qps * count / total_queries, 2)

    return StepResult(
        workload=name,
        threads=step_threads,
        clients=clients,
        tps=summary.tps or 0.0,
        qps=qps,
        read_qps=share(summary.reads),
        write_qps=share(summary.writes),
        other_qps=share(summary.other),
        latency_ms=Latency(
            min=summary.latency_min_ms or 0.0,
            avg=summary.latency_avg_ms or 0.0,
            max=summary.latency_max_ms or 0.0,
            percentile=summary.percentile if summary.percentile is not None else 0,
            value=_percentile_value(summary),
        ),
        errors_per_sec=summary.errors_per_sec or 0.0,
        reconnects_per_sec=summary.reconnects_per_sec or 0.0,
        events=summary.total_events or 0,
        duration_seconds=summary.total_time_seconds or 0.0,
        sysbench_version=run.version or "unknown",
    )


def parse_step_result(
    text: str, *, workload: str | None = None, threads: int | None = None, clients: int = 1
) -> StepResult:
    """parse_sysbench_output + to_step_result in one call."""
    run = parse_sysbench_output(text, workload=workload, threads=threads)
    return to_step_result(run, workload, threads, clients)


# --------------------------------------------------------------------------------------
# Combining clients
# --------------------------------------------------------------------------------------


def histogram_percentile(histogram: Sequence[tuple[float, int]], percentile: float) -> float | None:
    """The percentile of a (value_ms, count) histogram, computed the way sysbench does.

    sysbench (sb_histogram.c get_pct_cumulative) returns the lower bound of the bucket where
    the cumulative count first reaches floor(n * pct / 100 + 0.5). None when empty.
    """
    rows = sorted((value, count) for value, count in histogram if count > 0)
    total = sum(count for _, count in rows)
    if total == 0:
        return None
    target = math.floor(total * percentile / 100 + 0.5)
    cumulative = 0
    for value, count in rows:
        cumulative += count
        if cumulative >= target:
            return value
    return rows[-1][0]


def merge_histograms(histograms: Sequence[Sequence[tuple[float, int]]]) -> list[tuple[float, int]]:
    """Sum counts per printed bucket value across clients; sorted by value."""
    merged: dict[float, int] = {}
    for histogram in histograms:
        for value, count in histogram:
            merged[value] = merged.get(value, 0) + count
    return sorted(merged.items())


def combine_step_results(
    results: Sequence[StepResult],
    histograms: Sequence[Sequence[tuple[float, int]] | None] | None = None,
) -> tuple[StepResult, list[str]]:
    """Combine the clients of one step (PRODUCT.md): sums, min/max, event-weighted avg.

    The percentile comes from the merged histograms when every client provided a non-empty
    one (`histograms[i]` belongs to `results[i]`); otherwise it is the worst (highest)
    client's value. The returned notes say which method was used.
    """
    if not results:
        raise ValueError("combine_step_results needs at least one result")
    first = results[0]
    for other in results[1:]:
        if (other.workload, other.threads) != (first.workload, first.threads):
            raise ValueError(
                f"cannot combine {other.workload}@{other.threads} with "
                f"{first.workload}@{first.threads}: clients of one step only"
            )
        if other.latency_ms.percentile != first.latency_ms.percentile:
            raise ValueError("clients ran with different --percentile values")
    if histograms is not None and len(histograms) != len(results):
        raise ValueError("histograms must have one entry (or None) per result")

    notes: list[str] = []
    events = sum(r.events for r in results)
    if events > 0:
        avg = sum(r.latency_ms.avg * r.events for r in results) / events
    else:
        avg = sum(r.latency_ms.avg for r in results) / len(results)
    pct = first.latency_ms.percentile
    value, note = _combined_percentile(results, histograms, pct)
    if note:
        notes.append(note)
    versions = sorted({r.sysbench_version for r in results})
    if len(versions) > 1:
        notes.append("clients ran different sysbench versions: " + ", ".join(versions))

    combined = StepResult(
        workload=first.workload,
        threads=first.threads,
        clients=sum(r.clients for r in results),
        tps=round(sum(r.tps for r in results), 2),
        qps=round(sum(r.qps for r in results), 2),
        read_qps=round(sum(r.read_qps for r in results), 2),
        write_qps=round(sum(r.write_qps for r in results), 2),
        other_qps=round(sum(r.other_qps for r in results), 2),
        latency_ms=Latency(
            min=min(r.latency_ms.min for r in results),
            avg=round(avg, 2),
            max=max(r.latency_ms.max for r in results),
            percentile=pct,
            value=value,
        ),
        errors_per_sec=round(sum(r.errors_per_sec for r in results), 2),
        reconnects_per_sec=round(sum(r.reconnects_per_sec for r in results), 2),
        events=events,
        duration_seconds=max(r.duration_seconds for r in results),
        sysbench_version=",".join(versions),
    )
    return combined, notes


def _combined_percentile(
    results: Sequence[StepResult],
    histograms: Sequence[Sequence[tuple[float, int]] | None] | None,
    pct: int,
) -> tuple[float | None, str]:
    """The combined percentile value and the note saying how it was obtained."""
    label = f"p{pct}"
    if pct == 0:
        return None, "percentile disabled (--percentile=0) on every client"
    if len(results) == 1 and not histograms:
        return results[0].latency_ms.value, ""
    usable = histograms is not None and all(
        h is not None and sum(c for _, c in h) > 0 for h in histograms
    )
    if usable:
        assert histograms is not None
        merged = merge_histograms([h for h in histograms if h is not None])
        value = histogram_percentile(merged, pct)
        if value is not None:
            return round(value, 2), (
                f"{label} merged from {len(results)} clients' latency histograms "
                "(sysbench's method: lower bound of the bucket holding the percentile)"
            )
    values = [r.latency_ms.value for r in results if r.latency_ms.value is not None]
    worst = max(values) if values else None
    missing = (
        "no histograms were collected"
        if histograms is None
        else f"{sum(1 for h in histograms if not h)} of {len(results)} clients "
        "had no usable histogram"
    )
    return worst, f"{label} is the worst client's value ({missing}; an upper bound)"
