"""spec.cluster names a TidbCluster (TiDB Operator v1) or a Cluster (v2); v1 specs unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from tidb_bench_operator.domain.api.resources import parse_run_spec
from tidb_bench_operator.domain.api.run_status import BenchmarkRunStatus
from tidb_bench_operator.errors import SpecError


def spec(**cluster: Any) -> dict[str, Any]:
    return {"cluster": cluster, "credentials": {"secretRef": {"name": "db"}}}


def test_a_v1_spec_without_kind_parses_as_before_with_kind_and_group_unset() -> None:
    parsed = parse_run_spec(spec(name="basic"))
    assert parsed.cluster is not None
    assert (parsed.cluster.name, parsed.cluster.kind, parsed.cluster.tidb_group) == (
        "basic",
        None,
        None,
    )


def test_kind_cluster_and_a_tidb_group_parse() -> None:
    parsed = parse_run_spec(spec(name="basic", kind="Cluster", tidbGroup="tidb"))
    assert parsed.cluster is not None
    assert (parsed.cluster.kind, parsed.cluster.tidb_group) == ("Cluster", "tidb")


def test_an_unknown_kind_is_refused_naming_the_field() -> None:
    with pytest.raises(SpecError, match=r"^spec.cluster.kind: "):
        parse_run_spec(spec(name="basic", kind="TiDBCluster"))


def test_a_tidb_group_on_a_tidbcluster_is_refused_saying_what_to_do() -> None:
    with pytest.raises(SpecError) as err:
        parse_run_spec(spec(name="basic", kind="TidbCluster", tidbGroup="tidb"))
    assert str(err.value) == (
        "spec.cluster.tidbGroup: only a TiDB Operator v2 Cluster has TiDB groups "
        "(remove tidbGroup, or set kind: Cluster)"
    )


def test_the_resolved_endpoint_round_trips_through_status_in_camel_case() -> None:
    st = BenchmarkRunStatus.model_validate(
        {
            "endpoint": {
                "clusterKind": "Cluster",
                "host": "tidb-tidb.ns",
                "port": 4000,
                "pdURL": "http://pd-pd.ns:2379",
                "tidbGroup": "tidb",
            }
        }
    )
    assert st.endpoint is not None and st.endpoint.pd_url == "http://pd-pd.ns:2379"
    dumped = st.model_dump(by_alias=True, exclude_none=True, mode="json")["endpoint"]
    assert dumped == {"clusterKind": "Cluster", "host": "tidb-tidb.ns", "port": 4000,
                      "pdURL": "http://pd-pd.ns:2379", "tidbGroup": "tidb"}  # fmt: skip
