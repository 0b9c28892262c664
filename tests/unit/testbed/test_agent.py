"""The node agent's pieces that need no test bed: mount scripts and probes."""

from __future__ import annotations

import http.server
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from testbed.agent import Prober, mount_script


def test_a_mount_under_var_run_overlays_run_first_and_binds_read_only(tmp_path: Path) -> None:
    script = mount_script(
        [
            ("/agent/term/c", "/dev/termination-log", False),
            ("/agent/vol/token", "/var/run/secrets/kubernetes.io/serviceaccount", True),
            ("/agent/vol/tmp", "/tmp", False),
        ],
        tmp_path / "overlay",
    )
    lines = script.splitlines()
    assert lines[0] == "set -e"
    assert lines[1].startswith("mount -t overlay overlay -o lowerdir=/run,upperdir=")
    assert lines[1].endswith(" /run")
    assert "mkdir -p /run/secrets/kubernetes.io/serviceaccount" in lines
    bind = lines.index("mount --bind /agent/vol/token /run/secrets/kubernetes.io/serviceaccount")
    assert lines[bind + 1] == "mount -o remount,bind,ro /run/secrets/kubernetes.io/serviceaccount"
    assert "mount --bind /agent/vol/tmp /tmp" in lines
    assert lines[-1] == 'exec "$@"'
    assert (tmp_path / "overlay" / "upper").is_dir()


def test_a_checkout_under_a_mounted_tmp_is_bound_back_on_top_of_the_mount(tmp_path: Path) -> None:
    script = mount_script(
        [("/agent/vol/tmp", "/tmp", False), ("/agent/term", "/dev/termination-log", False)],
        tmp_path / "overlay",
        keep=["/tmp/tmp.x/repo"],
    )
    lines = script.splitlines()
    assert lines[1].startswith("mount -t overlay") and lines[1].endswith(" /run")
    hold = lines.index("mount --bind /tmp/tmp.x/repo /run/tidb-bench-testbed-keep/0")
    mount = lines.index("mount --bind /agent/vol/tmp /tmp")
    back = lines.index("mount --bind /run/tidb-bench-testbed-keep/0 /tmp/tmp.x/repo")
    assert hold < mount < back and lines[back - 1] == "mkdir -p /tmp/tmp.x/repo"
    assert subprocess.run(["sh", "-n", "-c", script], check=False).returncode == 0


def test_without_run_mounts_nothing_is_overlaid(tmp_path: Path) -> None:
    script = mount_script(
        [("/a b", "/dev/termination-log", False)], tmp_path, keep=["/srv/checkout"]
    )
    assert "overlay" not in script
    assert "mount --bind '/a b' /dev/termination-log" in script
    # The script is valid sh.
    assert subprocess.run(["sh", "-n", "-c", script], check=False).returncode == 0


class Handler(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(Handler.status)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def server() -> Iterator[int]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield int(httpd.server_address[1])
    httpd.shutdown()
    httpd.server_close()


def probe(port: Any, **timing: int) -> Any:
    return SimpleNamespace(
        http_get=SimpleNamespace(port=port, path="/healthz"),
        tcp_socket=None,
        initial_delay_seconds=timing.get("delay", 0),
        period_seconds=timing.get("period", 10),
        timeout_seconds=1,
        failure_threshold=timing.get("threshold", 3),
    )


def test_an_http_probe_counts_consecutive_failures_on_its_schedule(server: int) -> None:
    container = SimpleNamespace(ports=[SimpleNamespace(name="health", container_port=server)])
    prober = Prober("Liveness", probe("health", delay=5, period=2), container, start=100.0)
    assert prober.due(104.0) is None  # initial delay
    Handler.status = 200
    assert prober.due(105.0) == (True, "")
    assert prober.due(106.0) is None  # period
    Handler.status = 500
    ok, detail = prober.due(107.0) or (None, "")
    assert not ok and "statuscode: 500" in detail
    assert prober.due(109.0) is not None
    assert prober.failures == 2 and prober.threshold == 3
    Handler.status = 200
    prober.due(111.0)
    assert prober.failures == 0


def test_a_probe_of_a_closed_port_fails_with_the_reason(server: int) -> None:
    container = SimpleNamespace(ports=[])
    prober = Prober("Readiness", probe(1), container, start=0.0)
    ok, detail = prober.due(0.0) or (None, "")
    assert ok is False and "refused" in detail.lower()
