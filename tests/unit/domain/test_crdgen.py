"""The generated CRDs: committed copies match, schemas are structural and say what the models say."""

from __future__ import annotations

import copy
import re
import typing
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from tidb_bench_operator.domain import crdgen
from tidb_bench_operator.domain.api.experiment import (
    BenchmarkExperimentSpec,
    BenchmarkExperimentStatus,
    Restored,
    VariantStatus,
    VariantSummary,
)
from tidb_bench_operator.domain.api.results import Latency
from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
from tidb_bench_operator.domain.api.run_status import (
    BenchmarkRunStatus,
    Condition,
    Environment,
    PreflightCheck,
    PreflightStatus,
    StepStatus,
    SweepSummary,
    WorkloadSummary,
)
from tidb_bench_operator.domain.api.schedule import (
    BenchmarkScheduleSpec,
    BenchmarkScheduleStatus,
    HistoryEntry,
)
from tidb_bench_operator.domain.experiment.plan import build_plan, build_stash, stash_entries
from unit.domain.experiment.support import KEY, TC, experiment

ROOT = Path(__file__).resolve().parents[3]
MODELS: dict[str, tuple[type[BaseModel], type[BaseModel]]] = {
    "BenchmarkRun": (BenchmarkRunSpec, BenchmarkRunStatus),
    "BenchmarkSchedule": (BenchmarkScheduleSpec, BenchmarkScheduleStatus),
    "BenchmarkExperiment": (BenchmarkExperimentSpec, BenchmarkExperimentStatus),
}
#: The only fields that hold arbitrary JSON: a variant's or the operation's merge patches and
#: the stashed values.
PRESERVED = {
    "BenchmarkExperiment": [
        ".spec.operation.groups[].patch",
        ".spec.operation.patch",
        ".spec.variants[].patch",
        ".spec.variants[].groups[].patch",
        ".status.stash[].value",
    ]
}
KINDS = list(MODELS)


def schema_of(kind: str) -> dict[str, Any]:
    """The openAPIV3Schema of the generated CRD."""
    version = crdgen.build_crd(kind)["spec"]["versions"][0]
    return typing.cast(dict[str, Any], version["schema"]["openAPIV3Schema"])


