"""The environment fingerprint and its diff, from pod status, SHOW CONFIG rows and the spec."""

from __future__ import annotations

from typing import Any

from tidb_bench_operator.domain.fingerprint import (
    Fingerprint,
    config_items,
    describe_diff,
    diff_fingerprints,
    flatten_spec,
    image_digests,
)
from tidb_bench_operator.domain.sysbench.warmup import (
    analyze_statements,
    has_secondary_index,
    warmup_statements,
)


def _pod(component: str, image_id: str, container: str | None = None) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app.kubernetes.io/component": component}},
        "status": {
            "containerStatuses": [
                {"name": container or component, "imageID": image_id},
                {"name": "slowlog", "imageID": "docker.io/library/busybox@sha256:bb"},
            ]
        },
    }


def test_digests_come_from_the_component_containers_image_id() -> None:
    pods = [
        _pod("tidb", "docker-pullable://pingcap/tidb@sha256:aaa"),
        _pod("tidb", "docker-pullable://pingcap/tidb@sha256:aaa"),
        _pod("tikv", "docker.io/pingcap/tikv@sha256:ccc"),
        _pod("tikv", "docker.io/pingcap/tikv@sha256:ddd"),  # mid-rollout: two images
        _pod("pd", ""),  # not started yet
        _pod("discovery", "x@sha256:eee"),
    ]
    assert image_digests(pods) == {"tikv": "sha256:ccc,sha256:ddd", "tidb": "sha256:aaa"}


SHOW_CONFIG = [
    ("tidb", "10.0.1.5:4000", "performance.max-procs", "0"),
    ("tidb", "10.0.1.5:4000", "advertise-address", "10.0.1.5"),
    ("tikv", "10.0.1.7:20160", "storage.block-cache.capacity", "8GiB"),
    ("tikv", "10.0.1.8:20160", "storage.block-cache.capacity", "8GiB"),
    ("pd", "10.0.1.9:2379", "replication.max-replicas", "3"),
]


def test_show_config_keeps_chosen_items_and_a_digest_per_type_without_instances() -> None:
    items, digests = config_items(SHOW_CONFIG)
    assert items == {
        "tidb.performance.max-procs": "0",
        "tikv.storage.block-cache.capacity": "8GiB",
        "pd.replication.max-replicas": "3",
    }
    moved = [(t, "10.9.9.9:1", n, v) for t, _, n, v in SHOW_CONFIG]
    assert config_items(moved)[1] == digests
    changed = [*SHOW_CONFIG[:1], ("tidb", "10.0.1.5:4000", "advertise-address", "x")]
    assert config_items(changed)[1]["tidb"] != digests["tidb"]


def test_instances_that_disagree_are_both_recorded() -> None:
    rows = [*SHOW_CONFIG, ("tikv", "10.0.1.9:20160", "storage.block-cache.capacity", "4GiB")]
    assert config_items(rows)[0]["tikv.storage.block-cache.capacity"] == "8GiB,4GiB"


def test_the_spec_is_flattened_without_credentials() -> None:
    spec = {
        "workloads": ["oltp_point_select"],
        "threads": [1, 2],
        "dataset": {"tables": 4, "analyze": True},
        "credentials": {"secretRef": {"name": "db"}},
    }
    assert flatten_spec(spec) == {
        "workloads": '["oltp_point_select"]',
        "threads": "[1, 2]",
        "dataset.tables": "4",
        "dataset.analyze": "true",
    }


def test_the_diff_names_an_image_change_first() -> None:
    before = Fingerprint(
        images={"tidb": "pingcap/tidb:v8.1.0", "tikv": "pingcap/tikv:v8.1.0"},
        replicas={"tikv": 3},
        variables={"tidb_enable_prepared_plan_cache": "ON"},
        spec={"threads": "[1, 2]"},
        sysbench_version="1.0.20",
    )
    after = before.model_copy(
        update={
            "images": {"tidb": "pingcap/tidb:v8.1.1", "tikv": "pingcap/tikv:v8.1.0"},
            "variables": {"tidb_enable_prepared_plan_cache": "OFF"},
            "replicas": {"tikv": 4},
        }
    )
    lines = diff_fingerprints(before, after)
    assert lines == [
        "tidb image pingcap/tidb:v8.1.0 → pingcap/tidb:v8.1.1",
        "tikv replicas 3 → 4",
        "tidb_enable_prepared_plan_cache ON → OFF",
    ]
    assert describe_diff(lines).startswith("differs from the baseline: tidb image")
    assert diff_fingerprints(before, before) == []
    assert describe_diff([]) == (
        "nothing recorded in the environment fingerprint differs from the baseline"
    )


def test_an_item_on_one_side_only_shows_none() -> None:
    lines = diff_fingerprints(Fingerprint(), Fingerprint(config_digests={"tikv": "abc"}))
    assert lines == ["tikv config changed ((none) → abc)"]


def test_a_long_diff_is_cut_with_a_count() -> None:
    text = describe_diff([f"v{i} 1 → 2" for i in range(8)], limit=3)
    assert text.endswith("v2 1 → 2 (and 5 more)")


def test_analyze_and_warm_up_statements_follow_the_sysbench_table_and_index_names() -> None:
    assert analyze_statements("sbtest", 2) == [
        "ANALYZE TABLE `sbtest`.`sbtest1`",
        "ANALYZE TABLE `sbtest`.`sbtest2`",
    ]
    assert warmup_statements("db", 2) == [
        "SELECT COUNT(pad) FROM `db`.`sbtest1` USE INDEX (k_1)",
        "SELECT COUNT(pad) FROM `db`.`sbtest2` USE INDEX (k_2)",
    ]
    assert warmup_statements("db", 1, secondary_index=False) == [
        "SELECT COUNT(pad) FROM `db`.`sbtest1`"
    ]


def test_create_secondary_off_means_no_k_index() -> None:
    assert has_secondary_index([]) is True
    assert has_secondary_index(["--create-secondary=on"]) is True
    assert has_secondary_index(["--range-size=10", "--create-secondary=off"]) is False
