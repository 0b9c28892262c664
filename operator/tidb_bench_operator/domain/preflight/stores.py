"""The PD checks: store-state, leader/region size balance and pending operators."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tidb_bench_operator.domain.pd import STATE_TOMBSTONE, STATE_UP, Operator, Store
from tidb_bench_operator.domain.preflight.verdict import (
    LEADER_SIZE_BALANCE,
    PENDING_OPERATORS,
    REGION_SIZE_BALANCE,
    STORE_STATE,
    CheckResult,
    CheckStatus,
)


def _store_label(store: Store) -> str:
    return f"store {store.id} ({store.address})" if store.address else f"store {store.id}"


_STATE_HINTS = {
    # Thresholds from PD's BuildStoreInfo: Disconnected after 20 s without heartbeat, Down
    # after max-store-down-time (default 30m) (docs/pd.md "Stores").
    "Disconnected": "no heartbeat for more than 20 s; check the TiKV pod is running and reachable",
    "Down": "no heartbeat for longer than max-store-down-time (default 30m); PD is replacing "
    "its replicas, so balance is moving",
    "Offline": "being taken out (scale-in or store delete); wait until it becomes Tombstone",
}


def check_store_state(stores: Sequence[Store]) -> CheckResult:
    """Every TiKV store must be Up; Tombstone stores are history and TiFlash is not TiKV."""
    tikv = [s for s in stores if s.is_tikv and s.state_name != STATE_TOMBSTONE]
    tiflash = sorted(s.id for s in stores if s.is_tiflash)
    tombstones = sorted(s.id for s in stores if s.is_tikv and s.state_name == STATE_TOMBSTONE)
    notes = []
    if tiflash:
        notes.append(f"TiFlash store(s) {_ids(tiflash)} not counted")
    if tombstones:
        notes.append(f"Tombstone store(s) {_ids(tombstones)} ignored")
    tail = f" ({'; '.join(notes)})" if notes else ""
    if not tikv:
        return CheckResult(
            name=STORE_STATE,
            status="Fail",
            message=f"PD reports no TiKV store{tail}; is this the right PD address?",
        )
    bad = sorted((s for s in tikv if s.state_name != STATE_UP), key=lambda s: s.id)
    if not bad:
        ups = sorted(s.id for s in tikv)
        return CheckResult(
            name=STORE_STATE,
            status="Pass",
            message=f"all {len(ups)} TiKV stores are Up (ids {_ids(ups)}){tail}",
            stores=ups,
        )
    parts = []
    for store in bad:
        hint = _STATE_HINTS.get(store.state_name, "not Up")
        parts.append(f"{_store_label(store)} is {store.state_name}: {hint}")
    return CheckResult(
        name=STORE_STATE,
        status="Fail",
        message=f"{len(bad)} of {len(tikv)} TiKV stores not Up: {'; '.join(parts)}{tail}",
        stores=[s.id for s in bad],
    )


# ---------------------------------------------------------------------------
# leader-size-balance / region-size-balance


def compute_skew(values: Sequence[float]) -> float:
    """(max − min) / mean; 0 for fewer than two values or an all-zero set."""
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    if mean == 0:
        return 0.0
    return (max(values) - min(values)) / mean


def _up_tikv(stores: Sequence[Store]) -> list[Store]:
    return sorted((s for s in stores if s.is_tikv and s.state_name == STATE_UP), key=lambda s: s.id)


def _size_balance(
    stores: Sequence[Store], max_skew: float, *, name: str, field: str, scheduler: str
) -> CheckResult:
    up = _up_tikv(stores)
    if not up:
        return CheckResult(
            name=name, status="Warn", message=f"no Up TiKV store to compare {field} over"
        )
    unknown = [s.id for s in up if getattr(s, field) is None]
    if unknown:
        # A size PD did not report cannot be judged balanced: never compute a skew over it.
        return CheckResult(
            name=name,
            status="Fail",
            message=f"PD reported no status.{field} for Up TiKV store(s) {_ids(unknown)}, so "
            f"their balance cannot be judged; check that the input is complete PD store "
            "output (pd-ctl store / GET /pd/api/v1/stores) and that the stores heartbeat",
            stores=unknown,
        )
    values: list[int] = [getattr(s, field) for s in up]
    per_store = ", ".join(f"{s.id}={v}" for s, v in zip(up, values, strict=True))
    counts = ", ".join(f"{s.id}={'?' if s.region_count is None else s.region_count}" for s in up)
    # region_count is shown for context only: empty and bloated regions mix, so a skewed
    # count can hide an even size (docs/field-story.md, "Balanced is not region_count").
    context = (
        f"Per store {field} MiB: {per_store}; region_count {counts} "
        "(region_count is for reference only and never fails this check)."
    )
    if len(up) < 2:
        return CheckResult(
            name=name,
            status="Pass",
            message=f"only one Up TiKV store ({up[0].id}); nothing to balance. {context}",
            stores=[up[0].id],
        )
    mean = sum(values) / len(values)
    skew = compute_skew(values)
    size = dict(zip((s.id for s in up), values, strict=True))
    high = max(up, key=lambda s: (size[s.id], -s.id))
    low = min(up, key=lambda s: (size[s.id], s.id))
    high_value, low_value = size[high.id], size[low.id]
    if skew <= max_skew:
        return CheckResult(
            name=name,
            status="Pass",
            message=f"{field} skew {skew:.2f} <= {max_skew:.2f} over {len(up)} Up TiKV stores "
            f"(mean {mean:.1f} MiB). {context}",
        )
    return CheckResult(
        name=name,
        status="Fail",
        message=f"{field} skew {skew:.2f} > {max_skew:.2f} over {len(up)} Up TiKV stores: "
        f"{_store_label(high)} holds {high_value} MiB vs mean {mean:.1f} MiB "
        f"(min {low_value} MiB on store {low.id}); wait for PD {scheduler} or check "
        f"pending operators (pd-ctl operator show). {context}",
        stores=[high.id, low.id],
    )


def check_leader_size_balance(stores: Sequence[Store], max_skew: float) -> CheckResult:
    """(max − min)/mean of leader_size over Up TiKV stores must not exceed max_skew."""
    # leader_size, not leader_count: the benchmark's requests follow leaders, and a few big
    # regions' leaders can pile onto one store (docs/field-story.md: 689 MiB on one store vs ~120).
    return _size_balance(
        stores, max_skew, name=LEADER_SIZE_BALANCE, field="leader_size", scheduler="balance-leader"
    )


def check_region_size_balance(stores: Sequence[Store], max_skew: float) -> CheckResult:
    """(max − min)/mean of region_size over Up TiKV stores must not exceed max_skew."""
    return _size_balance(
        stores, max_skew, name=REGION_SIZE_BALANCE, field="region_size", scheduler="balance-region"
    )


# ---------------------------------------------------------------------------
# pending-operators


def check_pending_operators(
    operators: Sequence[Operator], *, status_if_pending: CheckStatus = "Fail", examples: int = 3
) -> CheckResult:
    """The PD operator queue must be empty (finished/timed-out entries do not count)."""
    pending = [op for op in operators if op.pending]
    done = len(operators) - len(pending)
    tail = f" ({done} finished/timed-out entries ignored)" if done else ""
    if not pending:
        return CheckResult(
            name=PENDING_OPERATORS, status="Pass", message=f"no pending PD operators{tail}"
        )
    by_desc: dict[str, int] = {}
    for op in pending:
        by_desc[op.desc] = by_desc.get(op.desc, 0) + 1
    summary = ", ".join(f"{desc} x{n}" for desc, n in sorted(by_desc.items()))
    shown = []
    for op in pending[:examples]:
        region = f"region {op.region_id}: " if op.region_id is not None else ""
        shown.append(f"{region}{op.desc} {{{op.brief}}}" if op.brief else f"{region}{op.desc}")
    stores = sorted({sid for op in pending for sid in op.store_ids})
    return CheckResult(
        name=PENDING_OPERATORS,
        status=status_if_pending,
        message=f"{len(pending)} PD operator(s) pending ({summary}), e.g. {'; '.join(shown)}; "
        f"balance has not settled: wait until `pd-ctl operator show` prints []{tail}",
        stores=stores,
    )


def _ids(ids: Iterable[int]) -> str:
    return ", ".join(str(i) for i in ids)
