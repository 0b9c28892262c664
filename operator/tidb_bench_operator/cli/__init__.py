"""The `tidb-bench` command line: operator, runner, parse, pd-check, run, report."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tidb_bench_operator import __version__
from tidb_bench_operator.cli.experiment import (
    experiment_from_cluster,
    find_experiment_source,
    report_experiment,
)
from tidb_bench_operator.cli.sources import (
    ScheduleSource,
    compare_sources,
    find_report_source,
    find_schedule_source,
    load_report_source,
    read_input,
)
from tidb_bench_operator.config import credentials_from_env
from tidb_bench_operator.errors import TidbBenchError


def _skew_bound(text: str) -> float:
    """A skew bound: a finite number >= 0 (`nan` would fail every store, `inf` pass any)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number >= 0 (e.g. 0.5)")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every verb."""
    parser = argparse.ArgumentParser(
        prog="tidb-bench", description="Fair sysbench thread sweeps against TiDB."
    )
    parser.add_argument("--version", action="version", version=f"tidb-bench {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")

    op = sub.add_parser("operator", help="run the controller (kopf)")
    op.add_argument(
        "--namespace",
        action="append",
        default=[],
        help="watch only this namespace (repeatable); default: cluster-wide",
    )

    from tidb_bench_operator.runner_entry import add_runner_arguments

    add_runner_arguments(sub)

    parse = sub.add_parser("parse", help="sysbench output -> step results (JSON array)")
    parse.add_argument("files", nargs="+", metavar="FILE", help="sysbench output, or - for stdin")
    parse.add_argument("--format", choices=["json", "table"], default="json")
    parse.add_argument("--workload", help="when the output does not name it")

    pd = sub.add_parser("pd-check", help="offline PD balance verdict from saved output")
    pd.add_argument("--stores", required=True, metavar="FILE", help="pd-ctl store / GET /stores")
    pd.add_argument("--operators", metavar="FILE", help="pd-ctl operator show / GET /operators")
    pd.add_argument("--format", choices=["json", "table"], default="table")
    pd.add_argument("--max-leader-size-skew", type=_skew_bound, default=0.5)
    pd.add_argument("--max-region-size-skew", type=_skew_bound, default=0.5)

    run = sub.add_parser("run", help="the same sweep without Kubernetes")
    run.add_argument("-f", "--file", required=True, metavar="RUN.yaml")
    run.add_argument("--host", required=True)
    run.add_argument("--port", type=int, default=4000)
    run.add_argument("--user", default=None, help="default: TIDB_BENCH_USER or root")
    run.add_argument(
        "--pd-url",
        default=None,
        help="PD's HTTP address (e.g. http://127.0.0.1:2379): run the controller's PD and "
        "table checks first, under the spec's preflight policy",
    )
    run.add_argument("--format", choices=["table", "json"], default="table")

    report = sub.add_parser(
        "report",
        help="a run as Markdown tables (stdout), and optionally an SVG chart or one HTML file",
    )
    report.add_argument(
        "run",
        metavar="NAME|FILE",
        help="a BenchmarkRun in the cluster (KUBECONFIG), or a saved BenchmarkRun "
        "(kubectl get -o yaml/json) or its results ConfigMaps (kubectl get configmaps -l "
        "tidbbench.io/run=NAME -o yaml); - reads stdin. schedule/NAME or a saved "
        "BenchmarkSchedule: the schedule's history, change points and a trend chart per step. "
        "experiment/NAME or a saved List holding a BenchmarkExperiment (with its runs and the "
        "operation run's results ConfigMaps): the variants compared, or the operations window",
    )
    report.add_argument(
        "-n", "--namespace", help="namespace of NAME (default: the kubeconfig context's)"
    )
    report.add_argument(
        "--compare",
        metavar="RUN|REFERENCE",
        action="append",
        default=[],
        help="another run (NAME or FILE): a delta table and its curves overlaid; or a "
        "BenchmarkReference file of published numbers (docs/reference-format.md), printed "
        "with their source. Repeatable: one run and any number of reference files",
    )
    report.add_argument(
        "--results",
        metavar="CM.yaml",
        help="the run's saved results ConfigMap, for the QPS-over-time charts of a saved "
        "BenchmarkRun (a run read from the cluster fetches its own)",
    )
    report.add_argument(
        "--svg",
        metavar="OUT.svg",
        help="also write the chart as SVG (render it to PNG with rsvg-convert)",
    )
    report.add_argument(
        "--html",
        metavar="OUT.html",
        help="also write one self-contained HTML file: the chart and the tables",
    )
    return parser


