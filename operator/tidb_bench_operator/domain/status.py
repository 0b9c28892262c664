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
    """The JSON merge patch (RFC 7386) that turns the stored status `old` into `status`.

    Only what changed is sent; a key the new status no longer has is sent as null, which
    removes it (e.g. waitingFor once the blocker finished), at every depth: a merge patch
    merges objects, so an object sent whole would keep the keys it no longer has (a pod of
    the last step's `guardLook.pods` in the next step's baseline). Lists are sent whole.
    `old` holds only what the controller wrote: the handlers take out what others keep in
    .status first.
    """
    new = status.model_dump(by_alias=True, exclude_none=True, mode="json")
    patch: dict[str, Any] = merge_diff(old, new)
    return patch


def merge_diff(old: Any, new: Any) -> Any:
    """The merge patch from `old` to `new`: objects key by key (null for a key gone), the
    rest whole."""
    if not (isinstance(old, Mapping) and isinstance(new, Mapping)):
        return new
    patch = {k: merge_diff(old.get(k), v) for k, v in new.items() if old.get(k) != v}
    patch.update({k: None for k in old if k not in new})
    return patch


def steps_json_patch(
    old: Mapping[str, Any], patch: Mapping[str, Any]
) -> list[dict[str, Any]] | None:
    """The merge patch `patch` of a run's status as a JSON patch (RFC 6902) that sends only
    the steps that changed; None when a merge patch says it as well.

    A merge patch replaces a list whole, so every patch that touched one step resent all of
    `status.steps` (bytes growing with the square of the trials). This one replaces step
    `i` alone, after a `test` that the stored list still has that step at `i`; the other
    keys become the same adds and removes the merge patch means (status_patch diffs
    objects key by key). None when the patch has no steps or their number changed.
    """
    new_steps, old_steps = patch.get("steps"), old.get("steps")
    if (
        not isinstance(new_steps, list)
        or not isinstance(old_steps, list)
        or len(new_steps) != len(old_steps)
    ):
        return None
    ops: list[dict[str, Any]] = []
    _merge_ops(ops, "/status", old, {k: v for k, v in patch.items() if k != "steps"})
    for i, (was, now) in enumerate(zip(old_steps, new_steps, strict=True)):
        if was != now:
            index = now.get("index", i) if isinstance(now, dict) else i
            ops.append({"op": "test", "path": f"/status/steps/{i}/index", "value": index})
            ops.append({"op": "replace", "path": f"/status/steps/{i}", "value": now})
    return ops


def _merge_ops(
    ops: list[dict[str, Any]], path: str, old: Mapping[str, Any], patch: Mapping[str, Any]
) -> None:
    """Append the JSON patch operations that apply the merge patch `patch` to `old`."""
    for key, value in patch.items():
        at = f"{path}/{key.replace('~', '~0').replace('/', '~1')}"
        was = old.get(key)
        if value is None:
            if key in old:
                ops.append({"op": "remove", "path": at})
        elif isinstance(value, Mapping) and isinstance(was, Mapping):
            _merge_ops(ops, at, was, value)
        else:
            ops.append({"op": "add", "path": at, "value": value})
