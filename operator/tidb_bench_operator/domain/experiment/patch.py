"""What a variant may change, the stash of the fields it touches, and the patch that restores them.

Variants are JSON merge patches (RFC 7386) of one object's spec: the TidbCluster (v1) or a
v2 group. The stash maps a JSON pointer (RFC 6901) into that spec to the value found there,
or ABSENT. A stashed pointer is the highest point a patch changes as a whole: a leaf, a field
that replaces a non-object, or a field that did not exist (restoring removes it whole, so no
empty object is left behind).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

V1_KIND = "TidbCluster"


class _Absent:
    """The marker of a field that did not exist."""

    def __repr__(self) -> str:
        return "ABSENT"

    def __deepcopy__(self, memo: dict[int, Any]) -> _Absent:
        return self  # one marker, compared by identity


ABSENT: Final = _Absent()

# TiDB Operator v1 components that sit under the TidbCluster's spec (pingcap.com_tidbclusters).
_V1_COMPONENTS = frozenset(
    {"pd", "tikv", "tidb", "tiflash", "ticdc", "pump", "tiproxy", "pdms", "tikvWorker"}
)
# What an experiment may change: scale, resources, configuration, version and image, and
# where pods go. Each is put back exactly by a merge patch and leaves no data behind.
_CHANGEABLE = (
    "replicas", "resources", "config", "version", "image", "baseImage", "annotations",
    "labels", "nodeSelector", "tolerations", "affinity", "topologySpreadConstraints",
)  # fmt: skip
# v1 writes a component's resources inline (`spec.tikv.requests`, `.limits`), storage among them.
_V1_CHANGEABLE = frozenset({*_CHANGEABLE, "requests", "limits"} - {"resources"})
_POD_SCHEDULING = ("nodeSelector", "tolerations", "affinity", "topologySpreadConstraints")
_CLUSTER_WIDE = ("version", "annotations", "labels", *_POD_SCHEDULING)
# v2 groups (core.pingcap.com v1alpha1): the changeable fields' paths in a group's spec.
_V2_ALLOWED: tuple[tuple[str, ...], ...] = (
    ("replicas",),
    ("template", "metadata", "annotations"),
    ("template", "metadata", "labels"),
    ("template", "spec", "version"),
    ("template", "spec", "image"),
    ("template", "spec", "resources"),
    ("template", "spec", "config"),
    ("template", "spec", "overlay", "pod", "metadata", "annotations"),
    ("template", "spec", "overlay", "pod", "metadata", "labels"),
    *(("template", "spec", "overlay", "pod", "spec", key) for key in _POD_SCHEDULING),
)
_STORAGE_KEYS = frozenset({"storage", "ephemeral-storage"})
_VOLUME_KEYS = frozenset(
    {"volumes", "storageVolumes", "storageClaims", "storageClassName", "dataSubDir"}
)
_TLS_KEYS = frozenset({"tlsCluster", "tlsClient", "tls", "security"})
_RESOURCE_KEYS = frozenset({"resources", "requests", "limits"})
_WHAT = ", ".join(_CHANGEABLE)


def escape(segment: str) -> str:
    """One JSON pointer segment (RFC 6901: `~` → `~0`, `/` → `~1`)."""
    return segment.replace("~", "~0").replace("/", "~1")


def pointer(*segments: str) -> str:
    """`/tikv/replicas` from its segments."""
    return "".join("/" + escape(s) for s in segments)


def segments(text: str) -> list[str]:
    """The segments of a JSON pointer (the inverse of `pointer`)."""
    if not text:
        return []
    return [s.replace("~1", "/").replace("~0", "~") for s in text[1:].split("/")]


def value_at(doc: Any, text: str) -> Any:
    """The value at a pointer, or ABSENT."""
    node = doc
    for seg in segments(text):
        if not isinstance(node, Mapping) or seg not in node:
            return ABSENT
        node = node[seg]
    return node


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386: `target` with the merge patch applied (neither is changed)."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge(out.get(key), value)
    return out


def diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch that turns `before` into `after` (empty when they are equal)."""
    out: dict[str, Any] = {}
    for key in before.keys() - after.keys():
        out[key] = None
    for key, value in after.items():
        old = before.get(key, ABSENT)
        if old == value:
            continue
        if isinstance(old, Mapping) and isinstance(value, Mapping):
            out[key] = diff(old, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def set_at(doc: dict[str, Any], text: str, value: Any) -> None:
    """Put `value` at a pointer of `doc`, creating objects on the way (ABSENT: remove it)."""
    *parents, last = segments(text)
    node = doc
    for seg in parents:
        child = node.get(seg)
        if not isinstance(child, dict):
            if value is ABSENT:
                return
            child = node[seg] = {}
        node = child
    if value is ABSENT:
        node.pop(last, None)
    else:
        node[last] = copy.deepcopy(value)


# --------------------------------------------------------------------------- check_patch


def check_patch(kind: str, patch: Mapping[str, Any]) -> list[str]:
    """What in a variant's patch an experiment may not change, each with its path and remedy.

    `kind` is TidbCluster (the patch is for its spec) or a v2 group kind (for the group's
    spec). Empty: the patch only touches fields a merge patch can put back exactly.
    """
    problems: list[str] = []
    _check(kind, (), patch, problems)
    return problems


def _allowed(kind: str, path: tuple[str, ...]) -> bool | None:
    """True: `path` lies inside a changeable field; None: on the way to one; False: outside."""
    if kind == V1_KIND:
        if not path:
            return None
        if len(path) == 1:
            return (
                True if path[0] in _CLUSTER_WIDE else (None if path[0] in _V1_COMPONENTS else False)
            )
        return path[0] in _V1_COMPONENTS and path[1] in _V1_CHANGEABLE
    for allowed in _V2_ALLOWED:
        if path[: len(allowed)] == allowed:
            return True
        if allowed[: len(path)] == path:
            return None
    return False


def _check(kind: str, path: tuple[str, ...], value: Any, problems: list[str]) -> None:
    where = "spec" + "".join(f".{p}" for p in path)
    if "config" not in path and any(p in _TLS_KEYS for p in path):
        problems.append(
            f"{where}: TLS and security cannot be changed by an experiment (clients and "
            "certificates would change under the run); change it by hand, then measure"
        )
        return
    if any(p in _VOLUME_KEYS for p in path) or (
        path and path[-1] in _STORAGE_KEYS and _RESOURCE_KEYS & set(path)
    ):
        problems.append(
            f"{where}: storage cannot be changed by an experiment (a volume is not shrunk "
            "back); remove it from the patch"
        )
        return
    allowed = _allowed(kind, path)
    if allowed is True:
        if _RESOURCE_KEYS & set(path) and isinstance(value, Mapping):
            # requests.storage sizes a component's volume in v1: refuse it inside resources.
            for key, child in value.items():
                _check(kind, (*path, key), child, problems)
        return
    if allowed is None and isinstance(value, Mapping):
        for key, child in value.items():
            _check(kind, (*path, key), child, problems)
        return
    if allowed is None:
        what = "a whole component" if len(path) == 1 else f"all of {where}"
        problems.append(
            f"{where}: removing or replacing {what} cannot be undone by the restore; "
            "change its replicas or the fields inside it instead"
        )
        return
    problems.append(
        f"{where}: outside what an experiment may change ({_WHAT}; v1 components' "
        "requests and limits); remove it from the patch"
    )


# --------------------------------------------------------------------------- stash


def touched(spec: Mapping[str, Any], patch: Mapping[str, Any]) -> list[str]:
    """The pointers the merge patch changes as a whole (see the module docstring)."""
    return list(_touched(spec, patch, ()))


def _touched(node: Any, patch: Mapping[str, Any], path: tuple[str, ...]) -> Iterator[str]:
    for key, value in patch.items():
        here = (*path, key)
        current = node.get(key, ABSENT) if isinstance(node, Mapping) else ABSENT
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            yield from _touched(current, value, here)
        else:
            yield pointer(*here)


def stash_of(
    cluster_spec: Mapping[str, Any], patches: Iterable[Mapping[str, Any]]
) -> dict[str, Any]:
    """Pointer → the value found (or ABSENT) for every field any of the patches changes.

    A pointer under another stashed pointer is left out: restoring the outer one restores it.
    """
    found: set[str] = set()
    for patch in patches:
        found.update(touched(cluster_spec, patch))
    outer = sorted(found, key=lambda p: (len(segments(p)), p))
    kept: list[str] = []
    for text in outer:
        if not any(_under(text, k) for k in kept):
            kept.append(text)
    return {text: copy.deepcopy(value_at(cluster_spec, text)) for text in sorted(kept)}


def _under(text: str, outer: str) -> bool:
    return segments(text)[: len(segments(outer))] == segments(outer)


def stashed_doc(stash: Mapping[str, Any]) -> dict[str, Any]:
    """The spec as found, restricted to the stashed fields (ABSENT ones left out)."""
    doc: dict[str, Any] = {}
    for text, value in stash.items():
        set_at(doc, text, value)
    return doc


# --------------------------------------------------------------------------- restore


@dataclass(frozen=True)
class Restore:
    """The merge patch that puts the stash back, and the fields left alone (in our words)."""

    patch: dict[str, Any]
    left_alone: list[str] = field(default_factory=list)


def restore_patch(
    stash: Mapping[str, Any], current_spec: Mapping[str, Any], applied: Mapping[str, Any] | None
) -> Restore:
    """Put back exactly the stashed fields, except one someone else changed since.

    `applied` is the last patch the experiment applied against the found spec (None: none
    yet). A field holding neither its stashed value nor the one `applied` set was changed by
    someone else: it is left as it is and named.
    """
    expected = merge(stashed_doc(stash), applied or {})
    out: dict[str, Any] = {}
    left: list[str] = []
    for text, original in sorted(stash.items()):
        now = value_at(current_spec, text)
        if now == original:
            continue
        if now != value_at(expected, text):
            left.append(f"{text} was changed by someone else during the experiment; left as it is")
            continue
        if isinstance(original, Mapping) and isinstance(now, Mapping):
            # A merge patch merges objects: what the variant added must be removed too.
            set_at(out, text, diff(now, original))
        else:
            set_at(out, text, None if original is ABSENT else original)
    return Restore(out, left)