def _dumps(value: object) -> str:
    """Strict JSON: NaN and Infinity are not JSON, and nothing here may produce them."""
    return json.dumps(value, indent=2, allow_nan=False)


def cmd_parse(args: argparse.Namespace) -> int:
    """`tidb-bench parse FILE...`: step results as a JSON array (or a table)."""
    from tidb_bench_operator.adapters.documents import iter_lines
    from tidb_bench_operator.domain.sysbench import (
        LUA_WORKLOADS,
        parse_sysbench_lines,
        to_step_result,
    )

    if args.workload is not None and args.workload not in LUA_WORKLOADS:
        raise TidbBenchError(
            f"--workload {args.workload!r} is not a sysbench workload (one of: "
            + ", ".join(LUA_WORKLOADS)
            + ")"
        )
    results: list[dict[str, Any]] = []
    failed = False
    for path in args.files:
        # Streamed: a log of any length is read line by line, intervals are not kept.
        run = parse_sysbench_lines(iter_lines(path), workload=args.workload, keep_intervals=False)
        try:
            results.append(to_step_result(run, args.workload).to_json_dict())
        except TidbBenchError as exc:
            print(f"tidb-bench parse: {path}: {exc}", file=sys.stderr)
            failed = True
    if args.format == "json":
        print(_dumps(results))
    else:
        print(render_steps_table(results))
    return 1 if failed else 0


def render_steps_table(results: Sequence[dict[str, Any]]) -> str:
    """A plain table of step results: workload, threads, QPS, TPS, pXX, errors/s."""
    header = ["WORKLOAD", "THREADS", "CLIENTS", "QPS", "TPS", "LATENCY(ms)", "ERR/S"]
    rated = any(r.get("rate") for r in results)  # a rate sweep: the target and whether reached
    if rated:
        header[2:2] = ["TARGET/S", "REACHED"]
    rows = [header]
    for r in results:
        lat = r["latencyMs"]
        value = "-" if lat.get("value") is None else f"p{lat['percentile']} {lat['value']:.2f}"
        rate = r.get("rate") or {}
        row = [
            r["workload"],
            str(r["threads"]),
            str(r.get("clients", 1)),
            f"{r['qps']:,.2f}",
            f"{r['tps']:,.2f}",
            value,
            f"{r['errorsPerSec']:.2f}",
        ]
        if rated:
            reached = (
                "yes" if rate.get("reached") else f"NO (-{rate.get('shortfallPercent', 0):g}%)"
            )
            row[2:2] = [f"{rate.get('target', 0):,}", reached if rate else "-"]
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows
    )


def cmd_pd_check(args: argparse.Namespace) -> int:
    """`tidb-bench pd-check`: exit 0 when nothing fails, 1 when a check fails."""
    from tidb_bench_operator.domain.preflight.pdcheck import render_pd_check_table, run_pd_check

    result = run_pd_check(
        read_input(args.stores),
        read_input(args.operators) if args.operators else None,
        args.max_leader_size_skew,
        args.max_region_size_skew,
    )
    if args.format == "json":
        print(_dumps(result))
    else:
        print(render_pd_check_table(result))
    return 1 if any(c["status"] == "Fail" for c in result["checks"]) else 0


