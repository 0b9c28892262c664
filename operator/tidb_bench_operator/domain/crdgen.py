"""Build the CustomResourceDefinitions in crds/ from the pydantic models (`python -m ... crds/`)."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import core_schema

from tidb_bench_operator.domain.api.common import GROUP, VERSION
from tidb_bench_operator.domain.api.experiment import (
    BenchmarkExperimentSpec,
    BenchmarkExperimentStatus,
)
from tidb_bench_operator.domain.api.resources import (
    BenchmarkExperiment,
    BenchmarkRun,
    BenchmarkSchedule,
)
from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
from tidb_bench_operator.domain.api.run_status import BenchmarkRunStatus, SweepSummary
from tidb_bench_operator.domain.api.schedule import BenchmarkScheduleSpec, BenchmarkScheduleStatus

KINDS = ("BenchmarkRun", "BenchmarkSchedule", "BenchmarkExperiment")
FILES = {
    "BenchmarkRun": "benchmarkrun.yaml",
    "BenchmarkSchedule": "benchmarkschedule.yaml",
    "BenchmarkExperiment": "benchmarkexperiment.yaml",
}
HEADER = (
    "# Generated from the models in operator/tidb_bench_operator/domain/api/ by\n"
    "# `python -m tidb_bench_operator.domain.crdgen crds/` -- do not edit.\n"
)

# Keys of the output, in the order they are written. Anything else pydantic emits is an
# error, so a new kind of constraint cannot slip into the CRD unconverted.
_ORDER = (
    "description",
    "type",
    "format",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "nullable",
    "enum",
    "default",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "items",
    "additionalProperties",
    "properties",
    "required",
)
# Formats the API server knows (k8s.io/kube-openapi strfmt); others are dropped.
_FORMATS = frozenset({"date-time", "date", "int32", "int64", "float", "double", "byte"})
_DROPPED = frozenset({"title"})


class _CrdJsonSchema(GenerateJsonSchema):
    """JSON schema generation that also shows `default_factory` defaults."""

    def get_default_value(self, schema: core_schema.WithDefaultSchema) -> Any:
        """Call argument-less default factories; a model default becomes `{}`.

        `{}` suffices because the API server applies nested defaults once the object exists
        (structural defaulting), so each default is written once, on its own field.
        """
        factory = schema.get("default_factory")
        if factory is None or schema.get("default_factory_takes_data"):
            return super().get_default_value(schema)
        value = cast(Callable[[], Any], factory)()
        return {} if isinstance(value, BaseModel) else value


def openapi_schema(model: type[BaseModel], *, defaults: bool = True) -> dict[str, Any]:
    """The structural OpenAPI v3 schema of `model`: refs inlined, nulls as `nullable`."""
    raw = model.model_json_schema(by_alias=True, schema_generator=_CrdJsonSchema)
    defs = raw.get("$defs", {})
    return _convert(raw, defs, defaults=defaults)


def _resolve(node: Mapping[str, Any], defs: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """Inline `$ref`/single `allOf` and unwrap `anyOf [X, null]`; returns (node, null allowed)."""
    out = dict(node)
    nullable = False
    while True:
        if "$ref" in out:
            target = defs[out.pop("$ref").rsplit("/", 1)[-1]]
            out = {**target, **out}  # the field's own description and default win
        elif "allOf" in out and len(out["allOf"]) == 1:
            (inner,) = out.pop("allOf")
            out = {**inner, **out}
        elif "anyOf" in out:
            options = [o for o in out.pop("anyOf") if o != {"type": "null"}]
            if len(options) != 1:
                raise ValueError(f"not structural: anyOf of several types: {node}")
            nullable = True
            out = {**options[0], **out}
        else:
            return out, nullable


def _convert(node: Mapping[str, Any], defs: Mapping[str, Any], *, defaults: bool) -> dict[str, Any]:
    """Convert one pydantic JSON schema node (and its children) to structural OpenAPI v3."""
    src, nullable = _resolve(node, defs)
    out: dict[str, Any] = {}
    for key, value in src.items():
        if key in _DROPPED or key == "$defs":
            continue
        if key == "properties":
            out[key] = {
                name: _convert(child, defs, defaults=defaults) for name, child in value.items()
            }
        elif key == "items":
            out[key] = _convert(value, defs, defaults=defaults)
        elif key == "additionalProperties":
            if isinstance(value, Mapping):
                out[key] = _convert(value, defs, defaults=defaults)
            elif value is not False:  # false: extra="forbid"; pruning drops unknown fields
                raise ValueError(f"not structural: untyped additionalProperties: {node}")
        elif key == "const":
            out["enum"] = [value]
        elif key in ("exclusiveMinimum", "exclusiveMaximum"):
            # JSON Schema 2020-12 gives the bound; OpenAPI v3.0 wants the bound plus a flag.
            out[key.replace("exclusiveM", "m")] = value
            out[key] = True
        elif key == "default":
            if defaults and value is not None:
                out[key] = value
        elif key == "format":
            if value in _FORMATS:
                out[key] = value
        elif key in _ORDER:
            out[key] = value
        else:
            raise ValueError(f"no CRD equivalent for {key!r} in {node}")
    if nullable and "default" not in src:
        # Only required-but-nullable fields (Latency.value) need it: since v1.20 the API server
        # prunes a null it may not store, which reads back as None through the default.
        out["nullable"] = True
    if "required" in out:
        # A required-but-nullable field may be absent: writers dump with exclude_none, and
        # readers (StepStatus) treat a missing key as null.
        props = out.get("properties", {})
        out["required"] = [n for n in out["required"] if not props.get(n, {}).get("nullable")]
        if not out["required"]:
            del out["required"]
    if (
        "type" not in out
        and not out.get("x-kubernetes-int-or-string")
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        raise ValueError(f"not structural: no type in {node}")
    return {key: out[key] for key in _ORDER if key in out}


def _text(model: type[BaseModel], field: str) -> str:
    """A field's description, for printer columns."""
    return model.model_fields[field].description or ""


