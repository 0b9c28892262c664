"""A run's spec is frozen once it leaves Pending: the spec it was admitted with governs it.

At admission the controller copies the spec as written into `status.admitted` (with its
metadata.generation). From then on the run's queue key, every Job, the results and the
report come from that copy, never from `.spec`: an edit cannot free the cluster's queue slot
or mix one cluster's host with another's guard. Edits are ignored, and a condition and an
Event say so once per new generation (reconcile/run/reconciler.py). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidb_bench_operator.domain.api.run_status import AdmittedSpec

#: The condition (and Event reason) of a run whose .spec was edited after it left Pending.
SPEC_CHANGE_IGNORED = "SpecChangeIgnored"


def admitted_spec(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """status.admitted.spec of a run's body, or None when the run was not admitted (yet).

    The status keeps it as JSON text (api/run_status.AdmittedSpec): the CRD prunes every
    field it does not describe, so a copy of the spec is kept whole as a string.
    """
    status = body.get("status")
    admitted = status.get("admitted") if isinstance(status, Mapping) else None
    text = admitted.get("spec") if isinstance(admitted, Mapping) else None
    if not isinstance(text, str):
        return None
    return AdmittedSpec(spec=text).data()


def governing_spec(body: Mapping[str, Any]) -> Mapping[str, Any]:
    """The spec a run is governed by: the admitted one once it left Pending, else .spec."""
    admitted = admitted_spec(body)
    if admitted is not None:
        return admitted
    spec = body.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def changed_fields(admitted: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """The top-level spec fields whose values differ between the two, sorted."""
    return sorted(k for k in {*admitted, *current} if admitted.get(k) != current.get(k))


def ignored_message(changed: list[str], admitted: int | None, generation: int | None) -> str:
    """What a SpecChangeIgnored condition and Event say."""
    fields = ", ".join(f"spec.{k}" for k in changed)
    return (
        f"spec changed after the run left Pending (generation {generation}: {fields}) and is "
        f"ignored: the run goes on with the spec admitted at generation {admitted} "
        "(status.admitted.spec); to measure the new spec, create a new BenchmarkRun"
    )
