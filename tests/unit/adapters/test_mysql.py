"""The MySQL adapter's messages: a user read from a Secret is named by its Secret key only."""

from __future__ import annotations

import socket
import threading
import time

import pymysql
import pymysql.err
import pytest

from tidb_bench_operator.adapters import mysql
from tidb_bench_operator.errors import DatabaseError

TOKEN = "eyJhbGciOi-planted-token"
SOURCE = "Secret bench/bench-creds key 'token'"


def refusing(errno: int, text: str) -> object:
    def connect(**_kwargs: object) -> object:
        raise pymysql.err.OperationalError(errno, text)

    return connect


def test_a_refused_login_names_the_secret_key_and_never_the_user(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        pymysql,
        "connect",
        refusing(1045, f"Access denied for user '{TOKEN}'@'10.0.0.5' (using password: YES)"),
    )
    dsn = mysql.DSN("db", 4000, TOKEN, "pw", user_source=SOURCE)
    with pytest.raises(DatabaseError) as info, mysql.connect(dsn):
        pass
    text = str(info.value)
    assert TOKEN not in text and TOKEN not in repr(dsn)
    assert text.startswith(f"cannot connect to db:4000 as the user in {SOURCE}: (1045) ")
    assert "user '<user>'@'10.0.0.5'" in text


def test_a_closed_port_names_the_secret_key_and_never_the_user(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        pymysql, "connect", refusing(2003, "Can't connect to MySQL server on 'db' ([Errno 111])")
    )
    dsn = mysql.DSN("db", 4000, TOKEN, "pw", user_source=SOURCE)
    with pytest.raises(DatabaseError) as info, mysql.connect(dsn):
        pass
    assert TOKEN not in str(info.value) and SOURCE in str(info.value)


def test_a_user_given_on_the_command_line_is_no_secret_and_is_shown() -> None:
    dsn = mysql.DSN("db", 4000, "root", "pw")
    assert dsn.where() == "root@db:4000"
    assert "root" in repr(dsn) and "pw" not in repr(dsn)


def test_the_password_is_sent_as_its_utf8_bytes_as_sysbench_sends_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, object] = {}

    def connect(**kwargs: object) -> object:
        seen.update(kwargs)
        raise pymysql.err.OperationalError(2003, "stop here")

    monkeypatch.setattr(pymysql, "connect", connect)
    with pytest.raises(DatabaseError), mysql.connect(mysql.DSN("db", 4000, "u", " ünï cödé ")):
        pass
    assert seen["password"] == " ünï cödé ".encode()


def test_a_server_that_accepts_and_never_greets_fails_within_the_connect_timeout() -> None:
    """A silent port: the greeting is waited for `timeout`, not the queries' 60 s."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        dsn = mysql.DSN("127.0.0.1", listener.getsockname()[1], "u", "pw")
        failed: list[str] = []

        def try_it() -> None:
            with pytest.raises(DatabaseError) as info, mysql.connect(dsn, timeout=0.5):
                pass
            failed.append(str(info.value))

        t0 = time.monotonic()
        worker = threading.Thread(target=try_it, daemon=True)
        worker.start()
        worker.join(5.0)
        took = time.monotonic() - t0
    assert failed, f"still waiting for the greeting after {took:.1f} s"
    assert took < 3.0
    assert failed[0].startswith("cannot connect to u@127.0.0.1:"), failed
