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
from typing import Any

from testbed.cluster import (
    Testbed,
    TestbedError,
    check_reachable,
    pid_alive,
    stop_pidfile,
    tail,
)

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
            f"--cadvisor-port={tb.ports.cadvisor}",
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


def _run_mariadbd(tb: Testbed, name: str, port: int, extra: list[str]) -> Path:
    """Initialise (once) and start a MariaDB server `name` on 127.0.0.1:`port`; its socket."""
    for tool in ("mariadbd", "mariadb-install-db", "mariadb"):
        if shutil.which(tool) is None:
            raise TestbedError(f"`{tool}` is not installed: run `make deps`")
    base = tb.state / name
    data, run, files = base / "data", base / "run", base / "files"
    log = tb.log_of(name)
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
        name,
        [
            "mariadbd",
            "--no-defaults",
            f"--user={user}",
            # Its server may run as root: FILE statements stay inside the test bed's state.
            f"--secure-file-priv={files}",
            f"--datadir={data}",
            f"--socket={sock}",
            f"--port={port}",
            "--bind-address=127.0.0.1",
            f"--pid-file={run / 'mysqld.pid'}",
            "--skip-log-bin",
            "--skip-name-resolve",
            "--max-connections=4000",
            "--innodb-buffer-pool-size=256M",
            "--innodb-flush-log-at-trx-commit=2",
            *extra,
        ],
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        tb._alive_or_raise(name)
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
    return sock


def start_mariadb(tb: Testbed) -> None:
    """Initialise (once) and start MariaDB on loopback; create the sbtest user and database."""
    sock = _run_mariadbd(tb, "mariadb", tb.ports.mariadb, [])
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


def connect(info: dict[str, Any]) -> Any:
    """A pymysql connection as the sbtest user of a MariaDB (`mariadb_info`, the fixture's)."""
    import pymysql

    return pymysql.connect(
        host=str(info["host"]), port=int(info["port"]),
        user=str(info["user"]), password=str(info["password"]),
    )  # fmt: skip


def mariadb_alive(tb: Testbed) -> bool:
    pidfile = tb.state / "mariadb.pid"
    return pidfile.exists() and pid_alive(int(pidfile.read_text()))


# ---------------------------------------------------------------------- MariaDB with TLS
TLS_DB_USER = "sbtls"
TLS_DB = "mariadb-tls"


def tls_db_slot(worker: str | None) -> tuple[str, int]:
    """The TLS MariaDB's state name and port offset for a pytest-xdist worker (`gw1`, ...):
    `make e2e` runs the TLS tests on two workers at once, each with its own server. One
    pytest without xdist (or its first worker) keeps `mariadb-tls` on base+8."""
    n = int(worker[2:]) if worker and worker.startswith("gw") and worker[2:].isdigit() else 0
    return (TLS_DB, 8) if n == 0 else (f"{TLS_DB}-{n}", 30 + n)


def start_mariadb_tls(
    tb: Testbed, ca: str, cert: str, key: str, *, worker: str | None = None
) -> dict[str, str | int]:
    """A second MariaDB that accepts TLS connections only, for the TLS tests.

    `require_secure_transport=ON` refuses plain connections; its user `sbtls` is created
    `REQUIRE X509`, so it must also present a client certificate signed by `ca`. The
    Performance Schema is on so a test can read each session's `Ssl_cipher` and the client
    library that opened it (`session_connect_attrs`).
    """
    name, offset = tls_db_slot(worker)
    certs = tb.state / name / "certs"
    certs.mkdir(parents=True, exist_ok=True)
    for fname, text in (("ca.pem", ca), ("server.pem", cert), ("server-key.pem", key)):
        (certs / fname).write_text(text)
        (certs / fname).chmod(0o600)
    owner = pwd.getpwnam(mariadb_os_user())
    for path in (certs, *certs.iterdir()):
        os.chown(path, owner.pw_uid, owner.pw_gid)
    port = tb.ports.base + offset
    sock = _run_mariadbd(
        tb,
        name,
        port,
        [
            f"--ssl-ca={certs / 'ca.pem'}",
            f"--ssl-cert={certs / 'server.pem'}",
            f"--ssl-key={certs / 'server-key.pem'}",
            "--require-secure-transport=ON",
            "--performance-schema=ON",
            "--innodb-buffer-pool-size=64M",
        ],
    )
    password = "tls-" + secrets.token_hex(12)
    sql = (
        "CREATE DATABASE IF NOT EXISTS sbtest;"
        f"CREATE OR REPLACE USER '{TLS_DB_USER}'@'%' IDENTIFIED BY '{password}' REQUIRE X509;"
        f"GRANT ALL ON *.* TO '{TLS_DB_USER}'@'%';"
    )
    r = subprocess.run(
        ["mariadb", f"--socket={sock}", "-uroot", "-e", sql], capture_output=True, text=True
    )
    if r.returncode != 0:
        raise TestbedError(f"creating the TLS user in MariaDB failed: {r.stderr.strip()}")
    return {
        "host": "127.0.0.1",
        "port": port,
        "user": TLS_DB_USER,
        "password": password,
        "database": "sbtest",
        "socket": str(sock),
    }


def stop_mariadb_tls(tb: Testbed, *, worker: str | None = None) -> None:
    """Stop the TLS MariaDB and remove its data."""
    name = tls_db_slot(worker)[0]
    pidfile = tb.state / f"{name}.pid"
    if pidfile.exists():
        stop_pidfile(pidfile)
    shutil.rmtree(tb.state / name, ignore_errors=True)


def root_sql(info: dict[str, str | int], sql: str) -> str:
    """Run SQL as MariaDB's root over its socket; tab-separated rows without a header."""
    r = subprocess.run(
        ["mariadb", f"--socket={info['socket']}", "-uroot", "-N", "-B", "-e", sql],
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode != 0:
        raise TestbedError(f"MariaDB root SQL failed: {r.stderr.strip()}")
    return r.stdout
