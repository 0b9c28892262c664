"""`tidb-bench run`: the example sweep from this machine with real sysbench against MariaDB."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.fake_pd import API, FakePD, field_note_stores
from testbed.services import connect

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "point-select-sweep.yaml"


@pytest.fixture
def database(mariadb: dict[str, Any]) -> Iterator[str]:
    """A database of this test's own: other suites share the MariaDB and its sbtest tables."""
    name = "clirun_" + secrets.token_hex(3)
    yield name
    conn = connect(mariadb)
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    finally:
        conn.close()


def short_sweep(tmp_path: Path, database: str) -> Path:
    """The example BenchmarkRun, cut down to a sweep that takes seconds."""
    run = yaml.safe_load(EXAMPLE.read_text())
    run["spec"].update(
        database=database,
        durationSeconds=2,
        warmupSeconds=1,
        reportIntervalSeconds=1,
        threads=[1, 2],
    )
    run["spec"]["dataset"].update(tables=1, tableSize=1000)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(run))
    return path


def test_run_sweeps_the_example_against_a_real_database_and_prints_json(
    tmp_path: Path, mariadb: dict[str, Any], database: str
) -> None:
    password = str(mariadb["password"])
    tidb_bench = Path(sys.executable).parent / "tidb-bench"
    proc = subprocess.run(
        [
            str(tidb_bench), "run", "-f", str(short_sweep(tmp_path, database)),
            "--host", str(mariadb["host"]), "--port", str(mariadb["port"]),
            "--user", str(mariadb["user"]), "--format", "json",
        ],
        env={**os.environ, "TIDB_BENCH_PASSWORD": password},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    steps = out["steps"]
    assert [(s["workload"], s["threads"]) for s in steps] == [
        ("oltp_point_select", 1),
        ("oltp_point_select", 2),
    ]
    for step in steps:
        assert step["qps"] > 0
        assert step["events"] > 0
        assert step["latencyMs"]["percentile"] == 95
        assert step["sysbenchVersion"].startswith("1.0")
        assert 1.5 < step["durationSeconds"] < 4
        assert any(n.startswith("warm-up: a separate 1s run") for n in step["notes"])
    assert out["summary"]["peakQps"] == max(s["qps"] for s in steps)
    assert out["summary"]["peakThreads"] in (1, 2)
    assert password not in proc.stdout
    assert password not in proc.stderr
    assert "sysbench" in proc.stderr, "sysbench's own output is streamed to stderr"


def cli_run(
    run_file: Path, mariadb: dict[str, Any], *extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(Path(sys.executable).parent / "tidb-bench"), "run", "-f", str(run_file),
            "--host", str(mariadb["host"]), "--port", str(mariadb["port"]),
            "--user", str(mariadb["user"]), *extra,
        ],
        env={**os.environ, "TIDB_BENCH_PASSWORD": str(mariadb["password"])},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def database_exists(mariadb: dict[str, Any], name: str) -> bool:
    conn = connect(mariadb)
    try:
        with conn.cursor() as cur:
            return bool(cur.execute("SHOW DATABASES LIKE %s", (name,)))
    finally:
        conn.close()


def test_run_with_pd_url_refuses_an_unbalanced_cluster_under_enforce_and_touches_nothing(
    tmp_path: Path, mariadb: dict[str, Any], database: str
) -> None:
    run_file = short_sweep(tmp_path, database)
    run = yaml.safe_load(run_file.read_text())
    run["spec"]["preflight"] = {"policy": "Enforce", "timeoutSeconds": 6}
    run_file.write_text(yaml.safe_dump(run))
    with FakePD() as pd:
        pd.set_body(f"{API}/stores", field_note_stores())
        proc = cli_run(run_file, mariadb, "--pd-url", pd.url)
    assert proc.returncode == 1, proc.stderr
    assert "preflight failed: leader-size-balance; run blocked after 6 s" in proc.stderr
    assert "store 4" in proc.stderr
    assert "checking again in 5 s" in proc.stderr
    assert proc.stdout == ""
    assert not database_exists(mariadb, database), "nothing may be prepared"


def test_run_with_pd_url_under_warn_measures_and_reports_the_findings(
    tmp_path: Path, mariadb: dict[str, Any], database: str
) -> None:
    run_file = short_sweep(tmp_path, database)
    run = yaml.safe_load(run_file.read_text())
    run["spec"].update(threads=[1], preflight={"policy": "Warn"})
    run_file.write_text(yaml.safe_dump(run))
    with FakePD() as pd:
        pd.set_body(f"{API}/stores", field_note_stores())
        proc = cli_run(run_file, mariadb, "--pd-url", pd.url, "--format", "json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    checks = {c["name"]: c for c in out["preflight"]["checks"]}
    assert checks["leader-size-balance"]["status"] == "Fail"
    assert "store 4" in checks["leader-size-balance"]["message"]
    assert checks["store-state"]["status"] == "Pass"
    # MariaDB is not TiDB: the check that needs SHOW TABLE ... REGIONS says so.
    assert checks["table-leader-distribution"]["message"].startswith("not TiDB (server says")
    assert "bench-node-isolation" not in checks
    assert out["steps"][0]["qps"] > 0
