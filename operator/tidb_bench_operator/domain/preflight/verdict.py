"""The verdict side of preflight: check names, results, statuses and the gate's decision."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

# Check names are part of the interface (status.preflight.checks[].name, metrics labels):
# fixed, never renamed.
BENCH_NODE_ISOLATION = "bench-node-isolation"
TOPOLOGY_SPREAD = "topology-spread"
STORE_STATE = "store-state"
LEADER_SIZE_BALANCE = "leader-size-balance"
REGION_SIZE_BALANCE = "region-size-balance"
PENDING_OPERATORS = "pending-operators"
TABLE_LEADER_DISTRIBUTION = "table-leader-distribution"
CHECK_NAMES = (
    BENCH_NODE_ISOLATION,
    TOPOLOGY_SPREAD,
    STORE_STATE,
    LEADER_SIZE_BALANCE,
    REGION_SIZE_BALANCE,
    PENDING_OPERATORS,
    TABLE_LEADER_DISTRIBUTION,
)

# Defaults for spec.preflight.maxLeaderSizeSkew / maxRegionSizeSkew (recommendations, not
# contract). PD's own sample cluster sits at leader_size skew 0.40 (17/25/18 MiB, sample
# pd-api-v1-stores_v8.1.0) and is healthy; the field story's bad case was 2.32 (86..689 MiB,
# docs/field-story.md).
DEFAULT_MAX_LEADER_SIZE_SKEW = 0.5
DEFAULT_MAX_REGION_SIZE_SKEW = 0.5

CheckStatus = Literal["Pass", "Warn", "Fail"]
Policy = Literal["Enforce", "Warn", "Off"]
_RANK: dict[str, int] = {"Pass": 0, "Warn": 1, "Fail": 2}


class _Camel(BaseModel):
    """Base: snake_case in Python, camelCase on the wire."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class CheckResult(_Camel):
    """One preflight check's verdict, as stored in status.preflight.checks[]."""

    name: str = Field(description="Check name, one of the fixed preflight check names.")
    status: CheckStatus = Field(description="Pass, Warn or Fail.")
    message: str = Field(description="What was found and, if not Pass, what to do about it.")
    stores: list[int] = Field(
        default_factory=list, description="PD store ids involved in the verdict, if any."
    )


class GateDecision(_Camel):
    """The preflight gate: may the run proceed, and what the checks said overall."""

    policy: Policy = Field(description="spec.preflight.policy that was applied.")
    status: CheckStatus = Field(description="Worst status among the checks (Pass if none).")
    proceed: bool = Field(description="True if the run may start measuring.")
    failed: list[str] = Field(default_factory=list, description="Names of checks that failed.")
    warned: list[str] = Field(default_factory=list, description="Names of checks that warned.")
    message: str = Field(description="One-line summary for conditions and events.")


def worst_status(statuses: Iterable[CheckStatus]) -> CheckStatus:
    """The most severe of the statuses; Pass for none."""
    worst: CheckStatus = "Pass"
    for status in statuses:
        if _RANK[status] > _RANK[worst]:
            worst = status
    return worst


# ---------------------------------------------------------------------------
# The gate


def evaluate(checks: Sequence[CheckResult], policy: Policy) -> GateDecision:
    """Combine check results under spec.preflight.policy: Enforce blocks on Fail, Warn records."""
    failed = [c.name for c in checks if c.status == "Fail"]
    warned = [c.name for c in checks if c.status == "Warn"]
    status = worst_status(c.status for c in checks)
    if policy == "Off":
        return GateDecision(
            policy=policy, status=status, proceed=True, message="preflight is off; not checked"
        )
    proceed = not (policy == "Enforce" and failed)
    if failed:
        action = "run blocked" if not proceed else "recorded, run continues (policy Warn)"
        message = f"preflight failed: {', '.join(failed)}; {action}"
    elif warned:
        message = f"preflight passed with warnings: {', '.join(warned)}"
    else:
        message = f"preflight passed ({len(checks)} checks)"
    return GateDecision(
        policy=policy,
        status=status,
        proceed=proceed,
        failed=failed,
        warned=warned,
        message=message,
    )
