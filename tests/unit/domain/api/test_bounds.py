"""Every integer field of both resources is bounded, in the models and the CRDs; pdURL's form.

A bound is what the arithmetic behind the field survives (a timedelta added to a timestamp,
a sleep): tested at the edge and past it, and the generated CRD carries the same maximum, so
the API server refuses what the models would.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from tidb_bench_operator.domain.api.common import MAX_COUNT, MAX_PD_URL, MAX_SECONDS
from tidb_bench_operator.domain.api.resources import parse_run_spec, parse_schedule_spec
from tidb_bench_operator.errors import SpecError

CRDS = Path(__file__).resolve().parents[4] / "crds"
BASE: dict[str, Any] = {"cluster": {"name": "basic"}, "workloads": ["oltp_point_select"],
                        "threads": [1], "credentials": {"secretRef": {"name": "creds"}}}  # fmt: skip


def _spec_ints(schema: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = []
    if schema.get("type") == "integer":
        found.append((path, schema))
    for key, sub in (schema.get("properties") or {}).items():
        found += _spec_ints(sub, f"{path}.{key}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            found += _spec_ints(schema[key], f"{path}[]")
    return found


@pytest.mark.parametrize("crd", ["benchmarkrun.yaml", "benchmarkschedule.yaml"])
@pytest.mark.parametrize("part", ["spec", "status"])
def test_every_integer_field_of_the_crds_has_a_maximum(crd: str, part: str) -> None:
    doc = yaml.safe_load((CRDS / crd).read_text())
    schema = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][part]
    fields = _spec_ints(schema)
    assert fields
    assert [p for p, s in fields if "maximum" not in s] == []


def test_a_status_count_past_what_json_keeps_exactly_is_refused() -> None:
    from pydantic import ValidationError

    from tidb_bench_operator.domain.api.common import MAX_STATUS_INT
    from tidb_bench_operator.domain.api.run_status import BenchmarkRunStatus

    BenchmarkRunStatus.model_validate({"currentStep": MAX_STATUS_INT})
    with pytest.raises(ValidationError):
        BenchmarkRunStatus.model_validate({"currentStep": MAX_STATUS_INT + 1})


def test_the_longest_time_survives_a_timedelta_on_any_timestamp_until_year_9000() -> None:
    assert datetime(9000, 1, 1, tzinfo=UTC) + timedelta(seconds=MAX_SECONDS) > datetime(
        9000, 1, 1, tzinfo=UTC
    )


def _toleration(seconds: int) -> dict[str, Any]:
    toleration = {"key": "k", "operator": "Exists", "effect": "NoExecute"}
    return {"placement": {"tolerations": [{**toleration, "tolerationSeconds": seconds}]}}


@pytest.mark.parametrize(
    ("field", "wire", "limit"),
    [
        ("ttlSecondsAfterFinished", lambda v: {"ttlSecondsAfterFinished": v}, MAX_SECONDS),
        ("guard.maxPendingOperators", lambda v: {"guard": {"maxPendingOperators": v}}, MAX_COUNT),
        ("placement.tolerations[0].tolerationSeconds", _toleration, MAX_SECONDS),
    ],
)
def test_run_fields_are_accepted_at_their_bound_and_refused_past_it(
    field: str, wire: Callable[[int], dict[str, Any]], limit: int
) -> None:
    parse_run_spec({**BASE, **wire(limit)})
    with pytest.raises(SpecError) as info:
        parse_run_spec({**BASE, **wire(limit + 1)})
    assert str(info.value).startswith(f"spec.{field}: ")


def test_a_ttl_of_1e14_seconds_is_refused() -> None:
    with pytest.raises(SpecError, match="ttlSecondsAfterFinished"):
        parse_run_spec({**BASE, "ttlSecondsAfterFinished": 100_000_000_000_000})


def test_a_schedule_starting_deadline_is_bounded() -> None:
    def schedule(deadline: int) -> dict[str, Any]:
        return {"schedule": "0 2 * * *", "startingDeadlineSeconds": deadline, "template": BASE}

    parse_schedule_spec(schedule(MAX_SECONDS))
    with pytest.raises(SpecError, match="startingDeadlineSeconds"):
        parse_schedule_spec(schedule(MAX_SECONDS + 1))


@pytest.mark.parametrize(
    "url",
    ["http://basic-pd.tidb:2379", "https://10.0.0.1:2379/", "http://[fd00::1]:2379/prefix/pd",
     "http://pd"],
)  # fmt: skip
def test_a_pd_url_is_scheme_host_port_and_path_prefix(url: str) -> None:
    assert parse_run_spec({**BASE, "target": {"pdURL": url}}).target is not None


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://meta.internal/latest?x=", "has a query (?)"),
        ("http://pd:2379/#frag", "has a fragment (#)"),
        ("http://user:pw@pd:2379", "has userinfo (user@)"),
        ("ftp://pd:2379", "must start with http:// or https://"),
        ("http://pd:99999", "port '99999' is outside 1..65535"),
        ("http://pd 2379", "is not scheme://host[:port][/path prefix]"),
        ("http://pd:2379/" + "a" * MAX_PD_URL, "characters long; at most 512"),
    ],
)
def test_a_pd_url_with_more_is_refused_naming_what(url: str, reason: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_run_spec({**BASE, "target": {"pdURL": url}})
    assert str(info.value).startswith("spec.target.pdURL: ")
    assert reason in str(info.value)


def test_the_crd_pattern_refuses_what_the_model_refuses() -> None:
    doc = yaml.safe_load((CRDS / "benchmarkrun.yaml").read_text())
    spec = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    pd = spec["properties"]["target"]["properties"]["pdURL"]
    assert pd["maxLength"] == MAX_PD_URL
    for bad in ("http://a@b", "http://pd/?q", "http://pd/#f", "http://pd 1"):
        assert not re.fullmatch(pd["pattern"], bad)
    assert re.fullmatch(pd["pattern"], "http://basic-pd.tidb:2379/prefix")
