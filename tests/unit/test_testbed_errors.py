"""The test bed fails precisely: what failed, where its log is, what to do."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from testbed import cluster
from testbed.cluster import Ports, Testbed, TestbedError


def test_a_port_in_use_is_named_with_its_component(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        tb = Testbed(state=tmp_path, ports=Ports(base=port - 2))
        with pytest.raises(TestbedError) as err:
            tb._check_ports()
    assert f"{port} (kube-apiserver)" in str(err.value)
    assert "TIDB_BENCH_TESTBED_PORT_BASE" in str(err.value)


def test_missing_kubernetes_binaries_say_how_to_build_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cluster, "K8S_BIN", tmp_path / "nothing-here")
    with pytest.raises(TestbedError) as err:
        Testbed(state=tmp_path)._check_binaries()
    assert "kube-apiserver" in str(err.value) and "make k8s" in str(err.value)


def test_a_component_that_dies_at_start_up_is_reported_with_its_log(tmp_path: Path) -> None:
    tb = Testbed(state=tmp_path)
    tb.logs.mkdir(parents=True)
    tb._spawn("kube-apiserver", ["sh", "-c", "echo 'error: invalid flag --bogus' >&2; exit 1"])
    import time

    time.sleep(0.5)
    with pytest.raises(TestbedError) as err:
        tb._alive_or_raise("kube-apiserver")
    text = str(err.value)
    assert "kube-apiserver exited during start-up" in text
    assert str(tb.log_of("kube-apiserver")) in text
    assert "invalid flag --bogus" in text
    tb.stop()  # reaps the exited child


def _stat(mode: int, uid: int = 0, gid: int = 0) -> os.stat_result:
    return os.stat_result((mode, 0, 0, 0, uid, gid, 0, 0, 0, 0))


def _tree(
    ann: os.stat_result, repo: os.stat_result | None = None
) -> Callable[[Path], os.stat_result]:
    """A stat function over /, /home, /home/ann and /home/ann/repo (when given); nothing deeper."""
    table = {Path("/"): _stat(0o40755), Path("/home"): _stat(0o40755), Path("/home/ann"): ann}
    if repo is not None:
        table[Path("/home/ann/repo")] = repo

    def stat_of(p: Path) -> os.stat_result:
        if p not in table:
            raise FileNotFoundError(p)
        return table[p]

    return stat_of


MYSQL_UID, MYSQL_GID = 101, 102
DATA = Path("/home/ann/repo/.testbed/mariadb/data")


def test_a_private_parent_is_the_first_directory_another_user_cannot_enter() -> None:
    tree = _tree(_stat(0o40700), _stat(0o40755))
    found = cluster.first_blocked_dir(DATA, MYSQL_UID, {MYSQL_GID}, tree)
    assert found is not None and found[0] == Path("/home/ann")


def test_the_owner_group_and_other_bits_decide_by_class_only() -> None:
    # Owner without x, although others have it: the owner cannot enter.
    tree = _tree(_stat(0o40605, uid=MYSQL_UID), _stat(0o40755))
    assert cluster.first_blocked_dir(DATA, MYSQL_UID, {MYSQL_GID}, tree) is not None
    # A member of the directory's group enters by the group bit alone.
    tree = _tree(_stat(0o40750, gid=MYSQL_GID), _stat(0o40700, uid=MYSQL_UID))
    assert cluster.first_blocked_dir(DATA, MYSQL_UID, {MYSQL_GID}, tree) is None
    # Not a member: the other bits apply, and the blocked one is the deepest that lacks them.
    tree = _tree(_stat(0o40751), _stat(0o40750, gid=7))
    found = cluster.first_blocked_dir(DATA, MYSQL_UID, {MYSQL_GID}, tree)
    assert found is not None and found[0] == Path("/home/ann/repo")


def test_root_and_paths_still_to_be_created_are_not_blocked() -> None:
    tree = _tree(_stat(0o40700))
    assert cluster.first_blocked_dir(DATA, 0, {0}, tree) is None
    tree = _tree(_stat(0o40755))  # repo/... does not exist yet
    assert cluster.first_blocked_dir(DATA, MYSQL_UID, {MYSQL_GID}, tree) is None


def test_the_message_names_the_user_the_directory_and_what_to_do() -> None:
    text = cluster.blocked_message(
        "MariaDB", "mysql", DATA, Path("/home/ann"), 0o40700, "ann", "unset X, or set Y."
    )
    assert text == (
        "MariaDB runs as user 'mysql', who cannot enter /home/ann (mode 0700, owner ann) on the "
        "way to /home/ann/repo/.testbed/mariadb/data. The test bed does not change permissions on "
        "your directories; unset X, or set Y."
    )
