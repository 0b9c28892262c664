"""MySQL-protocol adapter (pymysql): table checks, server and TiDB versions, region listings."""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

import pymysql
import pymysql.err

from tidb_bench_operator.adapters.tls import explain
from tidb_bench_operator.domain.cluster.tls import plain_refused_hint
from tidb_bench_operator.domain.untrusted import HIDDEN_USER, hide_credentials
from tidb_bench_operator.errors import DatabaseError


@dataclass(frozen=True)
class DSN:
    """Where and as whom to connect. The password is never part of repr()."""

    host: str
    port: int
    user: str
    password: str
    database: str | None = None
    #: TLS with a client certificate, the server verified (adapters.tls); None: no TLS asked.
    tls: ssl.SSLContext | None = None
    #: Where the certificate came from, for messages: `Secret ns/name`, a mounted directory.
    tls_source: str | None = None
    #: Where the user came from when it is secret (`Secret ns/name key 'user'`): messages
    #: then name that instead of the user; None: the user is no secret (a command line's).
    user_source: str | None = None

    def __repr__(self) -> str:
        return (
            f"DSN(host={self.host!r}, port={self.port}, user={self._shown_user()!r}, "
            f"db={self.database!r})"
        )

    def _shown_user(self) -> str:
        return self.user if self.user_source is None else HIDDEN_USER

    def where(self) -> str:
        """`user@host:port`, or `host:port as the user in <user_source>` when it is secret."""
        if self.user_source is None:
            return f"{self.user}@{self.host}:{self.port}"
        return f"{self.host}:{self.port} as the user in {self.user_source}"

    def hide(self, text: str) -> str:
        """`text` with this DSN's secret user and its password hidden (domain.untrusted)."""
        return hide_credentials(text, self.user if self.user_source else "", self.password)


#: A query's answer may take this long (the connection itself: the caller's timeout).
QUERY_READ_TIMEOUT_SECONDS = 60.0


@contextmanager
def connect(dsn: DSN, timeout: float = 10.0) -> Iterator[Any]:
    """A pymysql connection with timeouts; errors become DatabaseError with the MySQL errno.

    Connecting, the server's greeting and the login included, takes at most `timeout`:
    pymysql's connect_timeout covers the TCP connect only and reads the greeting with the
    read timeout, so a server that accepts and never answers held the caller for the
    queries' read timeout (60 s) on every try.
    """
    try:
        conn = pymysql.connect(
            host=dsn.host,
            port=dsn.port,
            user=dsn.user,
            # As bytes: pymysql encodes a str password as latin-1, which fails or differs for
            # any other letter; the Secret's bytes are UTF-8, and sysbench sends them as they are.
            password=dsn.password.encode("utf-8"),
            database=dsn.database,
            connect_timeout=timeout,
            read_timeout=timeout,
            write_timeout=timeout,
            autocommit=True,
            ssl=dsn.tls,
            defer_connect=True,
        )
        conn.connect()
        # A query may take longer than a greeting (region listings of a big table):
        # pymysql reads its read timeout before every read, and has no setter for it.
        conn._read_timeout = max(timeout, QUERY_READ_TIMEOUT_SECONDS)
    except pymysql.err.MySQLError as exc:
        errno = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
        text = dsn.hide(str(exc.args[1] if len(exc.args) > 1 else exc))
        tls_problem = explain(exc, peer=f"{dsn.host}:{dsn.port}", source=dsn.tls_source)
        hint = plain_refused_hint(errno, str(text), dsn.tls is not None)
        if tls_problem:
            text = tls_problem
        elif hint:
            text = f"{text}; {hint}"
        raise DatabaseError(errno, f"cannot connect to {dsn.where()}: ({errno}) {text}") from exc
    try:
        yield conn
    finally:
        conn.close()


#: Opens a connection when called (what the preflight gate takes); the DSN is made at that
#: moment, so a password read from a Secret lives only as long as the connection.
Connector = Callable[[], AbstractContextManager[Any]]


def connector(dsn: Callable[[], DSN], timeout: float = 5.0) -> Connector:
    """A Connector: each call makes the DSN with `dsn()` and connects with `timeout`."""

    @contextmanager
    def connection() -> Iterator[Any]:
        with connect(dsn(), timeout=timeout) as conn:
            yield conn

    return connection


def query(
    conn: Any, sql: str, args: tuple[Any, ...] = ()
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run one statement; returns (column names, rows)."""
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            cols = [d[0] for d in (cur.description or [])]
            return cols, list(cur.fetchall())
    except pymysql.err.MySQLError as exc:
        errno = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
        text = exc.args[1] if len(exc.args) > 1 else str(exc)
        raise DatabaseError(errno, f"query failed: ({errno}) {text}") from exc


def table_row_counts(conn: Any, database: str, tables: list[str]) -> dict[str, int | None]:
    """Row count per table; None for a table that does not exist."""
    _, rows = query(
        conn,
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
        (database,),
    )
    existing = {str(r[0]) for r in rows}
    counts: dict[str, int | None] = {}
    for t in tables:
        if t not in existing:
            counts[t] = None
            continue
        # Names come from the sbtest<N> pattern, never from user text: safe to quote.
        _, r = query(conn, f"SELECT COUNT(*) FROM `{database}`.`{t}`")
        counts[t] = int(r[0][0])
    return counts


def database_exists(conn: Any, database: str) -> bool:
    _, rows = query(
        conn,
        "SELECT schema_name FROM information_schema.schemata WHERE schema_name = %s",
        (database,),
    )
    return bool(rows)


def server_version(conn: Any) -> str:
    """`SELECT VERSION()`: e.g. `8.0.11-TiDB-v8.1.0` on TiDB, `10.11.6-MariaDB-0+deb12u1`."""
    _, rows = query(conn, "SELECT VERSION()")
    return str(rows[0][0])


def tidb_version(conn: Any) -> str | None:
    """The multi-line `SELECT tidb_version()` text, or None when the server is not TiDB."""
    try:
        _, rows = query(conn, "SELECT tidb_version()")
    except DatabaseError as exc:
        if exc.errno in (1305, 1064, 1046):  # FUNCTION does not exist / syntax: not TiDB
            return None
        raise
    return str(rows[0][0])


def show_table_regions(
    conn: Any, database: str, table: str
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """`SHOW TABLE db.t REGIONS` (TiDB only): the 13- or 11-column listing."""
    return query(conn, f"SHOW TABLE `{database}`.`{table}` REGIONS")


def global_variables(conn: Any, names: tuple[str, ...]) -> dict[str, str]:
    """The named global variables the server knows (`SHOW GLOBAL VARIABLES`), name → value."""
    marks = ", ".join(["%s"] * len(names))
    _, rows = query(conn, f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({marks})", names)
    return {str(r[0]): str(r[1]) for r in rows}


def show_config(conn: Any) -> list[tuple[Any, ...]] | None:
    """TiDB's `SHOW CONFIG` rows (Type, Instance, Name, Value); None when the server is not TiDB."""
    try:
        _, rows = query(conn, "SHOW CONFIG")
    except DatabaseError as exc:
        if exc.errno in (1064, 1149):  # syntax error: MySQL/MariaDB have no SHOW CONFIG
            return None
        raise
    return rows


def run_statements(conn: Any, statements: list[str]) -> None:
    """Run each statement and read its result to the end (ANALYZE prints a status table)."""
    for sql in statements:
        query(conn, sql)
