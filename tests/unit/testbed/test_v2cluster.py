"""The test bed's load-time transform of TiDB Operator v2's CRDs for the 1.20 API server."""

from __future__ import annotations

import json
from typing import Any

import yaml

from testbed.v2cluster import V2_VENDOR, v2_crd_for_1_20


def walk(obj: Any) -> Any:
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k, v
            yield from walk(v)
    elif isinstance(obj, list):
        for x in obj:
            yield from walk(x)


def props(obj: Any) -> list[str]:
    """Every property name in a schema, in document order."""
    return [name for key, value in walk(obj) if key == "properties" for name in value]


def test_every_v2_crd_loses_what_1_20_cannot_read_and_keeps_its_shape() -> None:
    paths = sorted((V2_VENDOR / "crd").glob("*.yaml"))
    assert len(paths) == 7
    for path in paths:
        original = yaml.safe_load(path.read_text())
        crd = v2_crd_for_1_20(original)
        pairs = list(walk(crd))
        assert not [k for k, _ in pairs if k in ("x-kubernetes-validations", "selectableFields",
                                                  "x-kubernetes-list-map-keys")], path.name  # fmt: skip
        assert ("default", "") not in pairs, path.name
        assert ("x-kubernetes-list-type", "map") not in pairs, path.name

        # The objects' shape is kept: the same property names everywhere.
        assert props(crd) == props(original), path.name
        assert json.dumps(crd["spec"]["names"]) == json.dumps(original["spec"]["names"])
