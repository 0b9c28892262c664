"""The run's database connection from its Secret: the user is named by its Secret key only."""

from __future__ import annotations

from datetime import UTC, datetime

from testbed.fake_kube import FakeClock, FakeKube
from tidb_bench_operator.domain.api.resources import parse_run_spec
from tidb_bench_operator.domain.manifests import compute_endpoint
from tidb_bench_operator.reconcile.run.connections import run_dsn
from unit.reconcile.run.support import NS, PASSWORD, SECRET, run_spec

TOKEN = "eyJhbGciOiJSUzI1NiJ9.planted"


def test_a_dsn_from_the_secret_names_the_key_its_user_came_from_never_the_user() -> None:
    kube = FakeKube(FakeClock(datetime(2026, 1, 1, tzinfo=UTC)))
    kube.add_secret(NS, SECRET, {"user": "bench", "password": PASSWORD, "token": TOKEN})
    spec = parse_run_spec(run_spec(credentials={"secretRef": {"name": SECRET}, "userKey": "token"}))
    dsn = run_dsn(kube, spec, NS, compute_endpoint(spec, NS))  # type: ignore[arg-type]
    assert dsn.user == TOKEN, "the connection itself uses the value"
    assert TOKEN not in dsn.where() and TOKEN not in repr(dsn)
    assert dsn.where().endswith(f"as the user in Secret {NS}/{SECRET} key 'token'")
