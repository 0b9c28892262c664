"""The `tidb-bench pd-check` verdict: fixed JSON shape and table rendering on saved PD output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tidb_bench_operator.domain.preflight.pdcheck import render_pd_check_table, run_pd_check
from tidb_bench_operator.errors import ParseError, PDError

DATA = Path(__file__).resolve().parents[3] / "data" / "pd"
STORES_V81 = (DATA / "pd-api-v1-stores_v8.1.0_tidb-operator-testdata.json").read_text()
FRAGMENT = (
    DATA / "pd-ctl-store-check-offline_operator-address_v5.1.0-alpha_pd-issue3780_FRAGMENT.txt"
).read_text()


def field_note_stores_json() -> str:
    """docs/field-story.md's four stores as GET /stores JSON (sizes in MiB)."""
    rows = [(1, 130, 771, 86), (2, 121, 779, 141), (3, 110, 795, 122), (4, 41, 769, 689)]
    stores = [
        {
            "store": {
                "id": sid,
                "address": f"basic-tikv-{sid - 1}.basic-tikv-peer.tidb-cluster.svc:20160",
                "state_name": "Up",
            },
            "status": {"region_count": rc, "region_size": rs, "leader_size": ls},
        }
        for sid, rc, rs, ls in rows
    ]
    return json.dumps({"count": 4, "stores": stores}, indent=2)


def test_the_result_has_exactly_the_documented_shape() -> None:
    result = run_pd_check(STORES_V81, "[]", 0.5, 0.5)
    assert list(result) == ["checks"]
    for check in result["checks"]:
        assert list(check) == ["name", "status", "message", "stores"]
        assert check["status"] in ("Pass", "Warn", "Fail")
        assert all(isinstance(s, int) for s in check["stores"])
    assert json.loads(json.dumps(result)) == result


def test_the_v8_1_sample_passes_every_check_it_can_make() -> None:
    result = run_pd_check(STORES_V81, "[]", 0.5, 0.5)
    assert [(c["name"], c["status"]) for c in result["checks"]] == [
        ("store-state", "Pass"),
        ("leader-size-balance", "Pass"),
        ("region-size-balance", "Pass"),
        ("pending-operators", "Pass"),
    ]


def test_without_an_operators_file_there_is_no_pending_operators_check() -> None:
    names = [c["name"] for c in run_pd_check(STORES_V81, None, 0.5, 0.5)["checks"]]
    assert "pending-operators" not in names


def test_the_field_note_stores_fail_leader_size_balance_on_store_4_only() -> None:
    checks = {
        c["name"]: c for c in run_pd_check(field_note_stores_json(), None, 0.5, 0.5)["checks"]
    }
    assert checks["leader-size-balance"]["status"] == "Fail"
    assert checks["leader-size-balance"]["stores"][0] == 4
    assert checks["region-size-balance"]["status"] == "Pass"
    assert checks["store-state"]["status"] == "Pass"


def test_the_offline_fragment_fails_store_state() -> None:
    checks = run_pd_check(FRAGMENT, None, 0.5, 0.5)["checks"]
    assert checks[0]["name"] == "store-state"
    assert (checks[0]["status"], checks[0]["stores"]) == ("Fail", [1531026])


def test_pending_operators_in_the_saved_output_fail_the_check() -> None:
    ops = json.dumps(
        [
            "balance-leader {transfer leader: store 2 to 1} (kind:leader, region:28977(365, 35), "
            "createAt:x, startAt:y, currentStep:0, size:95, steps:[], timeout:[1m0s])"
        ]
    )
    checks = run_pd_check(STORES_V81, ops, 0.5, 0.5)["checks"]
    assert checks[-1]["name"] == "pending-operators"
    assert checks[-1]["status"] == "Fail"


def test_saved_pd_ctl_error_output_raises_instead_of_reporting_a_verdict() -> None:
    with pytest.raises(PDError, match="connection refused"):
        run_pd_check(
            'Failed to get store: Get "http://127.0.0.1:2379/pd/api/v1/stores": dial tcp '
            "127.0.0.1:2379: connect: connection refused\n",
            None,
            0.5,
            0.5,
        )
    with pytest.raises(ParseError):
        run_pd_check(STORES_V81, "not operators", 0.5, 0.5)


def test_the_table_lists_each_check_with_status_stores_and_message() -> None:
    table = render_pd_check_table(run_pd_check(field_note_stores_json(), "[]", 0.5, 0.5))
    lines = table.splitlines()
    assert lines[0].split() == ["CHECK", "STATUS", "STORES", "MESSAGE"]
    assert len(lines) == 5
    row = next(line for line in lines if line.startswith("leader-size-balance"))
    assert row.split()[1:3] == ["Fail", "4,1"]
    assert "holds 689 MiB" in row
    pending = next(line for line in lines if line.startswith("pending-operators"))
    assert pending.split()[1:3] == ["Pass", "-"]
