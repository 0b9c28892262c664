"""Pure helpers shared by the run and schedule reconcilers: conditions, times, status patches."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel

from tidb_bench_operator.domain.api.run_status import Condition

ConditionStatus = Literal["True", "False", "Unknown"]
#: Conditions' messages are cut here: enough for any message we write, bounded for etcd.
MAX_CONDITION_MESSAGE = 2048


def utc_now() -> datetime:
    """Now, in UTC, to the second (what status timestamps hold)."""
    return datetime.now(UTC).replace(microsecond=0)


def parse_time(text: object) -> datetime | None:
    """An RFC 3339 timestamp as Kubernetes writes it (`...Z`), or None for none/empty."""
    if not isinstance(text, str) or not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def set_condition(
    conditions: list[Condition],
    type_: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    now: datetime,
) -> bool:
    """Upsert a condition; lastTransitionTime moves only when its status changes.

    Returns True when the status or the reason changed (callers post an Event only then).
    """
    for i, c in enumerate(conditions):
        if c.type == type_:
            changed = c.status != status
            conditions[i] = Condition(
                type=type_,
                status=status,
                reason=reason,
                message=message[:MAX_CONDITION_MESSAGE],
                last_transition_time=now if changed else c.last_transition_time,
            )
            return changed or c.reason != reason
    conditions.append(
        Condition(
            type=type_,
            status=status,
            reason=reason,
            message=message[:MAX_CONDITION_MESSAGE],
            last_transition_time=now,
        )
    )
    return True


def condition_reason(conditions: Sequence[Condition], type_: str) -> str | None:
    """The reason of the condition of `type_`, or None when there is none."""
    return next((c.reason for c in conditions if c.type == type_), None)


def status_patch(old: Mapping[str, Any], status: BaseModel) -> dict[str, Any]:
    """The JSON merge patch that turns the stored status `old` into `status`.

    Only what changed is sent; a key the new status no longer has is sent as null, which
    removes it (e.g. waitingFor once the blocker finished). `old` holds only what the
    controller wrote: the handlers take out what others keep in .status first.
    """
    new = status.model_dump(by_alias=True, exclude_none=True, mode="json")
    patch: dict[str, Any] = {k: v for k, v in new.items() if old.get(k) != v}
    for k in old:
        if k not in new:
            patch[k] = None
    return patch


def steps_json_patch(
    old: Mapping[str, Any], patch: Mapping[str, Any]
) -> list[dict[str, Any]] | None:
    """The merge patch `patch` of a run's status as a JSON patch (RFC 6902) that sends only
    the steps that changed; None when a merge patch says it as well.

    A merge patch replaces a list whole, so every patch that touched one step resent all of
    `status.steps` (bytes growing with the square of the trials). This one replaces step
    `i` alone, after a `test` that the stored list still has that step at `i`; the other
    keys are set whole, as the merge patch sets them (status_patch sends whole values).
    None when the patch has no steps, when their number changed, or when it removes a key.
    """
    new_steps, old_steps = patch.get("steps"), old.get("steps")
    if (
        not isinstance(new_steps, list)
        or not isinstance(old_steps, list)
        or len(new_steps) != len(old_steps)
        or any(value is None for value in patch.values())
    ):
        return None
    ops: list[dict[str, Any]] = [
        {"op": "add", "path": f"/status/{key}", "value": value}
        for key, value in patch.items()
        if key != "steps"
    ]
    for i, (was, now) in enumerate(zip(old_steps, new_steps, strict=True)):
        if was != now:
            index = now.get("index", i) if isinstance(now, dict) else i
            ops.append({"op": "test", "path": f"/status/steps/{i}/index", "value": index})
            ops.append({"op": "replace", "path": f"/status/steps/{i}", "value": now})
    return ops
