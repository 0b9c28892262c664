"""Where `tidb-bench report` reads a run: a saved BenchmarkRun, its results ConfigMaps, a
reference file, or the cluster by name. Every document is read as untrusted input."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from tidb_bench_operator.config import kubeconfig_from_env
from tidb_bench_operator.domain.trust.frozen import admitted_spec
from tidb_bench_operator.errors import TidbBenchError


def read_input(path: str) -> str:
    """A whole input document (size-limited, BOM/UTF-16 aware); `-` reads stdin."""
    from tidb_bench_operator.adapters.documents import read_document

    return read_document(path)


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

    doc = load_yaml(text, origin)
    if isinstance(doc, dict) and doc.get("kind") == "List":
        items = doc.get("items") or []
        if not isinstance(items, list):
            raise TidbBenchError(
                f"{origin}: a List of malformed objects; save exactly one run "
                "(kubectl get benchmarkrun NAME -o yaml)"
            )
        if items and all(isinstance(i, dict) and i.get("kind") == "ConfigMap" for i in items):
            return from_results_configmaps(items, origin)
        if len(items) != 1:
            raise TidbBenchError(
                f"{origin}: a List of {len(items)} objects; save exactly one run "
                "(kubectl get benchmarkrun NAME -o yaml) or its results ConfigMaps "
                "(kubectl get configmaps -l tidbbench.io/run=NAME -o yaml)"
            )
        doc = items[0]
    if not isinstance(doc, dict):
        raise TidbBenchError(f"{origin}: expected a BenchmarkRun or a results ConfigMap")
    meta = doc.get("metadata") or {}
    if not isinstance(meta, dict):
        raise TidbBenchError(f"{origin}: metadata is not a mapping")
    if doc.get("kind") == "ConfigMap":
        return from_results_configmaps([doc], origin)
    if doc.get("kind") not in (None, "BenchmarkRun") or not isinstance(doc.get("status"), dict):
        raise TidbBenchError(
            f"{origin}: a {doc.get('kind') or 'document'} without a BenchmarkRun status; save "
            "the run with kubectl get benchmarkrun NAME -o yaml"
        )
    _refuse_non_finite(doc["status"], f"{origin}: status")
    spec = admitted_spec(doc) or doc.get("spec")  # what the run ran with
    return ReportSource(
        str(meta.get("name") or origin),
        dict(doc["status"]),
        dict(spec) if isinstance(spec, dict) else None,
    )


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


def from_results_configmaps(items: list[dict[str, Any]], origin: str) -> ReportSource:
    """A run (name, status and interval series) from its results ConfigMaps (domain.results_store).

    They have no phase: it is Succeeded when every step succeeded, Failed when one failed,
    else Running (the index is rewritten after every step). Read as strictly as a saved run:
    shapes checked, JSON with bounded nesting, finite numbers only.
    """
    from tidb_bench_operator.domain.manifests import LABEL_RUN, owner_name
    from tidb_bench_operator.domain.results_store import read_store
    from tidb_bench_operator.domain.untrusted import loads
    from tidb_bench_operator.errors import StoreError

    by_name: dict[str, dict[str, str]] = {}
    metas: dict[str, dict[str, Any]] = {}
    for item in items:
        meta, data = item.get("metadata") or {}, item.get("data") or {}
        if not isinstance(meta, dict) or not isinstance(data, dict):
            raise TidbBenchError(f"{origin}: a ConfigMap whose metadata or data is not a mapping")
        name = str(meta.get("name"))
        by_name[name] = {str(k): v for k, v in data.items() if isinstance(v, str)}
        metas[name] = meta
    index = next(
        (n for n, d in by_name.items() if {"steps.json", "steps.parts", "format"} & set(d)),
        None,
    )
    if index is None:
        raise TidbBenchError(
            f"{origin}: no ConfigMap with steps.json; is it a BenchmarkRun's results ConfigMap "
            "(status.resultsConfigMap)? Save all of them with kubectl get configmaps -l "
            "tidbbench.io/run=NAME -o yaml"
        )
    try:
        stored = read_store(index, by_name, loads=lambda text: loads(text, f"{origin}: {index}"))
    except StoreError as exc:
        raise TidbBenchError(
            f"{origin}: {exc}; save all of the run's results ConfigMaps with kubectl get "
            "configmaps -l tidbbench.io/run=NAME -o yaml"
        ) from None
    except ValueError as exc:
        raise TidbBenchError(f"{origin}: data.steps.json is not JSON: {exc}") from None
    steps = stored.steps
    if not all(isinstance(s, dict) for s in steps):
        raise TidbBenchError(f"{origin}: data.steps.json is not a list of step objects")
    _refuse_non_finite(steps, f"{origin}: data.steps.json")
    phases = {str(s.get("phase")) for s in steps}
    phase = (
        "Failed" if "Failed" in phases
        else "Succeeded" if steps and phases == {"Succeeded"}
        else "Running"
    )  # fmt: skip
    # None (no QPS-over-time charts) when the run stored no series at all.
    has_series = stored.series or any("series.json" in d for d in by_name.values())
    series = stored.series if has_series else None
    meta = metas[index]
    labels = meta.get("labels")
    name = (
        owner_name(meta, "BenchmarkRun")
        or (labels.get(LABEL_RUN) if isinstance(labels, dict) else None)
        or meta.get("name", origin)
    )
    return ReportSource(str(name), {"phase": phase, "steps": steps}, None, series)


def find_report_source(ref: str, namespace: str | None) -> ReportSource:
    """A run from a file (or stdin) when `ref` is one, else from the cluster by name."""
    path = Path(ref)
    if ref == "-" or path.is_file():
        return load_report_source(read_input(ref), ref)
    if path.exists():
        raise TidbBenchError(f"{ref}: not a regular file (a directory?); give a saved run's file")
    if not _RUN_NAME.fullmatch(ref) or ref.endswith(_FILE_SUFFIXES):
        raise TidbBenchError(
            f"{ref}: no such file (and not a BenchmarkRun name, which is lower-case letters, "
            "digits, '-' and '.'); check the path"
        )
    from tidb_bench_operator.adapters.k8s import Kube, context_namespace, load_api_client
    from tidb_bench_operator.errors import KubeError

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
    if status.get("resultsConfigMap"):
        try:
            items = Kube(api).results_configmaps(ns, ref)
            stored = from_results_configmaps(items, ref) if items else None
        except (KubeError, TidbBenchError):
            stored = None  # the charts and the trials' details are left out; the rest stands
        if stored is not None:
            series = stored.series
            status["steps"] = with_stored_trials(status.get("steps"), stored.status["steps"])
    spec = admitted_spec(run) or run.get("spec")  # what the run ran with
    return ReportSource(ref, status, dict(spec) if isinstance(spec, dict) else None, series)


def with_stored_trials(steps: object, stored: list[dict[str, Any]]) -> object:
    """Status steps with each one's trials, notes and disturbances as the store has them.

    Status keeps compact trials and a bounded few notes (domain/api/run_status.py); the
    results store keeps them all. A step the store does not have is kept as status has it.
    """
    if not isinstance(steps, list):
        return steps
    by_index = {s.get("index"): s for s in stored if isinstance(s, dict)}
    out = []
    for step in steps:
        full = by_index.get(step.get("index")) if isinstance(step, dict) else None
        if full is None:
            out.append(step)
            continue
        keys = ("trials", "notes", "disturbances")
        out.append({**step, **{k: full[k] for k in keys if k in full}})
    return out


def compare_sources(
    refs: Sequence[str], namespace: str | None
) -> tuple[ReportSource | None, list[Any]]:
    """--compare values: at most one run, any number of reference files."""
    from tidb_bench_operator.domain.report.reference import is_reference, parse_reference

    runs: list[ReportSource] = []
    references: list[Any] = []
    for ref in refs:
        if ref == "-" or Path(ref).is_file():
            from tidb_bench_operator.adapters.documents import load_yaml

            text = read_input(ref)
            doc = load_yaml(text, ref)
            if is_reference(doc):
                references.extend(parse_reference(doc, ref).references)
                continue
            runs.append(load_report_source(text, ref))
        else:
            runs.append(find_report_source(ref, namespace))
    if len(runs) > 1:
        raise TidbBenchError(
            f"--compare names {len(runs)} runs ({', '.join(r.name for r in runs)}); compare "
            "with one run at a time (reference files may be added)"
        )
    return (runs[0] if runs else None), references


#: `tidb-bench report schedule/NAME` reports a BenchmarkSchedule (kubectl's TYPE/NAME form).
SCHEDULE_PREFIXES = ("schedule/", "benchmarkschedule/", "benchmarkschedules/")


class ScheduleSource(NamedTuple):
    """A schedule to report: its name and status."""

    name: str
    status: dict[str, Any]


def find_schedule_source(ref: str, namespace: str | None) -> ScheduleSource | None:
    """The BenchmarkSchedule `ref` names: `schedule/NAME` in the cluster, or a saved
    BenchmarkSchedule file; None when `ref` is a run (or its results)."""
    for prefix in SCHEDULE_PREFIXES:
        if ref.lower().startswith(prefix):
            return _schedule_from_cluster(ref[len(prefix) :], namespace)
    if ref == "-" or not Path(ref).is_file():
        return None
    from tidb_bench_operator.adapters.documents import load_yaml

    doc = load_yaml(read_input(ref), ref)
    if not isinstance(doc, dict) or doc.get("kind") != "BenchmarkSchedule":
        return None
    meta, status = doc.get("metadata"), doc.get("status")
    if not isinstance(status, dict):
        raise TidbBenchError(
            f"{ref}: a BenchmarkSchedule without a status; save it from the cluster "
            "(kubectl get benchmarkschedule NAME -o yaml)"
        )
    _refuse_non_finite(status, f"{ref}: status")
    name = meta.get("name") if isinstance(meta, dict) else None
    return ScheduleSource(str(name or ref), status)


def _schedule_from_cluster(name: str, namespace: str | None) -> ScheduleSource:
    from tidb_bench_operator.adapters.k8s import Kube, context_namespace, load_api_client
    from tidb_bench_operator.errors import KubeError

    if not _RUN_NAME.fullmatch(name):
        raise TidbBenchError(
            f"schedule/{name}: not a BenchmarkSchedule name (lower-case letters, digits, "
            "'-' and '.')"
        )
    kubeconfig = kubeconfig_from_env()
    ns = namespace or context_namespace(kubeconfig)
    try:
        schedule = Kube(load_api_client(kubeconfig)).benchmark_schedule(ns, name)
    except KubeError as exc:
        raise TidbBenchError(str(exc)) from None
    except Exception as exc:  # the kubernetes client's config errors have no common base
        raise TidbBenchError(
            f"schedule/{name}: no cluster to read it from ({type(exc).__name__}: {exc}); "
            "set KUBECONFIG, or give a saved BenchmarkSchedule file"
        ) from None
    if schedule is None:
        raise TidbBenchError(
            f"schedule/{name}: no BenchmarkSchedule {name!r} in namespace {ns!r} "
            "(kubectl get benchmarkschedules -A lists them; --namespace picks one)"
        )
    return ScheduleSource(name, dict(schedule.get("status") or {}))
