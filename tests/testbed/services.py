"""Test bed services beside the control plane: the node agent and the MariaDB stand-in."""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path

from testbed.cluster import Testbed, TestbedError, check_reachable, pid_alive, tail

DB_USER = "sbtest"
# The OS user MariaDB runs as. Unset: the user who starts the test bed, like every other
# process of it, so the data directory under the clone's .testbed/ is always reachable.
DB_OS_USER_ENV = "TIDB_BENCH_TESTBED_DB_USER"


def mariadb_os_user() -> str:
    """The OS user MariaDB runs as: $TIDB_BENCH_TESTBED_DB_USER, else the invoking user."""
    return os.environ.get(DB_OS_USER_ENV) or pwd.getpwuid(os.getuid()).pw_name


def start_agent(tb: Testbed) -> None:
    """Start the node agent (kubelet stand-in) as a detached process."""
    workdir = tb.state / "agent"
    workdir.mkdir(exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")]
    )
    tb._spawn(
        "agent",
        [
            sys.executable,
            "-m",
            "testbed.agent",
            f"--kubeconfig={tb.kubeconfig}",
            f"--workdir={workdir}",
            f"--port={tb.ports.kubelet}",
            f"--cert={tb.pki / 'apiserver.crt'}",
            f"--key={tb.pki / 'apiserver.key'}",
            f"--path-prefix={Path(sys.executable).parent}",
        ],
        env=env,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        tb._alive_or_raise("agent")
        if "agent up" in tail(tb.log_of("agent"), 50):
            return
        time.sleep(0.2)
    raise TestbedError(f"node agent did not come up in 20 s; log: {tb.log_of('agent')}")


def mariadb_info(tb: Testbed) -> dict[str, str | int]:
    """Host, port, user, password and database of the MariaDB stand-in."""
    return dict(json.loads((tb.state / "mariadb.json").read_text()))


def start_mariadb(tb: Testbed) -> None:
    """Initialise (once) and start MariaDB on loopback; create the sbtest user and database."""
    for tool in ("mariadbd", "mariadb-install-db", "mariadb"):
        if shutil.which(tool) is None:
            raise TestbedError(f"`{tool}` is not installed: run `make deps`")
    base = tb.state / "mariadb"
    data, run, files = base / "data", base / "run", base / "files"
    log = tb.log_of("mariadb")
    user = mariadb_os_user()
    try:
        owner = pwd.getpwnam(user)
    except KeyError:
        raise TestbedError(f"{DB_OS_USER_ENV}={user}: no such user on this machine") from None
    for d in (base, run, files):
        d.mkdir(parents=True, exist_ok=True)
        os.chown(d, owner.pw_uid, owner.pw_gid)
    check_reachable(
        "MariaDB",
        user,
        data,
        f"unset {DB_OS_USER_ENV} (MariaDB then runs as you), or set TIDB_BENCH_TESTBED_DIR "
        f"to a directory '{user}' can reach (e.g. TIDB_BENCH_TESTBED_DIR=/var/tmp/tidb-bench).",
    )
    if not (data / "mysql").exists():
        r = subprocess.run(
            [
                "mariadb-install-db",
                f"--user={user}",
                f"--datadir={data}",
                "--auth-root-authentication-method=socket",
                "--skip-test-db",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if r.returncode != 0:
            log.write_text(r.stdout + r.stderr)
            raise TestbedError(f"mariadb-install-db failed; log: {log}\n{tail(log)}")
    sock = run / "mysqld.sock"
    tb._spawn(
        "mariadb",
        [
            "mariadbd",
            "--no-defaults",
            f"--user={user}",
            # Its server may run as root: FILE statements stay inside the test bed's state.
            f"--secure-file-priv={files}",
            f"--datadir={data}",
            f"--socket={sock}",
            f"--port={tb.ports.mariadb}",
            "--bind-address=127.0.0.1",
            f"--pid-file={run / 'mysqld.pid'}",
            "--skip-log-bin",
            "--skip-name-resolve",
            "--max-connections=4000",
            "--innodb-buffer-pool-size=256M",
            "--innodb-flush-log-at-trx-commit=2",
        ],
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        tb._alive_or_raise("mariadb")
        if sock.exists():
            r = subprocess.run(
                ["mariadb", f"--socket={sock}", "-uroot", "-e", "SELECT 1"],
                capture_output=True,
                check=False,
            )
            if r.returncode == 0:
                break
        time.sleep(0.3)
    else:
        raise TestbedError(f"MariaDB never accepted connections in 60 s; log: {log}\n{tail(log)}")
    info_path = tb.state / "mariadb.json"
    if info_path.exists():
        password = str(json.loads(info_path.read_text())["password"])
    else:
        password = "tb-" + secrets.token_hex(12)
    sql = (
        f"CREATE DATABASE IF NOT EXISTS sbtest;"
        f"CREATE USER IF NOT EXISTS '{DB_USER}'@'%' IDENTIFIED BY '{password}';"
        f"ALTER USER '{DB_USER}'@'%' IDENTIFIED BY '{password}';"
        f"GRANT ALL ON *.* TO '{DB_USER}'@'%';"
    )
    r = subprocess.run(
        ["mariadb", f"--socket={sock}", "-uroot", "-e", sql], capture_output=True, text=True
    )
    if r.returncode != 0:
        raise TestbedError(f"creating the sbtest user in MariaDB failed: {r.stderr.strip()}")
    info_path.write_text(
        json.dumps(
            {
                "host": "127.0.0.1",
                "port": tb.ports.mariadb,
                "user": DB_USER,
                "password": password,
                "database": "sbtest",
                "socket": str(sock),
            }
        )
    )


def mariadb_alive(tb: Testbed) -> bool:
    pidfile = tb.state / "mariadb.pid"
    return pidfile.exists() and pid_alive(int(pidfile.read_text()))
