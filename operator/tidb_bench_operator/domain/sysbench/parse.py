"""Parsing sysbench 1.0.20 / 1.1 output, streamed line by line (docs/sysbench.md "Output").

The parser is total: any text gives a SysbenchRun, never an exception. What it cannot read
becomes data: `problems` (a value in the report that is not a number, out of range or
infinite), `fatal`, `warnings`. diagnose_failure and to_step_result turn those into one
precise error. Memory does not grow with the number of lines: with keep_intervals=False
only the count and the last interval's time are kept, and every kept list is capped.

Why over 500 lines: one state machine over one output format (header, intermediate reports,
--rate queue lines, histogram, summary); its states share the parser's fields, and split
across modules each part would reach into the others'.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from tidb_bench_operator.domain.sysbench.model import Interval, RunSummary, SysbenchRun
from tidb_bench_operator.domain.sysbench.options import LUA_WORKLOADS
from tidb_bench_operator.domain.sysbench.quirks import summary_notes
from tidb_bench_operator.errors import ParseError

#: Characters of one line looked at: sysbench's own lines are short; a longer line is not
#: one of them (its head is still read, e.g. a long FATAL message).
MAX_LINE = 4096
#: Intermediate reports kept (a day at one per second); later ones are counted, not kept.
MAX_INTERVALS = 100_000
#: FATAL / WARNING / problem lines kept (sysbench prints one FATAL block per thread).
MAX_MESSAGES = 200
#: Lines at the top searched for a saved command line (`sysbench oltp_x --threads=8 run`).
_HEAD_LINES = 5

# Numbers as sysbench prints them (%4.2f, %llu); nan/inf are matched so that they can be
# refused by name rather than silently skipped.
_NUM = r"(-?(?:[0-9]+(?:\.[0-9]*)?|nan|inf))"
_VERSION_RE = re.compile(
    r"^sysbench (?P<version>[0-9]+\.[0-9]+(?:\.[0-9]+)?(?:[-+][0-9A-Za-z.+-]+)?)"
    r"(?: \(using (?P<luajit>[^)]*)\))?\s*$"
)
# Thread counts are a C unsigned int in sysbench (10 digits at most); percentiles 1-100.
_THREADS_RE = re.compile(r"^Number of threads: ([0-9]{1,10})\s*$")
_THREADS_ARG_RE = re.compile(r"(?:^|\s)--(?:num[-_])?threads=([0-9]{1,10})(?=\s|$)")
_REPORT_EVERY_RE = re.compile(r"^Report intermediate results every ([0-9]+) second\(s\)")
_FORCING_RE = re.compile(r"^Forcing shutdown in ([0-9]+) seconds")
_TARGET_RATE_RE = re.compile(r"^Target transaction rate: ([0-9]{1,12})/sec")
_QUEUE_RE = re.compile(r"^\[ [0-9.]+s \] queue length: ([0-9]{1,20}), concurrency: ([0-9]{1,10})")
# log_timestamp prints "[ %.0fs ] " (no fixed width); the Lua sysbench.report_default
# prints "err/s %4.2f" without a colon (docs/sysbench.md "Intermediate reports").
_INTERVAL_DB_RE = re.compile(
    rf"^\[ {_NUM}s \] thds: ([0-9]{{1,10}}) tps: {_NUM} qps: {_NUM} "
    rf"\(r/w/o: {_NUM}/{_NUM}/{_NUM}\) lat \(ms,([0-9]{{1,3}})%\): {_NUM} "
    rf"err/s:? {_NUM} reconn/s: {_NUM}\s*$"
)
_INTERVAL_EPS_RE = re.compile(
    rf"^\[ {_NUM}s \] thds: ([0-9]{{1,10}}) eps: {_NUM} lat \(ms,([0-9]{{1,3}})%\): {_NUM}"
)
_INTERVAL_OTHER_RE = re.compile(r"^\[ [0-9.]+s \] ")
_HIST_ROW_RE = re.compile(r"^\s*([0-9]+\.[0-9]+) \|\**\s* ([0-9]+)\s*$")
_COUNT_RATE_RE = re.compile(r"^\s*([0-9]+)\s+\(" + _NUM + r" per sec\.\)\s*$")
_PERCENTILE_RE = re.compile(r"^\s*([0-9]+)th percentile:\s+" + _NUM + r"\s*$")
_UNFINISHED_RE = re.compile(r"^Number of unfinished transactions on forced shutdown: ([0-9]+)")
# No lazy `(.*?)\s*$` here: on a line of blanks it backtracks quadratically.
_INVALID_OPTION_RE = re.compile(r"^invalid option: (.+)$")
_FATAL_RE = re.compile(r"^\s*FATAL: (.*)$")
_WARNING_RE = re.compile(r"^\s*WARNING: (.*)$")
_PAIR_RE = re.compile(r"^\s*" + _NUM + "/" + _NUM + r"\s*$")
_LUA_PATH_RE = re.compile(r"(?:^|[\s/])([A-Za-z0-9_]+)\.lua(?:\s|$)")

_SECTIONS = {
    "SQL statistics:": "sql",
    "General statistics:": "general",
    "Throughput:": "general",
    "Latency (ms):": "latency",
    "Threads fairness:": "fairness",
    "CPU speed:": "general",
    "Latency histogram (values are in milliseconds)": "histogram",
}

_SUMMARY_INTS = {
    "read": "reads",
    "write": "writes",
    "other": "other",
    "total": "total_queries",
    "total number of events": "total_events",
}
_SUMMARY_FLOATS = {
    "min": "latency_min_ms",
    "avg": "latency_avg_ms",
    "max": "latency_max_ms",
    "sum": "latency_sum_ms",
    "events/s (eps)": "events_per_sec",
    "events per second": "events_per_sec",
}
_COUNT_RATES = {
    "transactions": ("transactions", "tps"),
    "queries": ("queries", "qps"),
    "ignored errors": ("ignored_errors", "errors_per_sec"),
    "reconnects": ("reconnects", "reconnects_per_sec"),
}
_PAIRS = {
    "events (avg/stddev)": ("fairness_events_avg", "fairness_events_stddev"),
    "execution time (avg/stddev)": ("fairness_time_avg", "fairness_time_stddev"),
}
#: Fields only shown, never computed with: an unreadable one (sysbench prints `-nan` for a
#: stddev over no events) is left out rather than refused.
_INFORMATIONAL = frozenset(
    {"fairness_events_avg", "fairness_events_stddev", "fairness_time_avg", "fairness_time_stddev"}
)


#: Counts up to what a status keeps exactly (2^53-1); rates, times, latencies up to 2^64.
MAX_COUNT = 2**53 - 1
MAX_NUMBER = float(2**64 - 1)


def _number(text: str) -> float | None:
    """A finite, non-negative number up to MAX_NUMBER, or None (nan, inf, negative, larger)."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and 0 <= value <= MAX_NUMBER else None


