"""Every recorded PD sample in tests/data/pd/ parses into the values it really holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tidb_bench_operator.domain.pd import (
    PDConfig,
    leader_store_counts,
    parse_cluster,
    parse_evict_leader_stores,
    parse_health,
    parse_leader,
    parse_members,
    parse_pd_config,
    parse_regions,
    parse_stores,
)
from tidb_bench_operator.errors import ParseError, PDError

TESTS = Path(__file__).resolve().parents[2]
DATA = TESTS / "data" / "pd"
CONFIG_SHOW_ALL_V651 = DATA / "pd-ctl-config-show-all_v6.5.1_tiup-ctl.txt"
CONFIG_SHOW_V610 = DATA / "pd-ctl-config-show_v6.1.0_tiup-ctl.txt"
CONFIG_SIMPLIFIED = DATA / "pd-api-v1-config_SIMPLIFIED_tidb-operator-testdata.json"
REGIONS_ELIDED = DATA / "pd-ctl-region_v6.1.0_tiup-ctl_piped-to-jq_ELIDED.txt"
MEMBERS_V81 = DATA / "pd-api-v1-members_v8.1.0_tidb-operator-testdata.json"
LEADER_V81 = DATA / "pd-api-v1-leader_v8.1.0_tidb-operator-testdata.json"
HEALTH_V81 = DATA / "pd-api-v1-health_v8.1.0_tidb-operator-testdata.json"
CLUSTER = DATA / "pd-api-v1-cluster_tidb-operator-testdata.json"
EVICT_LEADER_LIST = (
    DATA / "pd-api-v1-scheduler-config-evict-leader-scheduler-list_tidb-operator-testdata.json"
)
STORES_V81 = DATA / "pd-api-v1-stores_v8.1.0_tidb-operator-testdata.json"


def body_after_tiup_banner(path: Path) -> str:
    """The JSON body pd-ctl printed: everything after tiup's "Starting component" line."""
    text = path.read_text()
    return text[text.index("\n", text.index("Starting component")) + 1 :]


# ---------------------------------------------------------------------------
# Config


def test_the_v6_5_1_config_show_all_sample_yields_its_schedule_and_replication_settings() -> None:
    text = CONFIG_SHOW_ALL_V651.read_text()
    # The sample really carries the misspelt key of PD up to v7.1 (tikv/pd server/config/config.go).
    assert '"swtich-witness-interval"' in text
    assert parse_pd_config(text) == PDConfig(
        leader_schedule_limit=4,
        leader_schedule_policy="count",
        region_schedule_limit=2048,
        replica_schedule_limit=64,
        hot_region_schedule_limit=4,
        switch_witness_interval="1h0m0s",
        max_replicas=3,
        location_labels=["region", "zone"],
        enable_placement_rules=True,
    )


def test_the_raw_get_config_body_and_its_decoded_form_read_like_config_show_all() -> None:
    body = body_after_tiup_banner(CONFIG_SHOW_ALL_V651)
    from_text = parse_pd_config(CONFIG_SHOW_ALL_V651.read_text())
    assert parse_pd_config(body) == from_text
    assert parse_pd_config(json.loads(body)) == from_text


def test_the_fixed_switch_witness_interval_spelling_of_pd_7_5_is_read_too() -> None:
    # [derived] the v6.5.1 body with the key spelt as PD v7.5+ spells it (pkg/schedule/config).
    doc = json.loads(body_after_tiup_banner(CONFIG_SHOW_ALL_V651))
    doc["schedule"]["switch-witness-interval"] = doc["schedule"].pop("swtich-witness-interval")
    doc["schedule"]["switch-witness-interval"] = "2h0m0s"
    assert parse_pd_config(doc).switch_witness_interval == "2h0m0s"


def test_the_v6_1_0_config_show_sample_with_shell_prompts_yields_its_settings() -> None:
    text = CONFIG_SHOW_V610.read_text()
    assert "witness" not in text  # v6.1 predates witnesses: the setting must read as absent
    assert parse_pd_config(text) == PDConfig(
        leader_schedule_limit=4,
        leader_schedule_policy="count",
        region_schedule_limit=2048,
        replica_schedule_limit=64,
        hot_region_schedule_limit=4,
        switch_witness_interval=None,
        max_replicas=3,
        location_labels=[],  # "location-labels": "" means no labels
        enable_placement_rules=True,
    )


def test_the_simplified_operator_config_sample_leaves_absent_keys_as_none() -> None:
    config = parse_pd_config(CONFIG_SIMPLIFIED.read_text())
    assert config.leader_schedule_limit == 4
    assert config.max_replicas == 3
    assert config.location_labels == ["zone", "rack"]
    assert config.region_schedule_limit is None
    assert config.leader_schedule_policy is None
    assert config.enable_placement_rules is None
    assert config.switch_witness_interval is None


@pytest.mark.parametrize(
    ("output", "shown"),
    [
        (
            'Failed to get config: Get "http://127.0.0.1:2379/pd/api/v1/config": '
            "dial tcp 127.0.0.1:2379: connect: connection refused",
            "connection refused",
        ),
        ('"[PD:apiutil:ErrRedirect]redirect failed"', "redirect failed"),
    ],
)
def test_config_show_error_text_is_a_pd_error_although_pd_ctl_exited_zero(
    output: str, shown: str
) -> None:
    with pytest.raises(PDError, match="exits 0") as info:
        parse_pd_config(output + "\n")
    assert shown in str(info.value)


def test_a_placement_rules_flag_that_is_not_a_go_string_bool_is_a_precise_parse_error() -> None:
    doc = json.loads(CONFIG_SIMPLIFIED.read_text())
    doc["replication"]["enable-placement-rules"] = "yes"
    with pytest.raises(ParseError, match=r"replication\.enable-placement-rules: 'yes' is neither"):
        parse_pd_config(doc)


