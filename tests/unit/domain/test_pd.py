"""Parsing PD stores, operators and schedulers from recorded PD API and pd-ctl output."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tidb_bench_operator.domain.pd import (
    parse_operators,
    parse_stores,
)
from tidb_bench_operator.errors import ParseError, PDError

DATA = Path(__file__).resolve().parents[2] / "data" / "pd"
STORES_V81 = DATA / "pd-api-v1-stores_v8.1.0_tidb-operator-testdata.json"
STORE_4 = DATA / "pd-api-v1-store-4_v8.1.0_tidb-operator-testdata.json"
FRAGMENT = (
    DATA / "pd-ctl-store-check-offline_operator-address_v5.1.0-alpha_pd-issue3780_FRAGMENT.txt"
)
OPERATOR_STRINGS = DATA / "pd-operator-strings_from-pd-logs-and-api.txt"


def pd_ctl_store_output(api_body: str) -> str:
    """[derived] what `tiup ctl pd store` prints for an API body: state/node_state stripped."""
    doc = json.loads(api_body)
    for info in doc["stores"]:
        info["store"].pop("state", None)
        info["store"].pop("node_state", None)
    return (
        "Starting component `ctl`: /home/tidb/.tiup/components/ctl/v8.1.0/ctl pd store\n"
        + json.dumps(doc, indent=2)
        + "\n"
    )


def test_the_v8_1_stores_sample_yields_three_tikv_stores_and_one_tiflash_store() -> None:
    stores = parse_stores(STORES_V81.read_text())
    assert [s.id for s in stores] == [4, 20, 1, 5]
    assert [s.id for s in stores if s.is_tiflash] == [20]
    assert [s.id for s in stores if s.is_tikv] == [4, 1, 5]
    tiflash = next(s for s in stores if s.id == 20)
    assert tiflash.labels == {"engine": "tiflash"}


def test_store_fields_keep_pd_units_mib_sizes() -> None:
    store = next(s for s in parse_stores(STORES_V81.read_text()) if s.id == 4)
    assert store.address == "basic-tikv-5gzwgj.basic-tikv-peer.default:20160"
    assert store.state_name == "Up"
    assert store.leader_size == 17
    assert (store.region_count, store.region_size) == (60, 60)


def test_a_single_store_object_from_get_store_id_parses_as_one_store() -> None:
    (store,) = parse_stores(STORE_4.read_text())
    assert (store.id, store.state_name, store.region_count, store.leader_size) == (4, "Up", 5, 0)


def test_pd_ctl_store_output_without_state_fields_and_with_a_tiup_banner_parses() -> None:
    text = pd_ctl_store_output(STORES_V81.read_text())
    assert '"node_state"' not in text
    stores = parse_stores(text)
    assert [s.state_name for s in stores] == ["Up"] * 4
    assert [s.id for s in stores] == [4, 20, 1, 5]


def test_decoded_json_and_a_jq_extracted_store_list_are_accepted_too() -> None:
    doc = json.loads(STORES_V81.read_text())
    assert len(parse_stores(doc)) == 4
    assert [s.id for s in parse_stores(doc["stores"])] == [4, 20, 1, 5]


def test_the_hand_made_wrapper_of_the_pd_issue_fragment_still_yields_its_offline_store() -> None:
    (store,) = parse_stores(FRAGMENT.read_text())
    assert store.id == 1531026
    assert store.address == "t1-tikv-2.t1-tikv-peer.xxx.svc:20160"
    assert store.state_name == "Offline"
    assert (store.leader_size, store.region_size, store.region_count) == (98797, 287309, 3209)


def test_an_empty_cluster_with_null_stores_parses_as_no_stores() -> None:
    assert parse_stores('{"count": 0, "stores": null}') == []


def test_state_enum_is_used_only_when_state_name_is_missing() -> None:
    doc = {"store": {"id": 7, "state": 1}, "status": {}}
    assert parse_stores(doc)[0].state_name == "Offline"
    with pytest.raises(ParseError, match="store 7 has neither 'state_name' nor 'state'"):
        parse_stores({"store": {"id": 7}, "status": {}})


@pytest.mark.parametrize(
    ("output", "shown"),
    [
        (
            'Failed to get store: [404] "[PD:core:ErrStoreNotFound]store 999 not found"',
            "ErrStoreNotFound]store 999 not found",
        ),
        ('[500] "[PD:apiutil:ErrRedirect]redirect failed"', "[500]"),
        (
            'Failed to get store: Get "http://127.0.0.1:2379/pd/api/v1/stores": '
            "dial tcp 127.0.0.1:2379: connect: connection refused",
            "connection refused",
        ),
        (
            "Failed to get store: after trying all endpoints, no endpoint is available, "
            "the last error we met: Get ...",
            "after trying all endpoints",
        ),
        ('"[PD:core:ErrStoreNotFound]store 999 not found"', "store 999 not found"),
    ],
)
def test_pd_ctl_error_text_is_a_pd_error_even_though_pd_ctl_exited_zero(
    output: str, shown: str
) -> None:
    with pytest.raises(PDError) as info:
        parse_stores(output + "\n")
    assert shown in str(info.value)
    assert "exits 0" in str(info.value)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "input is empty"),
        ("hello world", "no store JSON found"),
        ('{"count": 3}', "neither a stores list"),
    ],
)
def test_input_that_is_not_store_output_is_a_parse_error(text: str, match: str) -> None:
    with pytest.raises(ParseError, match=match):
        parse_stores(text)


# --- operators -------------------------------------------------------------------------------


def logged_operator_strings() -> list[str]:
    """The operator strings quoted in PD log lines of the sample (`operator="\\"...\\""`)."""
    text = OPERATOR_STRINGS.read_text()
    return [m.replace('\\"', '"') for m in re.findall(r'\[operator="\\"(.*?)\\""\]', text)]


def test_operator_strings_logged_by_pd_v6_and_v7_3_plus_parse_as_pending() -> None:
    ops = parse_operators(logged_operator_strings())
    assert [(o.desc, o.region_id, o.finished) for o in ops] == [
        ("balance-leader", 28977, False),
        ("balance-region", 142725, False),
        ("replace-rule-offline-peer", 2848, False),
    ]
    assert ops[0].brief == "transfer leader: store 2 to 1"
    assert ops[0].store_ids == [2, 1]
    assert ops[1].store_ids == [1, 166543141]


def test_the_api_array_element_quoted_for_a_7_1_based_pd_parses() -> None:
    line = next(
        line for line in OPERATOR_STRINGS.read_text().splitlines() if line.startswith('"balance')
    )
    (op,) = parse_operators(f"[{line}]")
    assert (op.desc, op.brief, op.region_id) == (
        "balance-leader",
        "transfer leader: store 5 to 6",
        179,
    )
    assert not op.finished


def test_the_pd_ctl_operator_history_example_is_a_finished_operator() -> None:
    text = OPERATOR_STRINGS.read_text()
    history = text[text.index("  [") :]
    (op,) = parse_operators(history)
    assert (op.desc, op.region_id, op.finished) == ("admin-remove-peer", 1, True)
    assert op.store_ids == [2]


V71 = (
    "balance-leader {transfer leader: store 1 to 4} (kind:leader, region:2848(181, 23), "
    "createAt:2024-07-30 22:31:00.447901052 +0800 CST m=+3045380.050049300, "
    "startAt:0001-01-01 00:00:00 +0000 UTC, currentStep:0, size:93, "
    "steps:[transfer leader from store 1 to store 4]，timeout:[1m0s])"
)
V73 = V71.replace("steps:[transfer", "steps:[0:{transfer").replace(
    "store 4]，timeout", "store 4}], timeout"
)


@pytest.mark.parametrize("form", [V71, V73], ids=["v7.1-fullwidth-comma", "v7.3-plus"])
@pytest.mark.parametrize(
    ("suffix", "finished"), [("", False), (" finished", True), (" timeout", True)]
)
def test_operator_strings_of_both_formats_end_pending_unless_finished_or_timed_out(
    form: str, suffix: str, finished: bool
) -> None:
    # [derived] strings built from the Operator.String() formats of
    # https://github.com/tikv/pd/blob/v8.1.1/pkg/schedule/operator/operator.go.
    (op,) = parse_operators(json.dumps([form + suffix], ensure_ascii=False))
    assert (op.desc, op.region_id, op.finished) == ("balance-leader", 2848, finished)
    assert op.pending is not finished


def test_the_object_form_uses_the_numeric_status_created_and_started_are_pending() -> None:
    # [derived] OpObject {desc, brief, region_id, region_epoch, kind, timeout, status}.
    body = [
        {"desc": "balance-leader", "brief": "transfer leader: store 2 to 1", "region_id": 28977,
         "region_epoch": {"conf_ver": 35, "version": 365}, "kind": 1, "timeout": "1m0s",
         "status": 1},
        {"desc": "balance-region", "brief": "mv peer: store [1] to [4]", "region_id": 2,
         "region_epoch": {"conf_ver": 1, "version": 1}, "kind": 4, "timeout": "17m0s",
         "status": 2},
    ]  # fmt: skip
    ops = parse_operators(json.dumps(body))
    assert [(o.desc, o.region_id, o.finished) for o in ops] == [
        ("balance-leader", 28977, False),
        ("balance-region", 2, True),
    ]


@pytest.mark.parametrize("body", ["[]", "[]\n", "null"])
def test_an_empty_operator_queue_parses_as_no_operators(body: str) -> None:
    assert parse_operators(body) == []


def test_an_unrecognised_operator_string_still_counts_as_pending() -> None:
    (op,) = parse_operators('["some-future-scheduler {something} (whatever)"]')
    assert op.desc == "some-future-scheduler"
    assert not op.finished
    assert op.region_id is None


def test_operator_show_error_output_is_a_pd_error() -> None:
    with pytest.raises(PDError, match=r"\[500\]"):
        parse_operators('[500] "[PD:server:ErrServerNotStarted]server not started"\n')
