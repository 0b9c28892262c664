"""Install this project's CRDs (crds/benchmark*.yaml) on the test bed, created or replaced."""

from __future__ import annotations

import hashlib
import time
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from testbed.cluster import REPO_ROOT
from testbed.kube import create_crd, wait_crd_established

DIGEST = "testbed.tidbbench.io/file-sha256"


def install_project_crds(api: Any) -> None:
    """Create each CRD, or replace it when it exists (a changed schema takes effect); wait."""
    ext = client.ApiextensionsV1Api(api)
    for path in sorted((REPO_ROOT / "crds").glob("benchmark*.yaml")):
        text = path.read_text()
        body = yaml.safe_load(text)
        # The file's digest on the object: a CRD already equal to the file is left alone. A
        # replace, even with the same schema, can end the watches of a controller another
        # pytest-xdist worker already runs (`make e2e`).
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        body["metadata"].setdefault("annotations", {})[DIGEST] = digest
        if not create_crd(ext, body):
            current = ext.read_custom_resource_definition(body["metadata"]["name"])
            if (current.metadata.annotations or {}).get(DIGEST) != digest:
                _replace_crd(ext, body)
        wait_crd_established(ext, body["metadata"]["name"])
        wait_discoverable(api, body)


def _replace_crd(ext: client.ApiextensionsV1Api, body: dict[str, Any]) -> None:
    """Replace the CRD, read again on a conflict: under `make e2e` two pytest-xdist workers
    install the same CRDs at the same moment, and one's replace meets the other's write."""
    name = body["metadata"]["name"]
    for attempt in range(5):
        body["metadata"]["resourceVersion"] = ext.read_custom_resource_definition(
            name
        ).metadata.resource_version
        try:
            ext.replace_custom_resource_definition(name, body)
            return
        except ApiException as exc:
            if exc.status != 409 or attempt == 4:
                raise
            time.sleep(0.2)


def wait_discoverable(api: Any, crd: dict[str, Any], timeout: float = 30) -> None:
    """Wait until API discovery lists the CRD's resource, not only `Established`.

    A controller started in the gap scans discovery without it and does not serve the
    resource (seen on a fresh test bed: runs never reconciled).
    """
    group = crd["spec"]["group"]
    plural = crd["spec"]["names"]["plural"]
    versions = [v["name"] for v in crd["spec"]["versions"] if v.get("served")]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            found = client.CustomObjectsApi(api).get_api_resources(group, versions[0])
            if any(r.name == plural for r in found.resources):
                return
        except ApiException:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{plural}.{group} not in API discovery after {timeout} s")