def _column(
    name: str, type_: str, path: str, description: str = "", priority: int = 0
) -> dict[str, Any]:
    """One additionalPrinterColumns entry."""
    column: dict[str, Any] = {"name": name, "type": type_, "jsonPath": path}
    if description:
        column["description"] = description
    if priority:
        column["priority"] = priority
    return column


_AGE = _column("Age", "date", ".metadata.creationTimestamp")


def _columns(kind: str) -> list[dict[str, Any]]:
    """Printer columns: what `kubectl get` shows."""
    if kind == "BenchmarkRun":
        spec, status = BenchmarkRunSpec, BenchmarkRunStatus
        return [
            _column("Phase", "string", ".status.phase", _text(status, "phase")),
            _column("Cluster", "string", ".spec.cluster.name", _text(spec, "cluster")),
            _column(
                "Workload",
                "string",
                ".spec.workloads[0]",
                "First workload of the sweep; the summary columns are for it.",
            ),
            _column("QPS", "number", ".status.summary.peakQps", _text(SweepSummary, "peak_qps")),
            _column(
                "Threads",
                "integer",
                ".status.summary.peakThreads",
                _text(SweepSummary, "peak_threads"),
            ),
            _column(
                "P95(ms)",
                "number",
                ".status.summary.peakLatencyMs",
                _text(SweepSummary, "peak_latency_ms"),
            ),
            _column("Invalid", "integer", ".status.invalidSteps", _text(status, "invalid_steps")),
            _AGE,
        ]
    if kind == "BenchmarkExperiment":
        exp, est = BenchmarkExperimentSpec, BenchmarkExperimentStatus
        return [
            _column("Phase", "string", ".status.phase", _text(est, "phase")),
            _column("Cluster", "string", ".spec.cluster.name", _text(exp, "cluster")),
            _column("Variant", "string", ".status.variant", _text(est, "variant")),
            _column("Dry Run", "boolean", ".spec.dryRun", _text(exp, "dry_run"), priority=1),
            _column("Message", "string", ".status.message", _text(est, "message"), priority=1),
            _AGE,
        ]
    sched, st = BenchmarkScheduleSpec, BenchmarkScheduleStatus
    return [
        _column("Schedule", "string", ".spec.schedule", _text(sched, "schedule")),
        _column("Suspend", "boolean", ".spec.suspend", _text(sched, "suspend")),
        _column("Last Run", "date", ".status.lastScheduleTime", _text(st, "last_schedule_time")),
        _column("Last QPS", "number", ".status.lastPeakQps", _text(st, "last_peak_qps")),
        _column("Regressed", "boolean", ".status.regressed", _text(st, "regressed")),
        _column("Efficiency", "string", ".status.efficiency", _text(st, "efficiency")),
        _AGE,
    ]


