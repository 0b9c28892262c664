"""Routes from Service names to local servers, for a controller started with the shim.

The shim (testbed/service_routes_shim/sitecustomize.py) plays cluster DNS and kube-proxy for
one controller process; `route_service` adds a route only for a Service that exists in the
API server with that port, so a name the operator never made still resolves nowhere.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from kubernetes import client

SHIM_DIR = Path(__file__).resolve().parent / "service_routes_shim"


def shim_env(routes: Path) -> dict[str, str]:
    """The environment a controller needs to resolve the routed Service names."""
    path = os.pathsep.join(p for p in (str(SHIM_DIR), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "TESTBED_SERVICE_ROUTES": str(routes)}


def route_service(
    core: client.CoreV1Api, routes: Path, namespace: str, service: str, port: int, to: str
) -> None:
    """Route `<service>.<namespace>:<port>` to `to` (host:port); the Service must exist."""
    svc = core.read_namespaced_service(service, namespace)
    ports = {p.port for p in svc.spec.ports or []}
    if port not in ports:
        raise ValueError(f"Service {namespace}/{service} has no port {port} (it has {ports})")
    table = json.loads(routes.read_text()) if routes.exists() else {}
    table[f"{service}.{namespace}:{port}"] = to
    routes.write_text(json.dumps(table))