def _count(text: str) -> int | None:
    """A count as sysbench prints it (`%llu`: ASCII digits) up to MAX_COUNT, or None:
    isdigit() alone accepts `²`, which int() refuses; 400 digits overflow every rate."""
    if not (text.isascii() and text.isdigit()) or len(text) > 16:
        return None
    value = int(text)
    return value if value <= MAX_COUNT else None


def _latency_or_none(events_per_sec: float, percentile: int, printed: float) -> float | None:
    """Interpret an intermediate percentile: 0.00 with no events (or 0%) means 'none'."""
    if percentile == 0:
        return None
    if printed == 0.0 and events_per_sec == 0.0:
        # An empty window makes sysbench report its lowest histogram bucket, printed 0.00
        # (docs/sysbench.md "The 0.00 percentile"): there is no latency to report.
        return None
    return printed


def _detect_workload(lines: Iterable[str]) -> str | None:
    """Find the workload on a command line saved with the output (`sysbench oltp_x ... run`)."""
    for line in lines:
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


def _detect_threads(lines: Iterable[str]) -> int | None:
    """`--threads=N` on a saved command line (sysbench 1.1 summaries may lack the header)."""
    for line in lines:
        if "sysbench" not in line:
            continue
        match = _THREADS_ARG_RE.search(line)
        if match:
            return int(match.group(1))
    return None


