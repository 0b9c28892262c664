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
