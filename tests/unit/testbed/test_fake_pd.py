"""The fake PD server and the pd-ctl emulator behave like PD and pd-ctl where we depend on it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.clocks import SecondsClock
from testbed.fake_pd import DATA_DIR, FakePD, pd_error
from tidb_bench_operator.domain.pd import parse_operators, parse_stores
from tidb_bench_operator.errors import PDError

EMULATOR = Path(__file__).resolve().parents[2] / "testbed" / "pd_ctl_emulator.py"
STORES = DATA_DIR / "pd-api-v1-stores_v8.1.0_tidb-operator-testdata.json"
OPERATOR = (
    "balance-leader {transfer leader: store 2 to 1} (kind:leader, region:28977(365, 35), "
    "createAt:2024-07-09 16:25:23.105733052 +0800 CST m=+1209042.707881308, startAt:0001-01-01 "
    "00:00:00 +0000 UTC, currentStep:0, size:95, steps:[0:{transfer leader from store 2 to store "
    "1}], timeout:[1m0s])"
)


@pytest.fixture
def pd() -> Iterator[FakePD]:
    with FakePD() as server:
        yield server


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def pd_ctl(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EMULATOR), "-u", url, *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_the_recorded_stores_body_is_served_byte_for_byte(pd: FakePD) -> None:
    status, ctype, body = get(pd.url + "/pd/api/v1/stores")
    assert (status, ctype) == (200, "application/json; charset=UTF-8")
    assert body == STORES.read_text()


@pytest.mark.parametrize(
    ("route", "sample"),
    [
        ("health", "pd-api-v1-health_v8.1.0_tidb-operator-testdata.json"),
        ("members", "pd-api-v1-members_v8.1.0_tidb-operator-testdata.json"),
        ("config", "pd-api-v1-config_SIMPLIFIED_tidb-operator-testdata.json"),
        ("schedulers", "pd-api-v1-schedulers_default-v8_tidb-operator-testdata.json"),
    ],
)
def test_every_default_route_serves_its_recorded_sample(
    pd: FakePD, route: str, sample: str
) -> None:
    status, _, body = get(f"{pd.url}/pd/api/v1/{route}")
    assert status == 200
    assert json.loads(body) == json.loads((DATA_DIR / sample).read_text())


def test_an_idle_cluster_has_an_empty_operator_queue(pd: FakePD) -> None:
    assert get(pd.url + "/pd/api/v1/operators")[2].strip() == "[]"


def test_an_unknown_route_is_a_404_like_pd(pd: FakePD) -> None:
    status, _, body = get(pd.url + "/pd/api/v1/nothing-here")
    assert (status, body) == (404, "404 page not found\n")


def test_one_store_is_served_from_the_stores_body_and_an_unknown_id_is_pds_404(pd: FakePD) -> None:
    status, _, body = get(pd.url + "/pd/api/v1/store/5")
    assert status == 200
    assert json.loads(body)["store"]["address"].startswith("basic-tikv-4q2bgw")
    status, ctype, body = get(pd.url + "/pd/api/v1/store/999")
    assert (status, ctype) == (404, "application/json; charset=UTF-8")
    assert json.loads(body) == "[PD:core:ErrStoreNotFound]store 999 not found"


def test_operators_drain_over_time_with_a_sequence() -> None:
    clock = SecondsClock()
    pd = FakePD(clock=clock)
    pd.set_sequence("/pd/api/v1/operators", [(0, [OPERATOR]), (30, "[]")])
    assert len(parse_operators(pd.respond("GET", "/pd/api/v1/operators").body)) == 1
    clock.now += 29
    assert len(parse_operators(pd.respond("GET", "/pd/api/v1/operators").body)) == 1
    clock.now += 1
    assert parse_operators(pd.respond("GET", "/pd/api/v1/operators").body) == []


def test_a_sequence_changes_what_the_running_server_answers() -> None:
    with FakePD() as pd:
        pd.set_sequence("/pd/api/v1/operators", [(0, [OPERATOR]), (0.3, "[]")])
        assert len(parse_operators(get(pd.url + "/pd/api/v1/operators")[2])) == 1
        time.sleep(0.4)
        assert parse_operators(get(pd.url + "/pd/api/v1/operators")[2]) == []


def test_a_store_state_change_shows_up_after_its_delay() -> None:
    clock = SecondsClock()
    pd = FakePD(clock=clock)
    pd.set_store_state(5, "Disconnected", after_seconds=10)

    def state_of_5() -> str:
        stores = parse_stores(pd.respond("GET", "/pd/api/v1/stores").body)
        return next(s.state_name for s in stores if s.id == 5)

    assert state_of_5() == "Up"
    clock.now += 10
    assert state_of_5() == "Disconnected"


def test_tombstone_stores_are_hidden_unless_asked_for_like_pd(pd: FakePD) -> None:
    pd.set_store_state(1, "Tombstone")
    default = parse_stores(get(pd.url + "/pd/api/v1/stores")[2])
    assert 1 not in [s.id for s in default]
    everything = parse_stores(get(pd.url + "/pd/api/v1/stores?state=0&state=1&state=2")[2])
    assert next(s for s in everything if s.id == 1).state_name == "Tombstone"


def test_an_error_response_carries_pds_json_string_body(pd: FakePD) -> None:
    pd.set_response("/pd/api/v1/operators", pd_error(500, "[PD:server:ErrServerNotStarted]x"))
    status, _, body = get(pd.url + "/pd/api/v1/operators")
    assert (status, json.loads(body)) == (500, "[PD:server:ErrServerNotStarted]x")


def test_requests_are_recorded_in_order(pd: FakePD) -> None:
    get(pd.url + "/pd/api/v1/health")
    get(pd.url + "/pd/api/v1/stores?state=0")
    assert pd.requests == ["GET /pd/api/v1/health", "GET /pd/api/v1/stores?state=0"]


# --- pd-ctl emulator -------------------------------------------------------------------------


def test_pd_ctl_store_strips_state_fields_and_parses_back(pd: FakePD) -> None:
    run = pd_ctl(pd.url, "store")
    assert run.returncode == 0
    assert '"node_state"' not in run.stdout
    assert '\n  "stores": [\n' in run.stdout  # 2-space indent, as json.MarshalIndent
    assert [s.id for s in parse_stores(run.stdout)] == [4, 20, 1, 5]


def test_pd_ctl_store_by_id_keeps_node_state(pd: FakePD) -> None:
    run = pd_ctl(pd.url, "store", "4")
    assert json.loads(run.stdout)["store"]["node_state"] == 1


def test_pd_ctl_prints_pd_errors_and_still_exits_zero(pd: FakePD) -> None:
    run = pd_ctl(pd.url, "store", "999")
    assert run.returncode == 0
    assert run.stdout == (
        'Failed to get store: [404] "[PD:core:ErrStoreNotFound]store 999 not found"\n'
    )
    with pytest.raises(PDError, match="store 999 not found"):
        parse_stores(run.stdout)


def test_pd_ctl_against_a_dead_pd_prints_the_go_client_error_and_exits_zero() -> None:
    pd = FakePD().start()
    url = pd.url
    pd.stop()
    run = pd_ctl(url, "store")
    assert run.returncode == 0
    assert run.stdout.startswith(f'Failed to get store: Get "{url}/pd/api/v1/stores": dial tcp')
    assert "connection refused" in run.stdout
    with pytest.raises(PDError, match="connection refused"):
        parse_stores(run.stdout)


def test_pd_ctl_operator_show_prints_the_raw_array(pd: FakePD) -> None:
    pd.set_body("/pd/api/v1/operators", [OPERATOR])
    run = pd_ctl(pd.url, "operator", "show")
    assert run.returncode == 0
    (op,) = parse_operators(run.stdout)
    assert (op.desc, op.region_id) == ("balance-leader", 28977)


def test_pd_ctl_config_show_keeps_replication_and_schedule_without_hidden_keys(pd: FakePD) -> None:
    shown = json.loads(pd_ctl(pd.url, "config", "show").stdout)
    assert list(shown) == ["replication", "schedule"]
    assert "schedulers-v2" not in shown["schedule"]
    assert shown["schedule"]["leader-schedule-limit"] == 4
    assert shown["replication"]["location-labels"] == "zone,rack"


def test_pd_ctl_unknown_commands_exit_one_like_cobra(pd: FakePD) -> None:
    run = pd_ctl(pd.url, "frobnicate")
    assert run.returncode == 1
    assert "unknown command" in run.stderr


LOCAL = "http://127.0.0.1:2379"


def test_pd_ctl_with_a_url_override_reaches_that_pd_for_the_pods_own_address(pd: FakePD) -> None:
    run = subprocess.run(
        [sys.executable, str(EMULATOR), "--pd-url-override", pd.url, *("-u", LOCAL, "store")],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert run.returncode == 0
    assert [s.id for s in parse_stores(run.stdout)] == [4, 20, 1, 5]
    assert pd.requests == ["GET /pd/api/v1/stores"]


def test_pd_ctl_errors_behind_a_url_override_name_the_address_pd_ctl_was_given() -> None:
    dead = FakePD().start()
    url = dead.url
    dead.stop()
    run = subprocess.run(
        [sys.executable, str(EMULATOR), "--pd-url-override", url, "store"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert run.stdout.startswith(
        'Failed to get store: Get "http://127.0.0.1:2379/pd/api/v1/stores": dial tcp '
        "127.0.0.1:2379: connect: connection refused"
    )
