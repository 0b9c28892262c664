"""The test bed starts from a clone inside a private directory (mode 0700, as root's home and every
`mktemp -d` directory are): every process it starts runs as the invoking user, so no other
user has to reach into the clone. Its own ports and state, torn down afterwards.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest

from testbed.cluster import PORT_BASE, REPO_ROOT, Ports, Testbed, TestbedError, pid_alive
from testbed.services import DB_OS_USER_ENV, mariadb_info, start_mariadb

# Serial (`make e2e`): a whole second test bed, started from a clone, beside the shared one.
pytestmark = [pytest.mark.e2e, pytest.mark.serial]

# Five ports from the base; +50 is test_install_order's second control plane.
PRIVATE_BASE = PORT_BASE + 70
# What the test bed needs from a clone: its code, the CRDs and the recorded data.
CLONE_PARTS = ("operator", "tests", "crds")
SERVICES = {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "agent",
            "mariadb"}  # fmt: skip


@pytest.fixture
def private_dir() -> Iterator[Path]:
    parent = Path(tempfile.mkdtemp(prefix="tidb-bench-private-"))
    try:
        assert stat.S_IMODE(parent.stat().st_mode) == 0o700
        yield parent
    finally:
        shutil.rmtree(parent, ignore_errors=True)


def run_testbed(clone: Path, action: str) -> subprocess.CompletedProcess[str]:
    """`python -m testbed <action>` run from the clone's own code, with its default state."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("TIDB_BENCH_TESTBED_DIR", DB_OS_USER_ENV)
    }
    env["PYTHONPATH"] = f"{clone / 'operator'}:{clone / 'tests'}"
    env["TIDB_BENCH_TESTBED_PORT_BASE"] = str(PRIVATE_BASE)
    return subprocess.run(
        [sys.executable, "-m", "testbed", action],
        cwd=clone, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def real_uid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid line for pid {pid}")


def test_the_test_bed_starts_from_a_clone_in_a_private_directory(private_dir: Path) -> None:
    clone = private_dir / "repo"
    for part in CLONE_PARTS:
        shutil.copytree(
            REPO_ROOT / part, clone / part, ignore=shutil.ignore_patterns("__pycache__")
        )
    state = clone / ".testbed"
    pids: dict[str, int] = {}
    try:
        up = run_testbed(clone, "up")
        assert up.returncode == 0, up.stdout + up.stderr
        assert f"export KUBECONFIG={state / 'admin.kubeconfig'}" in up.stdout
        assert Testbed(state=state, ports=Ports(base=PRIVATE_BASE)).is_up()
        pids = {p.stem: int(p.read_text()) for p in state.glob("*.pid")}
        assert set(pids) == SERVICES
        # No process of the test bed runs as another user (MariaDB used to run as `mysql`).
        assert {name: real_uid(pid) for name, pid in pids.items()} == {
            name: os.getuid() for name in pids
        }
        db = mariadb_info(Testbed(state=state))
        assert db["port"] == PRIVATE_BASE + 3
        with pymysql.connect(
            host=str(db["host"]), port=int(db["port"]), user=str(db["user"]),
            password=str(db["password"]), database=str(db["database"]),
        ) as conn, conn.cursor() as cur:  # fmt: skip
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY)")
            cur.execute("INSERT INTO t VALUES (1)")
            cur.execute("SELECT COUNT(*) FROM t")
            assert cur.fetchone() == (1,)
    finally:
        down = run_testbed(clone, "down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert not state.exists()
    assert [name for name, pid in pids.items() if pid_alive(pid)] == []


def test_a_database_user_who_cannot_reach_the_state_is_named_with_the_directory(
    private_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DB_OS_USER_ENV, "mysql")
    tb = Testbed(state=private_dir / "repo" / ".testbed", ports=Ports(base=PRIVATE_BASE))
    tb.logs.mkdir(parents=True)
    with pytest.raises(TestbedError) as err:
        start_mariadb(tb)
    assert str(err.value).startswith(
        f"MariaDB runs as user 'mysql', who cannot enter {private_dir} (mode 0700, owner "
    ), err.value
    assert f"unset {DB_OS_USER_ENV}" in str(err.value)
    assert "TIDB_BENCH_TESTBED_DIR" in str(err.value)
    assert not (tb.state / "mariadb.pid").exists()  # refused before anything started