class _Parser:
    """Line-oriented state machine over sysbench's stdout+stderr."""

    def __init__(self, keep_intervals: bool) -> None:
        self.keep_intervals = keep_intervals
        self.line_no = 0
        self.head: list[str] = []
        self.version: str | None = None
        self.luajit: str | None = None
        self.threads: int | None = None
        self.report_interval: int | None = None
        self.forced_shutdown: int | None = None
        self.target_rate: int | None = None
        self.queue_max: int | None = None  # (--rate) the longest queue reported
        self.queue_last: int | None = None  # ... and the last (was the backlog still there?)
        self.intervals: list[Interval] = []
        self.interval_count = 0
        self.last_interval_t: float | None = None
        self.histogram: list[tuple[float, int]] | None = None
        self.summary: dict[str, object] = {}
        self.fatal: list[str] = []
        self.fatal_after_report: list[str] = []
        self.warnings: list[str] = []
        self.problems: list[str] = []
        self.notes: list[str] = []
        self.dropped_messages = 0
        self.invalid_option: str | None = None
        self.section = "header"
        self.report_started = False

    def _keep(self, target: list[str], message: str) -> None:
        if len(target) < MAX_MESSAGES:
            target.append(message)
        else:
            self.dropped_messages += 1

    def _problem(self, field: str, text: str) -> None:
        self._keep(
            self.problems,
            f"line {self.line_no}: {field} {text.strip()[:40]!r} is not a finite, "
            "non-negative number",
        )

    def feed(self, raw_line: str) -> None:
        self.line_no += 1
        line = raw_line[:MAX_LINE].rstrip("\r\n")
        if len(self.head) < _HEAD_LINES and line.strip():
            self.head.append(line)
        if line.startswith("["):  # the bulk of a long log: intermediate reports
            self._interval_line(line)
            return
        stripped = line.strip()
        if stripped in _SECTIONS:
            self.section = _SECTIONS[stripped]
            self.report_started = True
            if self.section == "histogram":
                self.histogram = []
            return
        if self._header_line(line):
            return
        if self.section == "histogram":
            row = _HIST_ROW_RE.match(line)
            if row:
                self._histogram_row(row)
                return
        if self.section in ("sql", "general", "latency", "fairness"):
            self._summary_line(stripped)

    def _histogram_row(self, row: re.Match[str]) -> None:
        assert self.histogram is not None
        value = _number(row.group(1))
        if value is None:
            self._problem("histogram bucket", row.group(1))
            return
        if len(self.histogram) < 1100:  # sysbench has 1024 buckets
            self.histogram.append((value, int(row.group(2))))
        else:
            self._keep(self.problems, f"line {self.line_no}: more histogram rows than buckets")

    def _header_line(self, line: str) -> bool:
        for regex, handler in (
            (_VERSION_RE, self._on_version),
            (_THREADS_RE, self._on_threads),
            (_REPORT_EVERY_RE, self._on_report_every),
            (_FORCING_RE, self._on_forcing),
            (_TARGET_RATE_RE, self._on_target_rate),
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

    def _on_target_rate(self, match: re.Match[str]) -> None:
        self.target_rate = int(match.group(1))

    def _on_unfinished(self, match: re.Match[str]) -> None:
        self.summary["unfinished_transactions"] = int(match.group(1))

    def _on_invalid_option(self, match: re.Match[str]) -> None:
        self.invalid_option = match.group(1).strip()

    def _on_fatal(self, match: re.Match[str]) -> None:
        message = match.group(1).strip()
        self._keep(self.fatal, message)
        if self.report_started:
            self._keep(self.fatal_after_report, message)

    def _on_warning(self, match: re.Match[str]) -> None:
        self._keep(self.warnings, match.group(1).strip())

    def _counted_only(self, t: float) -> bool:
        """Count an interval; True when it is not to be kept (so need not be built)."""
        self.interval_count += 1
        self.last_interval_t = t
        return not self.keep_intervals or len(self.intervals) >= MAX_INTERVALS

    def _interval_numbers(self, texts: Iterable[str]) -> list[float] | None:
        values = [_number(text) for text in texts]
        if any(v is None for v in values):
            # An impossible intermediate line is left out of the series, with a warning.
            self._keep(
                self.warnings,
                f"line {self.line_no}: intermediate report with a value that is not a "
                "finite, non-negative number; left out",
            )
            return None
        return [v for v in values if v is not None]

    def _interval_line(self, line: str) -> None:
        db = _INTERVAL_DB_RE.match(line)
        if db:
            g = db.groups()
            nums = self._interval_numbers((g[0], *g[2:7], g[8], g[9], g[10]))
            if nums is None:
                return
            t, tps, qps, reads, writes, other, lat, err, reconn = nums
            if self._counted_only(t):
                return
            pct = int(g[7])
            self.intervals.append(
                Interval(
                    t=t,
                    threads=int(g[1]),
                    tps=tps,
                    qps=qps,
                    read_qps=reads,
                    write_qps=writes,
                    other_qps=other,
                    percentile=pct,
                    latency_ms=_latency_or_none(tps, pct, lat),
                    errors_per_sec=err,
                    reconnects_per_sec=reconn,
                )
            )
            return
        eps = _INTERVAL_EPS_RE.match(line)
        if eps:
            g = eps.groups()
            nums = self._interval_numbers((g[0], g[2], g[4]))
            if nums is None:
                return
            t, rate, lat = nums
            if self._counted_only(t):
                return
            pct = int(g[3])
            self.intervals.append(
                Interval(
                    t=t,
                    threads=int(g[1]),
                    tps=rate,
                    qps=None,
                    read_qps=None,
                    write_qps=None,
                    other_qps=None,
                    percentile=pct,
                    latency_ms=_latency_or_none(rate, pct, lat),
                    errors_per_sec=None,
                    reconnects_per_sec=None,
                )
            )
            return
        queue = _QUEUE_RE.match(line)
        if queue:  # `[ Ns ] queue length: %llu, concurrency: %llu` (--rate)
            self.queue_last = int(queue.group(1))
            self.queue_max = max(self.queue_max or 0, self.queue_last)
            return
        # Other bracketed lines carry nothing the step result needs.
        if not _INTERVAL_OTHER_RE.match(line):
            self._keep(self.warnings, f"unrecognised line: {line.strip()[:200]}")

    def _store(self, key: str, text: str, *, integer: bool = False, label: str = "") -> None:
        if integer:
            count = _count(text)
            if count is None:
                self._keep(
                    self.problems,
                    f"line {self.line_no}: {label or key} {text.strip()[:40]!r} is not a count "
                    "(sysbench prints ASCII digits; at most 2^53-1 here)",
                )
                return
            self.summary[key] = count
            return
        value = _number(text)
        if value is None:
            if key not in _INFORMATIONAL:
                self._problem(key, text)
            return
        self.summary[key] = value

    def _summary_line(self, stripped: str) -> None:
        if not stripped or ":" not in stripped:
            return
        key, _, rest = stripped.partition(":")
        key = key.strip()
        rest = rest.strip()
        pct = _PERCENTILE_RE.match(stripped)
        if pct:
            percentile = int(pct.group(1))
            if not 1 <= percentile <= 100:
                self._keep(
                    self.problems,
                    f"line {self.line_no}: a {percentile}th percentile does not exist "
                    "(sysbench takes --percentile 1..100, or 0 to disable)",
                )
                return
            self.summary["percentile"] = percentile
            self._store("percentile_printed_ms", pct.group(2))
            return
        if key == "percentile stats" and rest == "disabled":
            self.summary["percentile"] = 0
            return
        if key in _SUMMARY_INTS:
            self._store(_SUMMARY_INTS[key], rest, integer=True, label=key)
        elif key in _SUMMARY_FLOATS:
            self._store(_SUMMARY_FLOATS[key], rest)
        elif key in ("total time", "time elapsed"):
            if rest.endswith("s"):
                self._store("total_time_seconds", rest[:-1])
            else:
                self._problem("total time", rest)
        elif key in _COUNT_RATES:
            # `%-6llu (%.2f per sec.)`: counts are padded to 6 columns, then a space.
            match = _COUNT_RATE_RE.match(rest)
            count_key, rate_key = _COUNT_RATES[key]
            if match:
                self._store(count_key, match.group(1), integer=True, label=key)
                self._store(rate_key, match.group(2))
            else:
                self._problem(key, rest)
        elif key in _PAIRS:
            match = _PAIR_RE.match(rest)
            if match:
                first, second = _PAIRS[key]
                self._store(first, match.group(1))
                self._store(second, match.group(2))


def parse_sysbench_lines(
    lines: Iterable[str],
    *,
    workload: str | None = None,
    threads: int | None = None,
    keep_intervals: bool = True,
) -> SysbenchRun:
    """Parse one sysbench invocation's combined stdout+stderr, line by line (1.0.20 or 1.1).

    Never raises for a failed or mangled run: a run without a whole end-of-run report comes
    back with `summary=None`, values it could not read in `problems`; diagnose_failure and
    to_step_result turn that into a precise error. Raises ParseError only when `threads`
    contradicts the output. `workload` and the thread count default to ones found on a
    saved command line (`sysbench oltp_x --threads=8 run`) in the first lines.
    """
    parser = _Parser(keep_intervals)
    for line in lines:
        parser.feed(line)

    if threads is not None and parser.threads is not None and threads != parser.threads:
        raise ParseError(
            f"sysbench output says 'Number of threads: {parser.threads}' but this step "
            f"has threads={threads}: the output belongs to another step"
        )
    found_threads = parser.threads if parser.threads is not None else threads
    if found_threads is None:
        found_threads = _detect_threads(parser.head)
    summary = RunSummary.model_validate(parser.summary) if _has_summary(parser.summary) else None
    notes = list(parser.notes)
    histogram = parser.histogram
    if summary is not None:
        notes.extend(summary_notes(summary, histogram, parser.fatal))
    if parser.interval_count > len(parser.intervals) and keep_intervals:
        notes.append(
            f"{parser.interval_count} intermediate reports; the first {len(parser.intervals)} "
            "are kept"
        )
    if parser.dropped_messages:
        notes.append(f"{parser.dropped_messages} further FATAL/WARNING/problem lines not kept")
    return SysbenchRun(
        version=parser.version,
        luajit=parser.luajit,
        workload=workload if workload is not None else _detect_workload(parser.head),
        threads=found_threads,
        report_interval_seconds=parser.report_interval,
        forced_shutdown_seconds=parser.forced_shutdown,
        target_rate=parser.target_rate,
        queue_max=parser.queue_max,
        queue_last=parser.queue_last,
        intervals=parser.intervals,
        histogram=histogram,
        summary=summary,
        fatal=parser.fatal,
        warnings=parser.warnings,
        notes=notes,
        invalid_option=parser.invalid_option,
        fatal_after_report=parser.fatal_after_report,
        problems=parser.problems,
        interval_count=parser.interval_count,
        last_interval_t=parser.last_interval_t,
    )


def parse_sysbench_output(
    text: str, *, workload: str | None = None, threads: int | None = None
) -> SysbenchRun:
    """parse_sysbench_lines over a whole text (the runner's captured output)."""
    return parse_sysbench_lines(text.splitlines(), workload=workload, threads=threads)


def _has_summary(values: dict[str, object]) -> bool:
    """A report exists once the total events and latency lines were seen."""
    return "total_events" in values and "latency_avg_ms" in values
