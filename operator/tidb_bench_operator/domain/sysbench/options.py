"""sysbench options: workloads, the extraArgs allow-list, the argv builder (docs/sysbench.md)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Literal, get_args

from tidb_bench_operator.errors import SpecError

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

#: --rand-type values of 1.0.20 (master drops `special`, adds `zipfian`; docs/sysbench.md).
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
    # 1.0.20's --mysql-ssl=on reads its certificates from fixed file names in the working
    # directory, which the runner fills from spec.tls.mysql's Secret (docs/tls.md).
    "mysql-ssl": "tls.mysql (TLS with the client certificate of a Secret)",
    "mysql-ssl-cipher": "tls.mysql",
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


def check_extra_value(name: str, kind: str, value: str | None) -> str | None:
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
        name, value = split_arg(arg, where, allowed)
        if name in OWNED_OPTIONS:
            raise SpecError(
                where,
                f"--{name} is set by the controller",
                f"use spec.{OWNED_OPTIONS[name]} instead",
            )
        kind = EXTRA_ARG_KINDS.get(name)
        if kind is None:
            raise SpecError(where, f"--{name} is not allowed", f"allowed: {allowed}")
        problem = check_extra_value(name, kind, value)
        if problem is not None:
            raise SpecError(where, problem)
    return list(extra_args)


def split_arg(arg: str, where: str, allowed: str) -> tuple[str, str | None]:
    """(name, value) of `--name=value` or `--name`, the name with dashes for underscores
    (sysbench takes either); SpecError at `where` naming the `allowed` options otherwise."""
    match = _ARG_RE.fullmatch(arg)
    if match is None:
        raise SpecError(
            where,
            f"{arg!r} is not of the form --name=value or --name",
            f"allowed options: {allowed}",
        )
    return match.group("name").replace("_", "-"), match.group("value")


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
    events: int | None = None,
    script: str | None = None,
    script_options: Mapping[str, str] | None = None,
) -> list[str]:
    """Build the sysbench argv (starting with "sysbench") for one prepare/run/cleanup.

    With `script` (a custom workload's mounted Lua file, domain/sysbench/custom.py) sysbench
    runs that file instead of the built-in `workload`, and `extra_args` are the workload's
    own args, checked against `script_options` (its allow-list) instead of extraArgs'.

    The result never contains the password, so it is safe to log and to put in Job args.
    sysbench 1.0.20 reads no password environment variable: the runner appends
    `--mysql-password=...` (from its env) at exec time, after this argv.
    Run-only options (time, report interval, percentile, histogram, rand type) are left
    out of prepare/cleanup. Invalid values raise SpecError naming the spec field.
    """
    if script is None:
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
        workload if script is None else script,
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
        if events is not None:  # whichever of --events and --time comes first ends the run
            argv.append(f"--events={events}")
    if ignore_errors is not None and command != "cleanup":
        argv.append(f"--mysql-ignore-errors={_ignore_errors_value(ignore_errors)}")
    if script is None:
        argv.extend(validate_extra_args(extra_args))
    else:
        # custom.py imports this module, so the custom allow-list is imported here.
        from tidb_bench_operator.domain.sysbench.custom import validate_custom_args

        argv.extend(validate_custom_args(extra_args, script_options or {}))
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
