"""Why a sysbench run has no usable report: one precise SysbenchError (docs/sysbench.md)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from tidb_bench_operator.domain.sysbench.model import SysbenchRun
from tidb_bench_operator.errors import SysbenchError

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

#: sysbench 1.0.20's FATAL line when --rate's events pile up beyond its queue.
QUEUE_FULL = "The event queue is full."

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

    Kinds: `invalid-option`, `thread-init-timeout`, `connect`, `sql-error`, `rate-queue-full`,
    `unreadable-report` (values in the report that are not numbers), `fatal-after-report`
    (a FATAL once the report had begun), `fatal` (another FATAL), `no-summary` (output ends
    early: killed, crashed, truncated, or cut inside the report).
    """
    complete = run.summary is not None and run.summary.is_complete
    if complete and not run.problems and not run.fatal_after_report:
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
    if run.problems:
        return SysbenchError(
            "unreadable-report",
            f"{version} output has an end-of-run report with values that cannot be read ("
            + "; ".join(run.problems[:3])
            + "); the output was cut, edited or damaged: re-capture it, do not trust it",
        )
    if run.fatal_after_report:
        return SysbenchError(
            "fatal-after-report",
            f"{version} printed its report and then failed: "
            + " / ".join(_dedupe(run.fatal_after_report))
            + "; the process did not end cleanly, so its numbers are not used: re-run the step",
        )
    if any(line.startswith(QUEUE_FULL) for line in fatal):
        last = run.last_interval_t
        when = f"after the [ {last:.0f}s ] report" if last is not None else "before any report"
        return SysbenchError(
            "rate-queue-full",
            f"{version} stopped {when}: its event queue was full (--rate {run.target_rate or '?'}"
            "/s arrives faster than the threads serve it); lower the rate, add threads, or "
            "shorten reportIntervalSeconds so that what it reached is seen before the queue fills",
        )
    if fatal:
        return SysbenchError(
            "fatal", f"{version} failed: " + " / ".join(_dedupe(fatal)) + "; see the full output"
        )
    last = run.last_interval_t
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
