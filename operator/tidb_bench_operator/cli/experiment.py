"""`tidb-bench report` for a BenchmarkExperiment: from a saved List (the experiment, its
runs, the operation run's results ConfigMaps) or from the cluster (experiment/NAME)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any, NamedTuple

from tidb_bench_operator.cli.sources import from_results_configmaps, read_input
from tidb_bench_operator.config import kubeconfig_from_env
from tidb_bench_operator.errors import TidbBenchError

#: `tidb-bench report experiment/NAME` (kubectl's TYPE/NAME form).
EXPERIMENT_PREFIXES = ("experiment/", "benchmarkexperiment/", "benchmarkexperiments/")
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_RUN_LABEL = "tidbbench.io/run"


class ExperimentSource(NamedTuple):
    """An experiment to report: the object, its runs, and stored series by run name."""

    experiment: dict[str, Any]
    runs: list[dict[str, Any]]
    series: dict[str, dict[str, Any]]


def _run_names(experiment: dict[str, Any]) -> list[str]:
    """The runs the experiment's status names: each variant's and the window's."""
    status = experiment.get("status") if isinstance(experiment.get("status"), dict) else {}
    assert isinstance(status, dict)
    names = [v.get("run") for v in status.get("variants") or [] if isinstance(v, dict)]
    window = status.get("window")
    if isinstance(window, dict):
        names.append(window.get("run"))
    return [str(n) for n in names if n]


def _series_by_run(configmaps: list[dict[str, Any]], origin: str) -> dict[str, dict[str, Any]]:
    """Each run's stored interval series, from its results ConfigMaps (grouped by label)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for cm in configmaps:
        meta = cm.get("metadata") if isinstance(cm.get("metadata"), dict) else {}
        labels = meta.get("labels") if isinstance(meta, dict) else None
        run = labels.get(_RUN_LABEL) if isinstance(labels, dict) else None
        if run:
            groups.setdefault(str(run), []).append(cm)
    out = {}
    for run, items in groups.items():
        series = from_results_configmaps(items, f"{origin}: {run}").series
        if series is not None:
            out[run] = series
    return out


def load_experiment_source(doc: object, origin: str) -> ExperimentSource | None:
    """The experiment in a loaded document (one BenchmarkExperiment, or a List holding one
    with its runs and results ConfigMaps); None when the document holds no experiment."""
    items = doc.get("items") if isinstance(doc, dict) and doc.get("kind") == "List" else [doc]
    if not isinstance(items, list):
        return None
    found = [i for i in items if isinstance(i, dict) and i.get("kind") == "BenchmarkExperiment"]
    if not found:
        return None
    if len(found) > 1:
        raise TidbBenchError(f"{origin}: {len(found)} BenchmarkExperiments; save one at a time")
    runs = [i for i in items if isinstance(i, dict) and i.get("kind") == "BenchmarkRun"]
    cms = [i for i in items if isinstance(i, dict) and i.get("kind") == "ConfigMap"]
    return ExperimentSource(found[0], runs, _series_by_run(cms, origin))


def find_experiment_source(ref: str, namespace: str | None) -> ExperimentSource | None:
    """`experiment/NAME` from the cluster, or a saved file holding an experiment; None when
    `ref` is something else (a run, a schedule)."""
    for prefix in EXPERIMENT_PREFIXES:
        if ref.lower().startswith(prefix):
            found = experiment_from_cluster(ref[len(prefix) :], namespace)
            if found is None:
                raise TidbBenchError(
                    f"{ref}: no such BenchmarkExperiment (kubectl get benchmarkexperiments -A "
                    "lists them; --namespace picks one)"
                )
            return found
    if ref == "-" or not Path(ref).is_file():
        return None
    from tidb_bench_operator.adapters.documents import load_yaml

    return load_experiment_source(load_yaml(read_input(ref), ref), ref)


def experiment_from_cluster(name: str, namespace: str | None) -> ExperimentSource | None:
    """The experiment NAME, the runs it names and their stored series; None if absent."""
    from tidb_bench_operator.adapters.k8s import Kube, context_namespace, load_api_client
    from tidb_bench_operator.errors import KubeError

    if not _NAME.fullmatch(name):
        raise TidbBenchError(f"{name}: not a BenchmarkExperiment name")
    kubeconfig = kubeconfig_from_env()
    ns = namespace or context_namespace(kubeconfig)
    try:
        kube = Kube(load_api_client(kubeconfig))
    except Exception as exc:  # the kubernetes client's config errors have no common base
        raise TidbBenchError(
            f"{name}: no cluster to read a BenchmarkExperiment from ({type(exc).__name__}); "
            "set KUBECONFIG, or give a saved file"
        ) from None
    try:
        experiment = kube.benchmark_experiment(ns, name)
        if experiment is None:
            return None
        runs, configmaps = [], []
        for run in _run_names(experiment):
            found = kube.benchmark_run(ns, run)
            if found is not None:
                runs.append(found)
                configmaps += kube.results_configmaps(ns, run)
    except KubeError as exc:
        raise TidbBenchError(str(exc)) from None
    return ExperimentSource(experiment, runs, _series_by_run(configmaps, name))


def report_experiment(args: argparse.Namespace, source: ExperimentSource, write: Any) -> int:
    """Markdown on stdout: the comparison of the variants, or the operations window; the
    chart with --svg (`write(path, text)` writes it)."""
    from tidb_bench_operator.domain.report.experiment import (
        experiment_report,
        render_experiment_markdown,
        render_experiment_svg,
    )
    from tidb_bench_operator.domain.report.window import (
        render_window_markdown,
        render_window_svg,
        window_report,
    )

    if args.compare or args.results or args.html:
        raise TidbBenchError(
            f"{args.run}: --compare, --results and --html are for runs; an experiment's report "
            "compares its own variants (give its runs and results ConfigMaps in the same List)"
        )
    experiment = source.experiment
    spec = experiment.get("spec") if isinstance(experiment.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    try:
        if spec.get("operation"):
            status = experiment.get("status") or {}
            window = status.get("window") if isinstance(status, dict) else None
            run_name = window.get("run") if isinstance(window, dict) else None
            run = next(
                (r for r in source.runs if (r.get("metadata") or {}).get("name") == run_name),
                None,
            )
            report = window_report(experiment, run, source.series.get(str(run_name)))
            print(render_window_markdown(report))
            chart = render_window_svg(report) if args.svg else ""
        else:
            compared = experiment_report(experiment, source.runs)
            print(render_experiment_markdown(compared))
            chart = render_experiment_svg(compared) if args.svg else ""
    except ValueError as exc:  # pydantic: a status this version cannot read
        raise TidbBenchError(
            f"{args.run}: not a BenchmarkExperiment this version reads: {exc}"
        ) from None
    if args.svg:
        write(args.svg, chart)
    return 0
