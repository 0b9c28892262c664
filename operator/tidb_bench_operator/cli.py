"""The `tidb-bench` command line: operator, runner, parse, pd-check, run, report."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tidb_bench_operator import __version__
from tidb_bench_operator.errors import TidbBenchError


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

    from tidb_bench_operator.runner import add_runner_arguments

    add_runner_arguments(sub)

    parse = sub.add_parser("parse", help="sysbench output -> step results (JSON array)")
    parse.add_argument("files", nargs="+", metavar="FILE", help="sysbench output, or - for stdin")
    parse.add_argument("--format", choices=["json", "table"], default="json")
    parse.add_argument("--workload", help="when the output does not name it")

    pd = sub.add_parser("pd-check", help="offline PD balance verdict from saved output")
    pd.add_argument("--stores", required=True, metavar="FILE", help="pd-ctl store / GET /stores")
    pd.add_argument("--operators", metavar="FILE", help="pd-ctl operator show / GET /operators")
    pd.add_argument("--format", choices=["json", "table"], default="table")
    pd.add_argument("--max-leader-size-skew", type=float, default=0.5)
    pd.add_argument("--max-region-size-skew", type=float, default=0.5)

    run = sub.add_parser("run", help="the same sweep without Kubernetes")
    run.add_argument("-f", "--file", required=True, metavar="RUN.yaml")
    run.add_argument("--host", required=True)
    run.add_argument("--port", type=int, default=4000)
    run.add_argument("--user", default=None, help="default: TIDB_BENCH_USER or root")
    run.add_argument("--pd-url", default=None)
    run.add_argument("--format", choices=["table", "json"], default="table")
    return parser


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(errors="replace")
    except OSError as exc:
        raise TidbBenchError(f"cannot read {path}: {exc.strerror}") from exc


def cmd_parse(args: argparse.Namespace) -> int:
    """`tidb-bench parse FILE...`: step results as a JSON array (or a table)."""
    from tidb_bench_operator.domain.sysbench import parse_sysbench_output, to_step_result

    results: list[dict[str, Any]] = []
    failed = False
    for path in args.files:
        run = parse_sysbench_output(_read(path), workload=args.workload)
        try:
            results.append(to_step_result(run, args.workload).to_json_dict())
        except TidbBenchError as exc:
            print(f"tidb-bench parse: {path}: {exc}", file=sys.stderr)
            failed = True
    if args.format == "json":
        print(json.dumps(results, indent=2))
    else:
        print(render_steps_table(results))
    return 1 if failed else 0


def render_steps_table(results: Sequence[dict[str, Any]]) -> str:
    """A plain table of step results: workload, threads, QPS, TPS, pXX, errors/s."""
    header = ["WORKLOAD", "THREADS", "CLIENTS", "QPS", "TPS", "LATENCY(ms)", "ERR/S"]
    rows = [header]
    for r in results:
        lat = r["latencyMs"]
        value = "-" if lat.get("value") is None else f"p{lat['percentile']} {lat['value']:.2f}"
        rows.append(
            [
                r["workload"],
                str(r["threads"]),
                str(r.get("clients", 1)),
                f"{r['qps']:,.2f}",
                f"{r['tps']:,.2f}",
                value,
                f"{r['errorsPerSec']:.2f}",
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows
    )


def cmd_pd_check(args: argparse.Namespace) -> int:
    """`tidb-bench pd-check`: exit 0 when nothing fails, 1 when a check fails."""
    from tidb_bench_operator.domain.pdcheck import render_pd_check_table, run_pd_check

    result = run_pd_check(
        _read(args.stores),
        _read(args.operators) if args.operators else None,
        args.max_leader_size_skew,
        args.max_region_size_skew,
    )
    if args.format == "json":
        print(json.dumps(result, indent=2))
    else:
        print(render_pd_check_table(result))
    return 1 if any(c["status"] == "Fail" for c in result["checks"]) else 0


def cmd_run(args: argparse.Namespace) -> int:
    """`tidb-bench run -f RUN.yaml --host H`: the sweep from this machine, no Kubernetes."""
    from tidb_bench_operator.sweep import run_local_sweep

    creds_user = args.user or os.environ.get("TIDB_BENCH_USER", "root")
    results = run_local_sweep(
        _read(args.file),
        host=args.host,
        port=args.port,
        user=creds_user,
        password=os.environ.get("TIDB_BENCH_PASSWORD", ""),
        out=sys.stderr,
    )
    if args.format == "json":
        print(json.dumps(results, indent=2))
    else:
        print(render_steps_table(results["steps"]))
        if results.get("summary"):
            print("\n" + str(results["summary"].get("headline", "")))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.verb == "operator":
            from tidb_bench_operator.handlers import run_operator

            run_operator(args.namespace)
            return 0
        if args.verb == "runner":
            from tidb_bench_operator.runner import main_runner

            return main_runner(args)
        if args.verb == "parse":
            return cmd_parse(args)
        if args.verb == "pd-check":
            return cmd_pd_check(args)
        if args.verb == "run":
            return cmd_run(args)
    except TidbBenchError as exc:
        print(f"tidb-bench {args.verb}: {exc}", file=sys.stderr)
        return 1
    parser.print_help(sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
