"""The plan: baseline, each variant alone on the cluster as found, and the restore."""

from __future__ import annotations

import pytest

from tidb_bench_operator.domain.experiment.patch import ABSENT, merge
from tidb_bench_operator.domain.experiment.plan import (
    build_plan,
    build_stash,
    stash_entries,
    stash_from,
)
from tidb_bench_operator.errors import SpecError
from unit.domain.experiment.support import KEY, TC, experiment


def test_each_transition_is_one_patch_and_the_last_puts_the_cluster_back() -> None:
    spec = experiment()
    stash = build_stash(spec, {KEY: TC["spec"]})
    steps = build_plan(spec, stash)
    assert [s.text() for s in steps] == [
        "measure baseline on the cluster as found",
        'found → tikv-4: TidbCluster basic: {"tikv": {"replicas": 4, "topologySpreadConstraints": '
        '[{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": '
        '"DoNotSchedule"}]}}; wait until settled, measure tikv-4',
        'tikv-4 → tidb-3: TidbCluster basic: {"tidb": {"replicas": 3}, "tikv": {"replicas": 3, '
        '"topologySpreadConstraints": null}}; wait until settled, measure tidb-3',
        'restore (tidb-3 → found): TidbCluster basic: {"tidb": {"replicas": 2}}, then wait until '
        "settled",
    ]
    spec_now = TC["spec"]
    for step in steps:
        for p in step.patches:
            spec_now = merge(spec_now, p.patch)
    assert spec_now == TC["spec"]


def test_without_a_baseline_the_plan_starts_with_the_first_variant() -> None:
    spec = experiment(baseline=False)
    steps = build_plan(spec, build_stash(spec, {KEY: TC["spec"]}))
    assert [s.measure for s in steps] == ["tikv-4", "tidb-3", None]


def test_the_stash_survives_the_round_trip_through_status_absent_fields_included() -> None:
    stash = build_stash(experiment(), {KEY: TC["spec"]})
    entries = stash_entries(stash)
    assert [(e.pointer, e.absent, e.value) for e in entries] == [
        ("/tidb/replicas", False, 2),
        ("/tikv/replicas", False, 3),
        ("/tikv/topologySpreadConstraints", True, None),
    ]
    assert stash_from(entries) == stash
    assert stash_from(entries)[KEY]["/tikv/topologySpreadConstraints"] is ABSENT


def test_a_variant_named_baseline_or_of_the_wrong_generation_is_refused() -> None:
    with pytest.raises(SpecError, match=r"^spec.variants\[0\].name: 'baseline' is taken"):
        experiment(variants=[{"name": "baseline", "patch": {}}])
    with pytest.raises(SpecError, match=r"^spec.variants\[0\]: a TidbCluster variant needs"):
        experiment(variants=[{"name": "a", "groups": [{"kind": "TiKVGroup", "name": "tikv",
                                                        "patch": {}}]}])  # fmt: skip
    with pytest.raises(SpecError, match=r"^spec.run.cluster: must name the experiment's cluster"):
        experiment(run={"cluster": {"name": "other"}, "credentials": {"secretRef": {"name": "r"}}})


def test_a_v2_plan_patches_each_group_and_restores_only_what_a_variant_touched() -> None:
    spec = experiment(
        cluster={"name": "basic", "namespace": "tidb-cluster", "kind": "Cluster"},
        variants=[
            {
                "name": "tikv-4",
                "groups": [{"kind": "TiKVGroup", "name": "tikv", "patch": {"replicas": 4}}],
            },
            {
                "name": "tidb-3",
                "groups": [{"kind": "TiDBGroup", "name": "tidb", "patch": {"replicas": 3}}],
            },
        ],
    )
    found = {("TiKVGroup", "tikv"): {"replicas": 3}, ("TiDBGroup", "tidb"): {"replicas": 2}}
    steps = build_plan(spec, build_stash(spec, found))
    assert [[p.text() for p in s.patches] for s in steps] == [
        [],
        ['TiKVGroup tikv: {"replicas": 4}'],
        ['TiDBGroup tidb: {"replicas": 3}', 'TiKVGroup tikv: {"replicas": 3}'],
        ['TiDBGroup tidb: {"replicas": 2}'],
    ]