def test_json_without_schedule_or_replication_is_not_mistaken_for_a_config() -> None:
    with pytest.raises(ParseError, match="'schedule' or 'replication' section"):
        parse_pd_config(CLUSTER.read_text())


# ---------------------------------------------------------------------------
# Members, leader, health, cluster


def test_the_v8_1_members_sample_names_three_members_and_basic_53pe89_as_leader() -> None:
    members = parse_members(MEMBERS_V81.read_text())
    assert members.cluster_id == 7452180154224557728
    assert members.member_names == ["basic-7axwci", "basic-53pe89", "basic-0qt9e9"]
    assert members.leader == "basic-53pe89"
    assert members.etcd_leader == "basic-53pe89"
    assert {m.binary_version for m in members.members} == {"v8.1.0"}
    assert members.members[1].client_urls == ["http://basic-pd-53pe89.basic-pd-peer.default:2379"]


def test_the_v8_1_leader_sample_is_the_leader_the_members_sample_names() -> None:
    leader = parse_leader(LEADER_V81.read_text())
    assert leader.name == "basic-53pe89"
    assert leader.member_id == 2548954049902922308
    members = parse_members(MEMBERS_V81.read_text())
    assert leader.name == members.leader
    same = next(m for m in members.members if m.name == leader.name)
    assert (leader.member_id, leader.client_urls) == (same.member_id, same.client_urls)
    assert leader.binary_version == ""  # GET /leader carries no version, unlike /members


def test_the_v8_1_health_sample_reports_every_member_healthy_with_uint64_ids() -> None:
    health = parse_health(HEALTH_V81.read_text())
    assert [h.name for h in health] == ["basic-7axwci", "basic-53pe89", "basic-0qt9e9"]
    assert all(h.health for h in health)
    # A uint64 etcd member id above 2**63 survives intact.
    assert health[2].member_id == 12818309996638325969 > 2**63
    members = parse_members(MEMBERS_V81.read_text())
    assert {h.name: h.member_id for h in health} == {m.name: m.member_id for m in members.members}


def test_an_unhealthy_member_reads_as_health_false() -> None:
    doc = json.loads(HEALTH_V81.read_text())
    doc[0]["health"] = False
    assert [h.health for h in parse_health(doc)] == [False, True, True]


def test_the_cluster_sample_has_the_cluster_id_the_members_header_carries() -> None:
    cluster = parse_cluster(CLUSTER.read_text())
    assert cluster.id == 7452180154224557728
    assert cluster.max_peer_count == 3
    assert cluster.id == parse_members(MEMBERS_V81.read_text()).cluster_id


def test_a_members_body_without_a_leader_reads_as_no_leader_mid_election() -> None:
    doc = json.loads(MEMBERS_V81.read_text())
    del doc["leader"], doc["etcd_leader"]
    members = parse_members(doc)
    assert members.leader is None
    assert len(members.members) == 3


# ---------------------------------------------------------------------------
# Scheduler config


def test_the_evict_leader_list_sample_names_store_4_a_tikv_store_of_the_v8_1_cluster() -> None:
    assert parse_evict_leader_stores(EVICT_LEADER_LIST.read_text()) == [4]
    store = next(s for s in parse_stores(STORES_V81.read_text()) if s.id == 4)
    assert store.is_tikv


# ---------------------------------------------------------------------------
# Regions


def test_the_elided_v6_1_0_region_sample_is_a_parse_error_naming_the_elision() -> None:
    with pytest.raises(ParseError) as info:
        parse_regions(REGIONS_ELIDED.read_text())
    message = str(info.value)
    assert "line 43 is an elision '......'" in message
    assert "declares count 22 but only 1 region object(s) could be read (ids [172])" in message


def test_the_elided_region_sample_yields_its_one_readable_region_when_partial_is_allowed() -> None:
    regions = parse_regions(REGIONS_ELIDED.read_text(), allow_partial=True)
    assert regions.count == 22
    assert regions.complete is False
    [region] = regions.regions
    assert region.id == 172
    assert region.start_key == "7480000000000000FF5C00000000000000F8"
    assert region.end_key == "7480000000000000FF5E00000000000000F8"
    assert region.peer_store_ids == [1, 4, 5]
    assert region.leader_store_id == 4
    assert region.approximate_size == 85
    assert region.approximate_keys == 1079434
    assert leader_store_counts(regions.regions) == {4: 1}


def test_whole_region_json_rebuilt_from_the_sample_is_complete() -> None:
    # [derived] the sample's one region as pd-ctl prints it unedited: {"count":1,"regions":[..]}.
    [region] = parse_regions(REGIONS_ELIDED.read_text(), allow_partial=True).regions
    text = REGIONS_ELIDED.read_text()
    obj, _ = json.JSONDecoder().raw_decode(text, text.index('{\n      "id": 172'))
    regions = parse_regions(json.dumps({"count": 1, "regions": [obj]}, separators=(",", ":")))
    assert regions.complete
    assert regions.regions == [region]
    assert parse_regions(json.dumps(obj)).regions == [region]  # pd-ctl `region 172`
    assert parse_regions('{"count":0,"regions":null}').regions == []


# ---------------------------------------------------------------------------
# Guard


def test_every_pd_sample_is_named_by_at_least_one_test_file() -> None:
    test_texts = [p.read_text() for p in TESTS.rglob("test_*.py")]
    samples = sorted(p.name for p in DATA.iterdir() if p.is_file())
    assert samples, f"no samples found in {DATA}"
    untested = [name for name in samples if not any(name in text for text in test_texts)]
    assert untested == [], (
        f"samples in {DATA} that no tests/**/test_*.py names (add a test that reads them): "
        f"{untested}"
    )
