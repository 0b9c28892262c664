"""`tidb-bench run --pd-url`: the controller's PD checks before a sweep from this machine.

PD is the FakePD serving recorded PD v8.1 bodies over real HTTP; the SQL side points at a
closed port (table-leader-distribution is skipped: it needs TiDB).
"""

from __future__ import annotations

import io
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from testbed.clocks import SecondsClock
from testbed.fake_pd import API, FakePD, field_note_stores
from tidb_bench_operator.cli.run import local_preflight
from tidb_bench_operator.config import Credentials
from tidb_bench_operator.domain.api.resources import parse_run_spec
from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
from tidb_bench_operator.errors import TidbBenchError

PENDING_OPERATOR = (
    "balance-leader {transfer leader: store 2 to 1} (kind:leader, region:28977(365, 35), "
    "createAt:2024-07-09 16:25:23.105733052 +0800 CST m=+1209042.707881308, startAt:0001-01-01 "
    "00:00:00 +0000 UTC, currentStep:0, size:95, steps:[0:{transfer leader from store 2 to store "
    "1}], timeout:[1m0s])"
)


@pytest.fixture
def clock() -> SecondsClock:
    return SecondsClock()


@pytest.fixture
def pd(clock: SecondsClock) -> Iterator[FakePD]:
    with FakePD(clock=clock) as fake:
        yield fake


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spec(**preflight: Any) -> BenchmarkRunSpec:
    return parse_run_spec(
        {
            "target": {"host": "127.0.0.1", "port": closed_port()},
            "credentials": {"secretRef": {"name": "unused"}},
            "threads": [1],
            "preflight": {"skip": ["table-leader-distribution"], **preflight},
        }
    )


def check(pd: FakePD, clock: SecondsClock, s: BenchmarkRunSpec, out: io.StringIO) -> dict[str, Any]:
    return local_preflight(
        s, creds=Credentials("root", ""), pd_url=pd.url, out=out, clock=clock, sleep=clock.sleep
    )


def statuses(result: dict[str, Any]) -> dict[str, str]:
    return {c["name"]: c["status"] for c in result["checks"]}


def test_a_balanced_cluster_passes_the_pd_checks_and_the_kubernetes_ones_are_not_run(
    pd: FakePD, clock: SecondsClock
) -> None:
    out = io.StringIO()
    result = check(pd, clock, spec(), out)
    assert statuses(result) == {
        "store-state": "Pass",
        "leader-size-balance": "Pass",
        "region-size-balance": "Pass",
        "pending-operators": "Pass",
        "table-leader-distribution": "Warn",  # skipped in spec.preflight.skip, said so
    }
    assert clock.sleeps == []
    assert result["policy"] == "Enforce"
    assert "bench-node-isolation, topology-spread (they need Kubernetes)" in out.getvalue()
    assert f"{API}/stores" in pd.requests[0]


def test_enforce_refuses_the_field_note_imbalance_naming_the_store_and_runs_nothing(
    pd: FakePD, clock: SecondsClock
) -> None:
    pd.set_body(f"{API}/stores", field_note_stores())
    with pytest.raises(TidbBenchError) as raised:
        check(pd, clock, spec(timeoutSeconds=12), io.StringIO())
    text = str(raised.value)
    assert text.startswith("preflight failed: leader-size-balance; run blocked after 12 s: ")
    assert "leader-size-balance: " in text and "store 4" in text
    assert "Nothing was run" in text and "spec.preflight.policy: Warn" in text
    assert clock.sleeps == [5.0, 5.0, 5.0]  # looked at again until the timeout


def test_warn_records_the_imbalance_and_goes_on_at_once(pd: FakePD, clock: SecondsClock) -> None:
    pd.set_body(f"{API}/stores", field_note_stores())
    out = io.StringIO()
    result = check(pd, clock, spec(policy="Warn"), out)
    assert statuses(result)["leader-size-balance"] == "Fail"
    assert result["status"] == "Fail"
    assert "recorded, run continues (policy Warn)" in result["message"]
    assert clock.sleeps == []
    assert "preflight Fail leader-size-balance" in out.getvalue()


def test_pending_operators_are_waited_out_then_the_run_may_go(
    pd: FakePD, clock: SecondsClock
) -> None:
    pd.set_sequence(f"{API}/operators", [(0, [PENDING_OPERATOR]), (7, [])])
    out = io.StringIO()
    result = check(pd, clock, spec(timeoutSeconds=60), out)
    assert statuses(result)["pending-operators"] == "Pass"
    assert clock.sleeps == [5.0, 5.0]
    assert out.getvalue().count("pending-operators failing; checking again in 5 s") == 2


def test_an_unreachable_pd_is_a_precise_failure(clock: SecondsClock) -> None:
    with pytest.raises(TidbBenchError, match=r"store-state: .*127\.0\.0\.1"):
        local_preflight(
            spec(timeoutSeconds=0), creds=Credentials("root", ""),
            pd_url=f"http://127.0.0.1:{closed_port()}", out=None, clock=clock, sleep=clock.sleep,
        )  # fmt: skip
