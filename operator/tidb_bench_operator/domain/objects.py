"""Reading plain Kubernetes objects (camelCase dicts as the API serves them), never raising."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The node label every node has: its name (`kubernetes.io/hostname`).
HOSTNAME_KEY = "kubernetes.io/hostname"
#: A Kubernetes object or API body as the client returns it (camelCase keys), ours to change.
JSON = dict[str, Any]
#: The same, only read (a parameter that accepts any mapping).
JSONView = Mapping[str, Any]


def get_path(obj: Mapping[str, Any] | None, *path: str) -> Any:
    """The value at `path` in nested mappings, or None where any step is missing."""
    cur: Any = obj
    for key in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(key)
    return cur


def metadata_labels(obj: Mapping[str, Any]) -> dict[str, str]:
    """`metadata.labels`, empty when absent or not a mapping."""
    labels = get_path(obj, "metadata", "labels")
    return dict(labels) if isinstance(labels, Mapping) else {}


def metadata_name(obj: Mapping[str, Any]) -> str:
    """`metadata.name`, empty when absent."""
    return str(get_path(obj, "metadata", "name") or "")


def _resource_version(body: Mapping[str, Any]) -> int | None:
    text = (body.get("metadata") or {}).get("resourceVersion")
    try:
        return int(str(text))
    except (TypeError, ValueError):
        return None


def newer_version(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether `new` is a later version of the object than `old` (resourceVersion order;
    an unreadable version counts as newer)."""
    if old is None:
        return True
    a, b = _resource_version(old), _resource_version(new)
    return a is None or b is None or b > a
