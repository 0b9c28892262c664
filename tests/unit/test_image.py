"""The image deploy/ names: its tag is the package version everywhere, and the test bed's
node agent runs it as the Dockerfile's ENTRYPOINT would."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import yaml

from testbed.agent import IMAGE_ENTRYPOINTS, image_repository
from tidb_bench_operator import __version__
from tidb_bench_operator.domain.manifests import DEFAULT_IMAGE

REPO = Path(__file__).resolve().parents[2]
DEPLOYMENT = REPO / "deploy" / "base" / "deployment.yaml"


def deployment_images() -> list[str]:
    doc = yaml.safe_load(DEPLOYMENT.read_text())
    container = doc["spec"]["template"]["spec"]["containers"][0]
    runner = next(e["value"] for e in container["env"] if e["name"] == "TIDB_BENCH_RUNNER_IMAGE")
    return [container["image"], runner]


def test_every_image_reference_is_tagged_with_the_package_version() -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert __version__ == version
    for image in [*deployment_images(), DEFAULT_IMAGE]:
        assert image.rsplit(":", 1)[1] == version, (
            f"{image}: bump the tag with the version (pyproject.toml {version}); "
            "`cd deploy && kustomize edit set image` overrides it per install"
        )


def test_the_agent_runs_the_images_entrypoint_as_the_dockerfile_declares_it() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    match = re.search(r"^ENTRYPOINT (\[.*\])$", dockerfile, re.M)
    assert match, "the Dockerfile declares an exec-form ENTRYPOINT"
    repository = image_repository(deployment_images()[0])
    assert IMAGE_ENTRYPOINTS[repository] == json.loads(match.group(1))
    assert re.search(r"^CMD \[\"operator\"\]$", dockerfile, re.M)  # the Deployment's args


def test_image_repository_drops_tag_and_digest_but_keeps_a_registry_port() -> None:
    assert image_repository("ghcr.io/a/b:1.0") == "ghcr.io/a/b"
    assert image_repository("localhost:5000/a/b:1.0") == "localhost:5000/a/b"
    assert image_repository("a/b@sha256:abc") == "a/b"
    assert image_repository("busybox") == "busybox"
