"""What a variant may patch, the stash of the fields it touches, and the restore."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tidb_bench_operator.domain.experiment.patch import (
    ABSENT,
    check_patch,
    merge,
    restore_patch,
    stash_of,
)

DATA = Path(__file__).resolve().parents[3] / "data"
TC: dict[str, Any] = yaml.safe_load((DATA / "experiment" / "tidbcluster-basic.yaml").read_text())
V2_TIKV: dict[str, Any] = yaml.safe_load(
    (
        DATA / "vendor" / "tidb-operator-v2.1.0-beta.6" / "examples" / "basic" / "02-tikv.yaml"
    ).read_text()
)


def test_scaling_resources_config_image_and_placement_of_a_tidbcluster_are_allowed() -> None:
    patch = {
        "tikv": {"replicas": 4, "requests": {"cpu": "2"}, "config": {"raftstore": {"a": 1}}},
        "tidb": {
            "image": "pingcap/tidb:v8.5.0",
            "topologySpreadConstraints": [{"topologyKey": "k"}],
        },
        "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
        "version": "v8.5.0",
    }
    assert check_patch("TidbCluster", patch) == []


def test_storage_tls_and_removing_a_component_are_refused_each_with_its_path() -> None:
    patch = {
        "tikv": {"requests": {"storage": "200Gi", "cpu": "2"}, "storageClassName": "fast"},
        "tlsCluster": {"enabled": True},
        "tiflash": None,
        "pvReclaimPolicy": "Delete",
    }
    problems = check_patch("TidbCluster", patch)
    assert len(problems) == 5
    assert problems[0].startswith("spec.tikv.requests.storage: storage cannot be changed")
    assert problems[1].startswith("spec.tikv.storageClassName: storage cannot be changed")
    assert problems[2].startswith("spec.tlsCluster: TLS and security cannot be changed")
    assert problems[3].startswith("spec.tiflash: removing or replacing a whole component")
    assert problems[4].startswith("spec.pvReclaimPolicy: outside what an experiment may change")
    assert all("remove it" in p or "instead" in p or "by hand" in p for p in problems)


def test_a_v2_group_may_change_replicas_resources_and_pod_placement_but_not_volumes() -> None:
    allowed = {
        "replicas": 4,
        "template": {
            "spec": {
                "resources": {"cpu": "8"},
                "overlay": {"pod": {"spec": {"nodeSelector": {"pool": "tikv"}}}},
            }
        },
    }
    assert check_patch("TiKVGroup", allowed) == []
    problems = check_patch(
        "TiKVGroup",
        {"template": {"spec": {"volumes": [], "security": {"tls": {"mysql": {"enabled": True}}}}}},
    )
    assert [p.split(":")[0] for p in problems] == [
        "spec.template.spec.volumes",
        "spec.template.spec.security",
    ]


def test_the_stash_holds_exactly_the_touched_fields_with_absent_ones_marked() -> None:
    spec = TC["spec"]
    stash = stash_of(
        spec,
        [
            {"tikv": {"replicas": 4}},
            {"tikv": {"config": {"storage": {"reserve-space": "1GB"}}}},
            {"tidb": {"topologySpreadConstraints": [{"topologyKey": "kubernetes.io/hostname"}]}},
            {"tidb": {"topologySpreadConstraints": None, "replicas": 3}},
        ],
    )
    assert stash == {
        "/tidb/replicas": 2,
        "/tidb/topologySpreadConstraints": ABSENT,
        "/tikv/config/storage/reserve-space": "0MB",
        "/tikv/replicas": 3,
    }


def test_a_field_inside_an_absent_object_is_stashed_as_the_absent_object() -> None:
    stash = stash_of(
        TC["spec"],
        [{"tikv": {"nodeSelector": {"pool": "db"}}}, {"tikv": {"nodeSelector": {"zone": "a"}}}],
    )
    assert stash == {"/tikv/nodeSelector": ABSENT}


def test_the_restore_puts_back_the_found_values_and_removes_what_was_absent() -> None:
    spec = TC["spec"]
    variant = {"tikv": {"replicas": 4, "nodeSelector": {"pool": "db"}}}
    stash = stash_of(spec, [variant])
    now = merge(spec, variant)
    restore = restore_patch(stash, now, variant)
    assert restore.patch == {"tikv": {"replicas": 3, "nodeSelector": None}}
    assert restore.left_alone == []
    assert merge(now, restore.patch) == spec


def test_a_field_someone_else_changed_meanwhile_is_left_alone_and_named() -> None:
    spec = TC["spec"]
    variant = {"tikv": {"replicas": 4}, "tidb": {"replicas": 3}}
    stash = stash_of(spec, [variant])
    now = merge(merge(spec, variant), {"tidb": {"replicas": 5}})
    restore = restore_patch(stash, now, variant)
    assert restore.patch == {"tikv": {"replicas": 3}}
    assert restore.left_alone == [
        "/tidb/replicas was changed by someone else during the experiment; left as it is"
    ]


def test_nothing_to_restore_when_the_cluster_already_holds_its_found_values() -> None:
    stash = stash_of(V2_TIKV["spec"], [{"replicas": 4}])
    assert restore_patch(stash, V2_TIKV["spec"], {"replicas": 4}).patch == {}
    assert restore_patch(stash, V2_TIKV["spec"], None).patch == {}


def test_a_toml_config_replaced_by_an_object_gets_its_text_back() -> None:
    spec = TC["spec"]
    variant = {"pd": {"config": {"schedule": {"leader-schedule-limit": 8}}}}
    stash = stash_of(spec, [variant])
    assert stash == {"/pd/config": spec["pd"]["config"]}
    now = merge(spec, variant)
    assert merge(now, restore_patch(stash, now, variant).patch) == spec
