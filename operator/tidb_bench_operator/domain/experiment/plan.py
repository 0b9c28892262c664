"""The plan of an experiment: baseline, each variant alone on the cluster as found, then back.

Each transition (found → first variant, one variant → the next, the last → found) is one
merge patch per object, computed from the stash, so it sets exactly the stashed fields. The
dry run writes these steps and changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tidb_bench_operator.domain.api.experiment import (
    BASELINE,
    BenchmarkExperimentSpec,
    StashEntry,
    Variant,
)
from tidb_bench_operator.domain.experiment.patch import (
    ABSENT,
    V1_KIND,
    check_patch,
    diff,
    merge,
    stash_of,
    stashed_doc,
)

#: An object a variant patches: (kind, name) — the TidbCluster, or one v2 group.
ObjectKey = tuple[str, str]
#: Per object, pointer → the value found there (or ABSENT).
Stash = dict[ObjectKey, dict[str, Any]]
FOUND = "found"


@dataclass(frozen=True)
class ObjectPatch:
    """A merge patch for one object's spec."""

    kind: str
    name: str
    patch: dict[str, Any]

    def text(self) -> str:
        """`TidbCluster basic: {"tikv": {"replicas": 4}}`."""
        return f"{self.kind} {self.name}: {json.dumps(self.patch, sort_keys=True)}"


@dataclass(frozen=True)
class Step:
    """One thing the experiment does: move the cluster (patches) and, unless restoring, measure."""

    measure: str | None
    source: str
    target: str
    patches: tuple[ObjectPatch, ...]

    def text(self) -> str:
        """One line of the dry run."""
        move = (
            "; ".join(p.text() for p in self.patches)
            if self.patches
            else "no change to the cluster"
        )
        if self.measure is None:
            return f"restore ({self.source} → {self.target}): {move}, then wait until settled"
        if not self.patches:
            return f"measure {self.measure} on the cluster as found"
        return f"{self.source} → {self.target}: {move}; wait until settled, measure {self.measure}"


def variant_patches(
    spec: BenchmarkExperimentSpec, variant: Variant
) -> dict[ObjectKey, dict[str, Any]]:
    """The variant's merge patch per object."""
    if spec.cluster.kind == V1_KIND:
        return {(V1_KIND, spec.cluster.name): dict(variant.patch or {})}
    return {(g.kind, g.name): dict(g.patch) for g in variant.groups}


def check_variants(spec: BenchmarkExperimentSpec) -> list[str]:
    """check_patch over every variant, each problem prefixed with the variant's field path."""
    out = []
    where = "variants" if spec.operation is None else "operation"
    for i, variant in enumerate(spec.changes()):
        at = f"{where}[{i}]" if spec.operation is None else where
        if spec.cluster.kind == V1_KIND:
            out += [f"{at}.patch: {p}" for p in check_patch(V1_KIND, variant.patch or {})]
        for j, group in enumerate(variant.groups):
            out += [f"{at}.groups[{j}]: {p}" for p in check_patch(group.kind, group.patch)]
    return out


def build_stash(
    spec: BenchmarkExperimentSpec, found: Mapping[ObjectKey, Mapping[str, Any]]
) -> Stash:
    """The stash of every field the variants touch, from each object's spec as found."""
    by_object: dict[ObjectKey, list[dict[str, Any]]] = {}
    for variant in spec.changes():
        for key, patch in variant_patches(spec, variant).items():
            by_object.setdefault(key, []).append(patch)
    return {key: stash_of(found.get(key) or {}, patches) for key, patches in by_object.items()}


def expected_spec(stash: Stash, key: ObjectKey, patch: Mapping[str, Any] | None) -> dict[str, Any]:
    """The object's stashed fields as they are once `patch` is applied to the cluster as found."""
    return dict(merge(stashed_doc(stash.get(key, {})), patch or {}))


def transition(
    stash: Stash,
    spec: BenchmarkExperimentSpec,
    source: Variant | None,
    target: Variant | None,
) -> tuple[ObjectPatch, ...]:
    """The patches that take the cluster from `source` to `target` (None: as found)."""
    before = variant_patches(spec, source) if source else {}
    after = variant_patches(spec, target) if target else {}
    out = []
    for key in sorted(before.keys() | after.keys()):
        patch = diff(
            expected_spec(stash, key, before.get(key)), expected_spec(stash, key, after.get(key))
        )
        if patch:
            out.append(ObjectPatch(key[0], key[1], patch))
    return tuple(out)


def build_plan(spec: BenchmarkExperimentSpec, stash: Stash) -> list[Step]:
    """Baseline (if asked), each variant in order, then the restore to the cluster as found."""
    steps = [Step(BASELINE, FOUND, FOUND, ())] if spec.baseline and spec.operation is None else []
    previous: Variant | None = None
    for variant in spec.changes():
        source = previous.name if previous else FOUND
        steps.append(
            Step(variant.name, source, variant.name, transition(stash, spec, previous, variant))
        )
        previous = variant
    last = previous.name if previous else FOUND
    steps.append(Step(None, last, FOUND, transition(stash, spec, previous, None)))
    return steps


def stash_entries(stash: Stash) -> list[StashEntry]:
    """The stash as status entries (written before the first patch is sent)."""
    return [
        StashEntry(kind=kind, name=name, pointer=text, absent=value is ABSENT,
                   value=None if value is ABSENT else value)
        for (kind, name), fields in sorted(stash.items())
        for text, value in sorted(fields.items())
    ]  # fmt: skip


def stash_from(entries: list[StashEntry]) -> Stash:
    """The stash read back from status."""
    out: Stash = {}
    for e in entries:
        out.setdefault((e.kind, e.name), {})[e.pointer] = ABSENT if e.absent else e.value
    return out