def nodes(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node with its path."""
    yield path, node
    for name, child in node.get("properties", {}).items():
        yield from nodes(child, f"{path}.{name}")
    if "items" in node:
        yield from nodes(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from nodes(node["additionalProperties"], f"{path}{{}}")


def validate(node: dict[str, Any], value: Any, path: str = "") -> list[str]:
    """What the API server would reject or prune in `value` (the subset of OpenAPI we use)."""
    if value is None:
        return [] if node.get("nullable") else [f"{path}: null would be pruned"]
    if node.get("x-kubernetes-preserve-unknown-fields"):
        # Kept as written; a typed one must still be of its type.
        ok = "type" not in node or isinstance(value, dict)
        return [] if ok else [f"{path}: {value!r} is not {node['type']}"]
    if node.get("x-kubernetes-int-or-string"):
        if not isinstance(value, int | str) or isinstance(value, bool):
            return [f"{path}: not an integer or string"]
        if isinstance(value, str) and not re.search(node["pattern"], value):
            return [f"{path}: does not match {node['pattern']}"]
        return []
    kind = node["type"]
    python_types: dict[str, Any] = {
        "object": (dict,),
        "array": (list,),
        "string": (str,),
        "integer": (int,),
        "number": (int, float),
        "boolean": (bool,),
    }
    if not isinstance(value, python_types[kind]) or (
        kind in ("integer", "number") and isinstance(value, bool)
    ):
        return [f"{path}: {value!r} is not {kind}"]
    errors: list[str] = []
    if "enum" in node and value not in node["enum"]:
        errors.append(f"{path}: {value!r} not in {node['enum']}")
    if kind == "object":
        for name in node.get("required", []):
            if name not in value:
                errors.append(f"{path}.{name}: required")
        for name, child in value.items():
            if name in node.get("properties", {}):
                errors += validate(node["properties"][name], child, f"{path}.{name}")
            elif "additionalProperties" in node:
                errors += validate(node["additionalProperties"], child, f"{path}.{name}")
            elif path != ".metadata":
                errors.append(f"{path}.{name}: unknown field would be pruned")
    elif kind == "array":
        if len(value) < node.get("minItems", 0) or len(value) > node.get("maxItems", len(value)):
            errors.append(f"{path}: {len(value)} items out of bounds")
        for i, item in enumerate(value):
            errors += validate(node["items"], item, f"{path}[{i}]")
    elif kind == "string":
        if "pattern" in node and not re.search(node["pattern"], value):
            errors.append(f"{path}: {value!r} does not match {node['pattern']}")
        if not node.get("minLength", 0) <= len(value) <= node.get("maxLength", len(value)):
            errors.append(f"{path}: length out of bounds")
        if node.get("format") == "date-time":
            datetime.fromisoformat(value.replace("Z", "+00:00"))
    elif kind in ("integer", "number"):
        low, high = node.get("minimum"), node.get("maximum")
        if low is not None and (value < low or (node.get("exclusiveMinimum") and value == low)):
            errors.append(f"{path}: {value} below {low}")
        if high is not None and value > high:
            errors.append(f"{path}: {value} above {high}")
    return errors


def apply_defaults(node: dict[str, Any], value: Any) -> Any:
    """Structural defaulting as the API server does it: absent fields get defaults, recursively."""
    if isinstance(value, dict) and node.get("type") == "object":
        result = dict(value)
        for name, child in node.get("properties", {}).items():
            if name not in result and "default" in child:
                result[name] = copy.deepcopy(child["default"])
            if name in result:
                result[name] = apply_defaults(child, result[name])
        if isinstance(node.get("additionalProperties"), dict):
            for name in result:
                result[name] = apply_defaults(node["additionalProperties"], result[name])
        return result
    if isinstance(value, list) and "items" in node:
        return [apply_defaults(node["items"], item) for item in value]
    return value


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """Pydantic models inside a field annotation (X, X | None, list[X], dict[str, X])."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found += models_in(arg)
    return found


def check_descriptions(model: type[BaseModel], node: dict[str, Any], path: str) -> list[str]:
    """Fields of `model` (recursively) whose description is missing or differs in `node`."""
    problems: list[str] = []
    for name, field in model.model_fields.items():
        alias = field.alias or name
        here = f"{path}.{alias}"
        prop = node["properties"].get(alias)
        if prop is None:
            problems.append(f"{here}: not in the CRD")
            continue
        if not field.description:
            problems.append(f"{here}: no description on {model.__name__}.{name}")
        elif prop.get("description") != field.description:
            problems.append(f"{here}: CRD says {prop.get('description')!r}")
        for inner in models_in(field.annotation):
            target = prop["items"] if prop["type"] == "array" else prop
            problems += check_descriptions(inner, target, here)
    return problems


@pytest.mark.parametrize("kind", KINDS)
def test_the_committed_crd_is_exactly_what_the_generator_writes(kind: str) -> None:
    committed = (ROOT / "crds" / crdgen.FILES[kind]).read_text(encoding="utf-8")
    assert committed == crdgen.render_yaml(kind), (
        "crds/ is stale: run `.venv/bin/python -m tidb_bench_operator.domain.crdgen crds/`"
    )
    assert yaml.safe_load(committed) == crdgen.build_crd(kind)
    assert committed.startswith(crdgen.HEADER)


def test_benchmarkrun_names_are_the_fixed_ones() -> None:
    crd = crdgen.build_crd("BenchmarkRun")
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["metadata"]["name"] == "benchmarkruns.tidbbench.io"
    assert crd["spec"]["group"] == "tidbbench.io" and crd["spec"]["scope"] == "Namespaced"
    names = crd["spec"]["names"]
    assert (names["kind"], names["plural"], names["singular"]) == (
        "BenchmarkRun",
        "benchmarkruns",
        "benchmarkrun",
    )
    assert names["shortNames"] == ["bench", "benchrun"]
    assert names["categories"] == ["tidbbench"]
    (version,) = crd["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}


def test_benchmarkschedule_names_are_the_fixed_ones() -> None:
    crd = crdgen.build_crd("BenchmarkSchedule")
    assert crd["metadata"]["name"] == "benchmarkschedules.tidbbench.io"
    assert crd["spec"]["names"]["plural"] == "benchmarkschedules"
    assert crd["spec"]["names"]["shortNames"] == ["benchsched"]
    assert crd["spec"]["versions"][0]["subresources"] == {"status": {}}


def test_kubectl_get_benchmarkruns_shows_the_product_columns() -> None:
    columns = crdgen.build_crd("BenchmarkRun")["spec"]["versions"][0]["additionalPrinterColumns"]
    assert [(c["name"], c["type"], c["jsonPath"]) for c in columns] == [
        ("Phase", "string", ".status.phase"),
        ("Cluster", "string", ".spec.cluster.name"),
        ("Workload", "string", ".spec.workloads[0]"),
        ("QPS", "number", ".status.summary.peakQps"),
        ("Threads", "integer", ".status.summary.peakThreads"),
        ("P95(ms)", "number", ".status.summary.peakLatencyMs"),
        ("Invalid", "integer", ".status.invalidSteps"),
        ("Age", "date", ".metadata.creationTimestamp"),
    ]


def test_kubectl_get_benchmarkschedules_shows_schedule_and_regression_columns() -> None:
    columns = crdgen.build_crd("BenchmarkSchedule")["spec"]["versions"][0]
    names = [c["name"] for c in columns["additionalPrinterColumns"]]
    assert names == [
        "Schedule", "Suspend", "Last Run", "Last QPS", "Regressed", "Efficiency", "Age"
    ]  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
def test_every_printer_column_points_at_a_field_of_the_right_type(kind: str) -> None:
    schema = schema_of(kind)
    version = crdgen.build_crd(kind)["spec"]["versions"][0]
    for column in version["additionalPrinterColumns"]:
        if column["jsonPath"].startswith(".metadata."):
            continue
        node = schema
        for part in column["jsonPath"].lstrip(".").split("."):
            name, index = re.fullmatch(r"([A-Za-z]+)(\[0\])?", part).groups()  # type: ignore[union-attr]
            node = node["properties"][name]
            if index:
                node = node["items"]
        expected = {"date": "string", "string": "string"}.get(column["type"], column["type"])
        assert node["type"] == expected, column


@pytest.mark.parametrize("kind", KINDS)
def test_the_schema_is_structural(kind: str) -> None:
    forbidden = {"$ref", "$defs", "anyOf", "oneOf", "allOf", "not", "title", "const", "uniqueItems"}
    preserved = []
    for path, node in nodes(schema_of(kind)):
        assert not forbidden & node.keys(), (path, forbidden & node.keys())
        if node.get("x-kubernetes-preserve-unknown-fields"):
            preserved.append(path)
            assert "properties" not in node, path
            continue
        assert node.get("type") or node.get("x-kubernetes-int-or-string"), path
        assert not ("properties" in node and "additionalProperties" in node), path
        if node.get("type") == "array":
            assert "items" in node, path
        if "exclusiveMinimum" in node:
            assert node["exclusiveMinimum"] is True and "minimum" in node, path
    assert sorted(preserved) == sorted(PRESERVED.get(kind, []))


@pytest.mark.parametrize("kind", KINDS)
def test_every_model_field_is_described_once_and_the_crd_repeats_it(kind: str) -> None:
    schema = schema_of(kind)
    spec_model, status_model = MODELS[kind]
    problems = check_descriptions(spec_model, schema["properties"]["spec"], ".spec")
    problems += check_descriptions(status_model, schema["properties"]["status"], ".status")
    assert problems == []


@pytest.mark.parametrize("kind", KINDS)
def test_status_has_no_server_side_defaults(kind: str) -> None:
    status = schema_of(kind)["properties"]["status"]
    assert [path for path, node in nodes(status) if "default" in node] == []


@pytest.mark.parametrize("kind", KINDS)
def test_only_required_nullable_fields_are_nullable(kind: str) -> None:
    nullable = [path for path, node in nodes(schema_of(kind)) if node.get("nullable")]
    expected = (
        [".status.steps[].latencyMs.value", ".status.steps[].trials[].result.latencyMs.value"]
        if kind == "BenchmarkRun"
        else []
    )
    assert nullable == expected


def test_api_server_defaults_equal_the_model_defaults() -> None:
    minimal = {"cluster": {"name": "basic"}, "credentials": {"secretRef": {"name": "c"}}}
    spec_schema = schema_of("BenchmarkRun")["properties"]["spec"]
    defaulted = apply_defaults(spec_schema, minimal)
    expected = BenchmarkRunSpec.model_validate(minimal).model_dump(
        by_alias=True, exclude_none=True, mode="json"
    )
    assert defaulted == expected
    assert defaulted["preflight"]["maxLeaderSizeSkew"] == 0.5
    assert defaulted["resources"]["requests"] == {"cpu": "1", "memory": "512Mi"}


def test_schedule_defaults_reach_into_the_template() -> None:
    minimal = {
        "schedule": "@daily",
        "template": {"target": {"host": "db"}, "credentials": {"secretRef": {"name": "c"}}},
    }
    spec_schema = schema_of("BenchmarkSchedule")["properties"]["spec"]
    defaulted = apply_defaults(spec_schema, minimal)
    expected = BenchmarkScheduleSpec.model_validate(minimal).model_dump(
        by_alias=True, exclude_none=True, mode="json"
    )
    assert defaulted == expected
    assert defaulted["template"]["target"]["port"] == 4000


def test_strict_lower_bounds_use_the_openapi_3_0_form() -> None:
    slo = schema_of("BenchmarkRun")["properties"]["spec"]["properties"]["slo"]
    assert slo["properties"]["latencyMs"]["minimum"] == 0
    assert slo["properties"]["latencyMs"]["exclusiveMinimum"] is True
    assert validate(slo, {"latencyMs": 0}) != []


def test_quantities_are_int_or_string_with_the_kubernetes_pattern() -> None:
    spec = schema_of("BenchmarkRun")["properties"]["spec"]
    requests = spec["properties"]["resources"]["properties"]["requests"]["additionalProperties"]
    assert requests["x-kubernetes-int-or-string"] is True
    assert validate(requests, 2) == [] and validate(requests, "500m") == []
    assert validate(requests, "lots") != []


def full_run_status() -> BenchmarkRunStatus:
    """A status with every field filled, as the controller may write it."""
    now = datetime(2024, 5, 21, 3, 51, 57, tzinfo=UTC)
    latency = Latency(min=0.27, avg=1.27, max=24.1, percentile=95, value=None)
    verdict = {
        "peak_qps": 51023.9,
        "peak_threads": 128,
        "peak_latency_ms": 1.9,
        "recommended_threads": 128,
        "recommended_qps": 51023.9,
        "saturation_threads": 128,
        "headline": "51k QPS at 128 threads",
    }
    return BenchmarkRunStatus(
        phase="Succeeded",
        message="done",
        conditions=[
            Condition(type="Complete", status="True", reason="Done", last_transition_time=now)
        ],
        observed_generation=1,
        waiting_for="other-run",
        started_at=now,
        finished_at=now,
        preflight=PreflightStatus(
            checks=[PreflightCheck(name="store-state", status="Pass", message="ok", stores=[1])],
            last_evaluated=now,
            attempts=1,
        ),
        current_step=0,
        steps=[
            StepStatus(
                index=0,
                workload="oltp_point_select",
                threads=128,
                phase="Succeeded",
                clients=1,
                tps=1.0,
                qps=1.0,
                read_qps=1.0,
                write_qps=0.0,
                other_qps=0.0,
                latency_ms=latency,
                errors_per_sec=0.0,
                reconnects_per_sec=0.0,
                events=10,
                duration_seconds=60.0,
                sysbench_version="1.0.20",
                started_at=now,
                finished_at=now,
                valid=True,
                client_saturated=False,
                notes=["percentile: worst client"],
                job_names=["run-s0-c0"],
            )
        ],
        summary=SweepSummary(
            workload="oltp_point_select",
            per_workload=[WorkloadSummary(workload="oltp_point_select", **verdict)],
            **verdict,
        ),
        environment=Environment(
            tidb_version="v8.1.0",
            server_version="8.0.11-TiDB-v8.1.0",
            sysbench_version="1.0.20",
            images={"tidb": "pingcap/tidb:v8.1.0"},
            replicas={"tikv": 3},
            nodes=["node-1"],
        ),
        results_config_map="run-results",
    )


def test_a_full_run_status_is_accepted_by_the_crd_schema() -> None:
    schema = schema_of("BenchmarkRun")["properties"]["status"]
    status = full_run_status().model_dump(by_alias=True, exclude_none=True, mode="json")
    assert validate(schema, status, ".status") == []
    with_nulls = full_run_status().model_dump(by_alias=True, mode="json")
    assert with_nulls["steps"][0]["latencyMs"]["value"] is None
    latency = schema["properties"]["steps"]["items"]["properties"]["latencyMs"]
    assert validate(latency, with_nulls["steps"][0]["latencyMs"]) == []


def test_a_full_schedule_status_is_accepted_by_the_crd_schema() -> None:
    now = datetime(2024, 5, 21, tzinfo=UTC)
    entry = HistoryEntry(
        name="nightly-1",
        outcome="Succeeded",
        peak_qps=5.0,
        baseline_qps=6.0,
        regressed=True,
        started_at=now,
        finished_at=now,
    )
    status = BenchmarkScheduleStatus(
        last_schedule_time=now,
        last_successful_run="nightly-1",
        last_peak_qps=5.0,
        active=["nightly-2"],
        history=[entry],
        regressed=True,
        conditions=[Condition(type="Regressed", status="True")],
        observed_generation=3,
        message="peak QPS 17% below baseline",
    ).model_dump(by_alias=True, exclude_none=True, mode="json")
    schema = schema_of("BenchmarkSchedule")["properties"]["status"]
    assert validate(schema, status, ".status") == []


def test_an_experiments_spec_and_full_status_are_accepted_by_the_crd_schema() -> None:
    spec = experiment()
    stash = build_stash(spec, {KEY: TC["spec"]})
    now = datetime(2026, 12, 1, tzinfo=UTC)
    status = BenchmarkExperimentStatus(
        phase="Restoring",
        stash=stash_entries(stash),
        current=1,
        variant="tikv-4",
        variants=[
            VariantStatus(name="baseline", phase="Succeeded", run="x-baseline",
                          summary=VariantSummary(peak_qps=49_200.0, peak_threads=128)),
            VariantStatus(name="tikv-4", phase="Skipped", run="x-tikv-4", patch_applied_at=now,
                          settled_at=now, settle_seconds=42.5, skipped_reason="unfair: pod on n1"),
        ],
        applied="tikv-4",
        restore_reason="Unfair",
        restore_started_at=now,
        restored=Restored(at=now, left_alone=["/tidb/replicas was changed"]),
        plan=[s.text() for s in build_plan(spec, stash)],
        message="restoring",
    ).model_dump(by_alias=True, exclude_none=True, mode="json")  # fmt: skip
    schema = schema_of("BenchmarkExperiment")["properties"]
    assert validate(schema["status"], status, ".status") == []
    body = spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert validate(schema["spec"], body, ".spec") == []
    assert [e["pointer"] for e in status["stash"] if e.get("absent")] == [
        "/tikv/topologySpreadConstraints"
    ]


def test_examples_are_accepted_by_the_crd_schema_without_pruning() -> None:
    checked = 0
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if not document or not str(document.get("apiVersion", "")).startswith("tidbbench."):
                continue
            schema = schema_of(document["kind"])
            assert validate(schema, document) == [], path.name
            checked += 1
    assert checked >= 3


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="BenchmarkRun"):
        crdgen.build_crd("Backup")


def test_main_writes_both_crds_with_the_do_not_edit_header(tmp_path: Path) -> None:
    assert crdgen.main([str(tmp_path / "crds")]) == 0
    for kind in KINDS:
        text = (tmp_path / "crds" / crdgen.FILES[kind]).read_text(encoding="utf-8")
        assert "do not edit" in text.splitlines()[1]
        assert yaml.safe_load(text) == crdgen.build_crd(kind)


def test_main_without_a_directory_prints_usage() -> None:
    assert crdgen.main([]) == 2


def test_a_model_with_an_untyped_field_cannot_become_a_crd() -> None:
    class Loose(BaseModel):
        anything: Any = None

    with pytest.raises(ValueError, match="not structural"):
        crdgen.openapi_schema(Loose)


def test_a_model_with_a_union_of_types_cannot_become_a_crd() -> None:
    class Mixed(BaseModel):
        value: int | str = 0

    with pytest.raises(ValueError, match="anyOf"):
        crdgen.openapi_schema(Mixed)


@pytest.mark.parametrize("kind", crdgen.KINDS)
def test_the_crd_reads_the_same_under_yaml_1_1_booleans_as_kubectl_reads_it(kind: str) -> None:
    """kubectl (go-yaml v2) reads y/n/yes/no/on/off as booleans: a field named `n` must be
    quoted, or `kubectl apply` fails with "cannot unmarshal bool into ... string"."""
    import re

    import yaml

    class Yaml11(yaml.SafeLoader):
        pass

    Yaml11.add_implicit_resolver(
        "tag:yaml.org,2002:bool",
        re.compile(r"^(?:y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE"
                   r"|on|On|ON|off|Off|OFF)$"),
        list("yYnNtTfFoO"),
    )  # fmt: skip
    text = (ROOT / "crds" / crdgen.FILES[kind]).read_text(encoding="utf-8")
    assert yaml.load(text, Loader=Yaml11) == crdgen.build_crd(kind)
