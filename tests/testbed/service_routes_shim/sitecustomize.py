"""Test bed only: Service names for a controller that runs outside any cluster.

There is no cluster DNS and no kube-proxy on the test bed, so `<service>.<namespace>` (or
`….svc`, `….svc.<domain>`) resolves nowhere. A controller started with this directory on
its PYTHONPATH and TESTBED_SERVICE_ROUTES naming a JSON file resolves such a name, on the
port asked for, to the `host:port` the file routes it to (`{"basic-pd.ns:2379":
"127.0.0.1:40123"}`); testbed.service_routes writes the file only for Services that exist.
Any other name resolves as always. The controller's code is unaware of this.
"""

from __future__ import annotations

import json
import os
import re
import socket
from typing import Any

_ROUTES = os.environ.get("TESTBED_SERVICE_ROUTES")
_NAME = re.compile(r"^([a-z0-9-]+)\.([a-z0-9-]+)(\.svc(\.[a-z0-9.-]+)?)?$")
_real_getaddrinfo = socket.getaddrinfo


def _getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
    match = _NAME.match(host) if isinstance(host, str) else None
    if match and _ROUTES:
        try:
            with open(_ROUTES) as f:
                routes = json.load(f)
        except (OSError, ValueError):
            routes = {}
        to = routes.get(f"{match[1]}.{match[2]}:{port}")
        if isinstance(to, str):
            to_host, to_port = to.rsplit(":", 1)
            return _real_getaddrinfo(to_host, int(to_port), *args, **kwargs)
    return _real_getaddrinfo(host, port, *args, **kwargs)


if _ROUTES:
    socket.getaddrinfo = _getaddrinfo
