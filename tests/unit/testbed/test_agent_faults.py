"""The node agent's kubelet-like stop and its fault injection helpers."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from testbed.agent import session_pids, stop_gracefully, unpullable


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("registry.invalid/tidb-bench:typo", True),
        ("registry.invalid:5000/x/y:1", True),
        ("ghcr.io/tidb-bench/tidb-bench-operator:0.1.0", False),
        ("tidb-bench:test", False),
        (None, False),
    ],
)
def test_only_images_on_an_invalid_registry_cannot_be_pulled(
    image: str | None, expected: bool
) -> None:
    assert unpullable(image) is expected


#: A main process that ignores SIGTERM (as a PID 1 without a handler does) and has a child
#: in a process group of its own (as the runner's sysbench).
IGNORES_TERM = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], process_group=0)
time.sleep(60)
"""


def test_a_graceful_stop_terms_the_main_process_then_kills_its_whole_session() -> None:
    main = subprocess.Popen([sys.executable, "-c", IGNORES_TERM], start_new_session=True)
    deadline = time.monotonic() + 10
    while len(session_pids(main.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(session_pids(main.pid)) == 2, "the main process and its own-group child"
    started = time.monotonic()
    stop_gracefully(main, grace=1.0)
    assert 1.0 <= time.monotonic() - started < 4.0, "SIGTERM ignored: SIGKILL after the grace"
    time.sleep(0.2)
    assert [p for p in session_pids(main.pid) if _alive(p)] == []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
