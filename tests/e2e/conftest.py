"""Fixtures for the e2e suite: one local test bed per session, a fresh namespace per test."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from testbed.bed import bring_up, tear_down
from testbed.cluster import Testbed
from testbed.kube import api_client, wait_for
from testbed.services import mariadb_info


@pytest.fixture(scope="session")
def testbed() -> Iterator[Testbed]:
    """The test bed: reused when `make testbed-up` left one running, else started and stopped."""
    tb = Testbed()
    started = bring_up(tb)
    try:
        yield tb
    finally:
        if started:
            tear_down(tb)


@pytest.fixture(scope="session")
def api(testbed: Testbed) -> client.ApiClient:
    return api_client(testbed)


@pytest.fixture(scope="session")
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture(scope="session")
def mariadb(testbed: Testbed) -> dict[str, Any]:
    return mariadb_info(testbed)


@pytest.fixture
def namespace(request: pytest.FixtureRequest, core: client.CoreV1Api) -> Iterator[str]:
    """A namespace for one test, deleted afterwards (pods with it, via the namespace controller)."""
    base = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower().removeprefix("test_"))[:40]
    name = f"{base.strip('-')}-{secrets.token_hex(2)}"
    core.create_namespace({"metadata": {"name": name}})
    # The service-account controller creates `default`; pods are refused until it exists.
    wait_for(lambda: _has_default_sa(core, name), 30, f"ServiceAccount default in {name}")
    yield name
    try:
        core.delete_namespace(name)
    except ApiException as exc:
        if exc.status != 404:
            raise


def _has_default_sa(core: client.CoreV1Api, ns: str) -> bool:
    try:
        core.read_namespaced_service_account("default", ns)
        return True
    except ApiException:
        return False
