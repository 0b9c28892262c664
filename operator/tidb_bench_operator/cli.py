"""The `tidb-bench` command line: operator, runner, parse, pd-check, run, report."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from tidb_bench_operator import __version__
from tidb_bench_operator.config import credentials_from_env, kubeconfig_from_env
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
        "(kubectl get -o yaml/json) or results ConfigMap; - reads stdin",
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


def _read(path: str) -> str:
    """A whole input document (size-limited, BOM/UTF-16 aware); `-` reads stdin."""
    from tidb_bench_operator.adapters.documents import read_document

    return read_document(path)


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
    from tidb_bench_operator.domain.preflight.pdcheck import render_pd_check_table, run_pd_check

    result = run_pd_check(
        _read(args.stores),
        _read(args.operators) if args.operators else None,
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
    from tidb_bench_operator.sweep import run_local_sweep

    creds = credentials_from_env()
    results = run_local_sweep(
        _read(args.file),
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


class ReportSource(NamedTuple):
    """A run to report: its name, status, spec (None from a ConfigMap) and interval series."""

    name: str
    status: dict[str, Any]
    spec: dict[str, Any] | None = None
    series: dict[str, Any] | None = None


def load_report_source(text: str, origin: str) -> ReportSource:
    """The run in a saved BenchmarkRun or results ConfigMap (YAML or JSON).

    A results ConfigMap has no phase: it is Succeeded when every step succeeded, Failed when
    one failed, else Running (it is rewritten after every step). The document is read
    strictly (no aliases, bounded nesting, finite numbers only).
    """
    from tidb_bench_operator.adapters.documents import load_yaml
    from tidb_bench_operator.domain.untrusted import loads

    doc = load_yaml(text, origin)
    if isinstance(doc, dict) and doc.get("kind") == "List":
        items = doc.get("items") or []
        if not isinstance(items, list) or len(items) != 1:
            count = len(items) if isinstance(items, list) else "malformed"
            raise TidbBenchError(
                f"{origin}: a List of {count} objects; save exactly one run "
                "(kubectl get benchmarkrun NAME -o yaml)"
            )
        doc = items[0]
    if not isinstance(doc, dict):
        raise TidbBenchError(f"{origin}: expected a BenchmarkRun or a results ConfigMap")
    meta = doc.get("metadata") or {}
    if not isinstance(meta, dict):
        raise TidbBenchError(f"{origin}: metadata is not a mapping")
    if doc.get("kind") == "ConfigMap":
        data = doc.get("data") or {}
        raw = data.get("steps.json") if isinstance(data, dict) else None
        if not isinstance(raw, str):
            raise TidbBenchError(
                f"{origin}: ConfigMap {meta.get('name')} has no steps.json; is it a "
                "BenchmarkRun's results ConfigMap (status.resultsConfigMap)?"
            )
        try:
            steps = loads(raw, f"{origin}: data.steps.json")
        except ValueError as exc:
            raise TidbBenchError(f"{origin}: data.steps.json is not JSON: {exc}") from None
        if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
            raise TidbBenchError(f"{origin}: data.steps.json is not a list of step objects")
        _refuse_non_finite(steps, f"{origin}: data.steps.json")
        phases = {str(s.get("phase")) for s in steps}
        phase = (
            "Failed"
            if "Failed" in phases
            else "Succeeded"
            if steps and phases == {"Succeeded"}
            else "Running"
        )
        from tidb_bench_operator.domain.manifests import LABEL_RUN, owner_name

        labels = meta.get("labels")
        name = (
            owner_name(meta, "BenchmarkRun")
            or (labels.get(LABEL_RUN) if isinstance(labels, dict) else None)
            or meta.get("name", origin)
        )
        return ReportSource(str(name), {"phase": phase, "steps": steps}, None, _series(doc))
    if doc.get("kind") not in (None, "BenchmarkRun") or not isinstance(doc.get("status"), dict):
        raise TidbBenchError(
            f"{origin}: a {doc.get('kind') or 'document'} without a BenchmarkRun status; save "
            "the run with kubectl get benchmarkrun NAME -o yaml"
        )
    _refuse_non_finite(doc["status"], f"{origin}: status")
    spec = doc.get("spec")
    return ReportSource(
        str(meta.get("name") or origin),
        dict(doc["status"]),
        dict(spec) if isinstance(spec, dict) else None,
    )


def _series(configmap: dict[str, Any]) -> dict[str, Any] | None:
    """series.json of a results ConfigMap, read strictly; None when absent or unreadable
    (the QPS-over-time charts are left out, the rest of the report stands)."""
    from tidb_bench_operator.domain.untrusted import loads

    data = configmap.get("data")
    raw = data.get("series.json") if isinstance(data, dict) else None
    try:
        series = loads(raw, "data.series.json") if isinstance(raw, str) else None
    except (ValueError, TidbBenchError):
        return None
    return series if isinstance(series, dict) else None


_NON_FINITE_WORDS = frozenset({"nan", "inf", "infinity"})


def _refuse_non_finite(value: object, where: str) -> None:
    """Refuse NaN/Infinity anywhere in a loaded document, also as strings a float reader
    would accept ("nan", "-Infinity"): a report must not draw or compare them."""
    stack: list[tuple[object, str]] = [(value, where)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise TidbBenchError(f"{at}: {item!r} is not a finite number")
        if isinstance(item, str) and item.strip().lower().lstrip("+-") in _NON_FINITE_WORDS:
            raise TidbBenchError(f"{at}: {item!r} is not a finite number")
        if isinstance(item, dict):
            stack.extend((v, f"{at}.{k}") for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, f"{at}[{i}]") for i, v in enumerate(item))


#: What a BenchmarkRun's name can be (an RFC 1123 subdomain); anything else is a path.
_RUN_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_FILE_SUFFIXES = (".yaml", ".yml", ".json", ".txt")


def _report_source(ref: str, namespace: str | None) -> ReportSource:
    """A run from a file (or stdin) when `ref` is one, else from the cluster by name."""
    path = Path(ref)
    if ref == "-" or path.is_file():
        return load_report_source(_read(ref), ref)
    if path.exists():
        raise TidbBenchError(f"{ref}: not a regular file (a directory?); give a saved run's file")
    if not _RUN_NAME.fullmatch(ref) or ref.endswith(_FILE_SUFFIXES):
        raise TidbBenchError(
            f"{ref}: no such file (and not a BenchmarkRun name, which is lower-case letters, "
            "digits, '-' and '.'); check the path"
        )
    from tidb_bench_operator.adapters.k8s import Kube, KubeError, context_namespace, load_api_client

    kubeconfig = kubeconfig_from_env()
    ns = namespace or context_namespace(kubeconfig)
    try:
        api = load_api_client(kubeconfig)
    except Exception as exc:  # the kubernetes client's config errors have no common base
        raise TidbBenchError(
            f"{ref}: no such file, and no cluster to look up a BenchmarkRun {ref!r} in "
            f"({type(exc).__name__}: {exc}); give a saved run's file or set KUBECONFIG"
        ) from None
    try:
        run = Kube(api).benchmark_run(ns, ref)
    except KubeError as exc:
        raise TidbBenchError(str(exc)) from None
    if run is None:
        raise TidbBenchError(
            f"{ref}: no such file, and no BenchmarkRun {ref!r} in namespace {ns!r} "
            "(kubectl get benchmarkruns -A lists them; --namespace picks one)"
        )
    status = dict(run.get("status") or {"phase": "Pending"})
    series = None
    results = status.get("resultsConfigMap")
    if isinstance(results, str) and results:
        try:
            data = Kube(load_api_client(kubeconfig)).configmap_data(ns, results)
        except KubeError:
            data = None  # the charts of QPS over time are left out; the rest stands
        series = _series({"data": data}) if data else None
    spec = run.get("spec")
    return ReportSource(ref, status, dict(spec) if isinstance(spec, dict) else None, series)


def _compare_sources(
    refs: Sequence[str], namespace: str | None
) -> tuple[ReportSource | None, list[Any]]:
    """--compare values: at most one run, any number of reference files."""
    from tidb_bench_operator.domain.reference import is_reference, parse_reference

    runs: list[ReportSource] = []
    references: list[Any] = []
    for ref in refs:
        if ref == "-" or Path(ref).is_file():
            from tidb_bench_operator.adapters.documents import load_yaml

            text = _read(ref)
            doc = load_yaml(text, ref)
            if is_reference(doc):
                references.extend(parse_reference(doc, ref).references)
                continue
            runs.append(load_report_source(text, ref))
        else:
            runs.append(_report_source(ref, namespace))
    if len(runs) > 1:
        raise TidbBenchError(
            f"--compare names {len(runs)} runs ({', '.join(r.name for r in runs)}); compare "
            "with one run at a time (reference files may be added)"
        )
    return (runs[0] if runs else None), references


def cmd_report(args: argparse.Namespace) -> int:
    """`tidb-bench report NAME|FILE`: Markdown on stdout, the chart with --svg, all of it
    in one file with --html."""
    from tidb_bench_operator.domain.report import render_markdown
    from tidb_bench_operator.domain.report_chart import render_svg
    from tidb_bench_operator.domain.report_html import render_html

    source = _report_source(args.run, args.namespace)
    other, references = _compare_sources(args.compare, args.namespace)
    series = source.series
    if args.results:
        series = load_report_source(_read(args.results), args.results).series
        if series is None:
            raise TidbBenchError(
                f"{args.results}: no series.json in it; save the ConfigMap named in the "
                "run's status.resultsConfigMap (kubectl get configmap NAME -o yaml)"
            )
    compare = (other.name, other.status) if other is not None else None
    options: dict[str, Any] = {"spec": source.spec, "references": references}
    target = ""
    try:
        print(render_markdown(source.name, source.status, compare, **options))
        if args.svg:
            target = args.svg
            chart = render_svg(
                source.status,
                f"BenchmarkRun {source.name}",
                compare=compare,
                series=series,
                **options,
            )
            Path(args.svg).write_text(chart, encoding="utf-8")
        if args.html:
            target = args.html
            page = render_html(source.name, source.status, compare, series=series, **options)
            Path(args.html).write_text(page, encoding="utf-8")
    except ValueError as exc:  # pydantic: a status this version cannot read
        raise TidbBenchError(
            f"{args.run}: not a BenchmarkRun status this version reads: {exc}"
        ) from None
    except OSError as exc:
        raise TidbBenchError(f"cannot write {target}: {exc.strerror}") from exc
    if args.html:
        print(f"tidb-bench report: wrote {args.html}", file=sys.stderr)
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


if __name__ == "__main__":
    sys.exit(main())