def build_crd(kind: str) -> dict[str, Any]:
    """The apiextensions.k8s.io/v1 CustomResourceDefinition of one of KINDS."""
    resources: dict[str, tuple[type[BaseModel], type[BaseModel], type[BaseModel], list[str]]] = {
        "BenchmarkRun": (BenchmarkRun, BenchmarkRunSpec, BenchmarkRunStatus, ["bench", "benchrun"]),
        "BenchmarkSchedule": (
            BenchmarkSchedule,
            BenchmarkScheduleSpec,
            BenchmarkScheduleStatus,
            ["benchsched"],
        ),
        "BenchmarkExperiment": (
            BenchmarkExperiment,
            BenchmarkExperimentSpec,
            BenchmarkExperimentStatus,
            ["benchexp"],
        ),
    }
    if kind not in resources:
        raise ValueError(f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
    resource, spec_model, status_model, short_names = resources[kind]
    plural = kind.lower() + "s"
    spec = openapi_schema(spec_model)
    spec["description"] = _text(resource, "spec")
    # Status is written by the controller alone: server-side defaults there would only
    # make fields appear that the controller did not write.
    status = openapi_schema(status_model, defaults=False)
    status["description"] = _text(resource, "status")
    schema = {
        "description": inspect.cleandoc(resource.__doc__ or kind),
        "type": "object",
        "properties": {
            "apiVersion": {"description": f"API version: {GROUP}/{VERSION}.", "type": "string"},
            "kind": {"description": f"Kind: {kind}.", "type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
        "required": ["spec"],
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{GROUP}",
            "labels": {"app.kubernetes.io/name": "tidb-bench-operator"},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short_names,
                "categories": ["tidbbench"],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": _columns(kind),
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


#: Plain scalars that YAML 1.1 reads as booleans (https://yaml.org/type/bool.html). kubectl's
#: YAML reader (go-yaml v2) follows 1.1, so an unquoted `n` (TrialSummary's field) became
#: `false` and `kubectl apply` refused the CRD; PyYAML quotes only some of them itself.
YAML11_BOOLEANS = frozenset(
    spelling
    for word in ("y", "yes", "n", "no", "true", "false", "on", "off")
    for spelling in (word, word.capitalize(), word.upper())
)


def render_yaml(kind: str) -> str:
    """The text of crds/<kind>.yaml: header comment plus the CRD as YAML."""
    import yaml  # only the writer needs YAML; the builder stays stdlib + pydantic

    class Dumper(yaml.SafeDumper):
        pass

    def string(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        style = "'" if value in YAML11_BOOLEANS else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, string)
    body = yaml.dump(build_crd(kind), Dumper=Dumper, sort_keys=False, width=100, allow_unicode=True)
    return HEADER + body


def main(argv: list[str] | None = None) -> int:
    """Write the CRD of each of KINDS (FILES names the file) into the given directory."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tidb_bench_operator.domain.crdgen CRD_DIR", file=sys.stderr)
        return 2
    out_dir = Path(args[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    for kind in KINDS:
        path = out_dir / FILES[kind]
        path.write_text(render_yaml(kind), encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
