"""The Kubernetes build step fails precisely (it needs apt and the network, so it is e2e)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Serial (`make e2e`): it runs the Kubernetes build script, which holds the build cache's lock.
pytestmark = [pytest.mark.e2e, pytest.mark.serial]


def test_a_missing_debian_source_package_fails_the_build_precisely(tmp_path: Path) -> None:
    r = subprocess.run(
        ["bash", str(ROOT / "scripts" / "testbed" / "build-k8s.sh")],
        env={
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": str(tmp_path),
            "TIDB_BENCH_CACHE": str(tmp_path / "cache"),
            "K8S_DEB_VERSION": "0.0.0-does-not-exist",
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 1
    assert "FAILED: apt-get source kubernetes=0.0.0-does-not-exist" in r.stderr
    assert f"log: {tmp_path / 'cache' / 'build-k8s.log'}" in r.stderr