def cmd_run(args: argparse.Namespace) -> int:
    """`tidb-bench run -f RUN.yaml --host H`: the sweep from this machine, no Kubernetes."""
    from tidb_bench_operator.cli.run import run_local_sweep

    creds = credentials_from_env()
    results = run_local_sweep(
        read_input(args.file),
        host=args.host,
        port=args.port,
        user=args.user or creds.user,
        password=creds.password,
        out=sys.stderr,
        pd_url=args.pd_url,
    )
    if args.format == "json":
        print(_dumps(results))
    else:
        print(render_steps_table(results["steps"]))
        if results.get("summary"):
            print("\n" + str(results["summary"].get("headline", "")))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """`tidb-bench report NAME|FILE`: Markdown on stdout, the chart with --svg, all of it
    in one file with --html."""
    from tidb_bench_operator.domain.report.chart import render_svg
    from tidb_bench_operator.domain.report.html import render_html
    from tidb_bench_operator.domain.report.markdown import render_markdown
    from tidb_bench_operator.domain.report.model import run_report

    schedule = find_schedule_source(args.run, args.namespace)
    if schedule is not None:
        return _report_schedule(args, schedule)
    experiment = find_experiment_source(args.run, args.namespace)
    if experiment is not None:
        return report_experiment(args, experiment, _write)
    try:
        source = find_report_source(args.run, args.namespace)
    except TidbBenchError:
        named = _experiment_named(args.run, args.namespace)
        if named is None:
            raise
        return report_experiment(args, named, _write)
    other, references = compare_sources(args.compare, args.namespace)
    series = source.series
    if args.results:
        series = load_report_source(read_input(args.results), args.results).series
        if series is None:
            raise TidbBenchError(
                f"{args.results}: no series.json in it; save the ConfigMap named in the "
                "run's status.resultsConfigMap (kubectl get configmap NAME -o yaml)"
            )
    compare = (other.name, other.status) if other is not None else None
    try:
        report = run_report(
            source.name,
            source.status,
            spec=source.spec,
            compare=compare,
            references=references,
            series=series,
        )
        markdown = render_markdown(report)
        print(markdown)
        chart = render_svg(report) if args.svg or args.html else ""
        if args.svg:
            _write(args.svg, chart)
        if args.html:
            _write(args.html, render_html(report, markdown=markdown, chart=chart))
    except ValueError as exc:  # pydantic: a status this version cannot read
        raise TidbBenchError(
            f"{args.run}: not a BenchmarkRun status this version reads: {exc}"
        ) from None
    if args.html:
        print(f"tidb-bench report: wrote {args.html}", file=sys.stderr)
    return 0


def _experiment_named(ref: str, namespace: str | None) -> Any:
    """A BenchmarkExperiment called `ref` in the cluster when no BenchmarkRun is (None when
    there is none, or no cluster to ask: the run's error then stands)."""
    if Path(ref).exists():
        return None
    try:
        return experiment_from_cluster(ref, namespace)
    except TidbBenchError:
        return None


def _write(target: str, text: str) -> None:
    """A report file written whole; the error names the file."""
    try:
        Path(target).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise TidbBenchError(f"cannot write {target}: {exc.strerror}") from exc


def _report_schedule(args: argparse.Namespace, schedule: ScheduleSource) -> int:
    """A BenchmarkSchedule's trend: history table, change points, a chart per step."""
    from tidb_bench_operator.domain.report.html import render_html
    from tidb_bench_operator.domain.report.model import schedule_report
    from tidb_bench_operator.domain.report.trend import (
        render_schedule_markdown,
        render_schedule_svg,
    )

    if args.compare or args.results:
        raise TidbBenchError(
            f"{args.run}: --compare and --results are for runs; a schedule's report is its "
            "own history"
        )
    try:
        report = schedule_report(schedule.name, schedule.status)
    except ValueError as exc:  # pydantic: a status this version cannot read
        raise TidbBenchError(
            f"{args.run}: not a BenchmarkSchedule status this version reads: {exc}"
        ) from None
    markdown = render_schedule_markdown(report)
    print(markdown)
    chart = render_schedule_svg(report)
    if args.svg:
        _write(args.svg, chart)
    if args.html:
        _write(args.html, render_html(report, markdown=markdown, chart=chart))
        print(f"tidb-bench report: wrote {args.html}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.verb == "operator":
            from tidb_bench_operator.controller.handlers import run_operator

            run_operator(args.namespace)
            return 0
        if args.verb == "runner":
            from tidb_bench_operator.runner_entry import main_runner

            return main_runner(args)
        if args.verb == "parse":
            return cmd_parse(args)
        if args.verb == "pd-check":
            return cmd_pd_check(args)
        if args.verb == "run":
            return cmd_run(args)
        if args.verb == "report":
            return cmd_report(args)
    except TidbBenchError as exc:
        print(f"tidb-bench {args.verb}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader left (`tidb-bench pd-check ... | head`): stop quietly, as cat does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except KeyboardInterrupt:
        print(f"tidb-bench {args.verb}: interrupted", file=sys.stderr)
        return 130
    parser.print_help(sys.stderr)
    return 2
