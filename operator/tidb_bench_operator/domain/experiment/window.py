"""The operations window's numbers: one load's interval series across a change (#27).

Time axis. sysbench prints an intermediate line `[ Ns ]` when N seconds have elapsed since
its measurement began (docs/sysbench.md; `src/sb_logger.c` log_timestamp): `t` is the END of the
interval, counted from the start of that sysbench process's run. sysbench 1.0.20 has no
`--warmup-time`, so the runner warms up with a separate process and then starts the measured
one (docs/sysbench.md); its `t` counts from that second start. `measured_from` is the step's
`resources.windowStart`, which the controller computes as the clients' earliest start plus
the warm-up (reconcile/run/usage.py `measured_from`): the start of the measured process,
give or take its connect time (well under one interval). So a point at `t` covers
[measured_from + t_prev, measured_from + t], t_prev being the client's previous `t` (0 for
its first line); a merged (thinned) point covers all the lines it merged. The clients of a
step start together (the runner waits for the plan's start time; a client later than the
allowed skew is flagged), so their lines with the same `t` cover the same time, within that
skew.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from tidb_bench_operator.domain.api.experiment import OperationWindow, WindowEvent

#: status.window.events holds at most this many (OperationWindow.events' max_length).
MAX_EVENTS = 64


@dataclass(frozen=True)
class WindowPoint:
    """All clients' interval lines that end at the same time, on the wall clock."""

    start: datetime
    end: datetime
    qps: float
    tps: float
    latency_ms: float | None
    errors_per_sec: float
    reconnects_per_sec: float

    @property
    def seconds(self) -> float:
        """The interval's length."""
        return (self.end - self.start).total_seconds()


def _number(point: Mapping[str, Any], *keys: str) -> float | None:
    """The first numeric value under `keys` (stored series use snake_case; thinned ones may
    carry camelCase rates)."""
    for key in keys:
        value = point.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


def window_points(
    series_by_client: Mapping[str, Sequence[Mapping[str, Any]]], measured_from: datetime
) -> list[WindowPoint]:
    """The clients' interval points on one wall-clock axis, in time order.

    Points of different clients at the same `t` are one point: QPS, TPS, err/s and reconn/s
    summed, latency the worst (the clients' percentiles cannot be merged from one line each).
    A line without a numeric `t` or `qps` is left out.
    """
    merged: dict[float, dict[str, Any]] = {}
    for lines in series_by_client.values():
        previous = 0.0
        for line in sorted(
            (p for p in lines if isinstance(p, Mapping) and _number(p, "t") is not None),
            key=lambda p: _number(p, "t") or 0.0,
        ):
            t = _number(line, "t") or 0.0
            qps = _number(line, "qps")
            if qps is None or t <= previous:
                continue
            at = merged.setdefault(
                t, {"start": previous, "qps": 0.0, "tps": 0.0, "lat": None, "err": 0.0, "rec": 0.0}
            )
            at["start"] = min(at["start"], previous)
            at["qps"] += qps
            at["tps"] += _number(line, "tps") or 0.0
            at["err"] += _number(line, "errors_per_sec", "errorsPerSec") or 0.0
            at["rec"] += _number(line, "reconnects_per_sec", "reconnectsPerSec") or 0.0
            lat = _number(line, "latency_ms", "latencyMs")
            if lat is not None:
                at["lat"] = lat if at["lat"] is None else max(at["lat"], lat)
            previous = t
    return [
        WindowPoint(
            start=measured_from + timedelta(seconds=v["start"]),
            end=measured_from + timedelta(seconds=t),
            qps=v["qps"],
            tps=v["tps"],
            latency_ms=v["lat"],
            errors_per_sec=v["err"],
            reconnects_per_sec=v["rec"],
        )
        for t, v in sorted(merged.items())
    ]


def capped_events(events: Sequence[WindowEvent]) -> tuple[list[WindowEvent], int]:
    """Events in time order, at most MAX_EVENTS: the first ones and the last; (kept, dropped)."""
    ordered = sorted(events, key=lambda e: e.at)
    if len(ordered) <= MAX_EVENTS:
        return ordered, 0
    return [*ordered[: MAX_EVENTS - 1], ordered[-1]], len(ordered) - MAX_EVENTS


def _seconds(later: datetime, earlier: datetime) -> float:
    return round((later - earlier).total_seconds(), 3)


def analyse(
    points: Sequence[WindowPoint],
    applied_at: datetime,
    tolerance_percent: float,
    events: Sequence[WindowEvent],
    *,
    run: str | None = None,
    settled_at: datetime | None = None,
) -> OperationWindow:
    """status.window from the points, the time the change was sent and the events seen.

    level: the median QPS of the points that end at or before `applied_at`. From the change
    on (every point that ends after it, the one it falls into included): the worst point,
    the dip below the level, errors and reconnects (rate x interval length). Recovered: the
    start of the first point after the worst from which every point is within the tolerance;
    only a shortfall counts, since QPS above the level (a backlog served) is no dip.
    """
    ordered = sorted(points, key=lambda p: p.end)
    before = [p for p in ordered if p.end <= applied_at]
    after = [p for p in ordered if p.end > applied_at]
    kept, dropped = capped_events(events)
    window = OperationWindow(run=run, applied_at=applied_at, settled_at=settled_at, events=kept)
    level = statistics.median(p.qps for p in before) if before else None
    window.level_qps = None if level is None else round(level, 2)
    window.errors = round(sum(p.errors_per_sec * p.seconds for p in after))
    window.reconnects = round(sum(p.reconnects_per_sec * p.seconds for p in after))
    parts: list[str] = []
    if level is None:
        parts.append("no measured interval ended before the change, so there is no level")
    else:
        parts.append(f"QPS {level:,.0f} before")
    if not after:
        parts.append("no measured interval after the change")
    else:
        worst_index = min(range(len(after)), key=lambda i: after[i].qps)
        worst = after[worst_index]
        window.worst_qps = round(worst.qps, 2)
        window.worst_at = worst.end
        after_change = f"{_seconds(worst.end, applied_at):g} s after the change"
        if level is None or level <= 0:
            parts.append(f"worst {worst.qps:,.0f} {after_change}")
        else:
            dip = 100 * (level - worst.qps) / level
            window.dip_percent = round(dip, 2)
            parts.append(f"worst {worst.qps:,.0f} ({-dip:+.0f}%) {after_change}")
            floor = level * (1 - tolerance_percent / 100)
            low = [i for i, p in enumerate(after) if p.qps < floor]
            tol = f"{tolerance_percent:g}%"
            if not low:
                window.recovered_at = applied_at
                window.recovery_seconds = 0.0
                parts.append(f"never more than {tol} below it")
            elif low[-1] == len(after) - 1:
                parts.append(f"not back within {tol} by the end")
            else:
                back = after[low[-1] + 1]
                window.recovered_at = back.start
                window.recovery_seconds = max(0.0, _seconds(back.start, applied_at))
                parts.append(f"back within {tol} {window.recovery_seconds:g} s after it")
    parts.append(f"{window.errors} errors, {window.reconnects} reconnects")
    if dropped:
        parts.append(f"{dropped} events not kept (the first {MAX_EVENTS - 1} and the last are)")
    window.message = "; ".join(parts)
    return window
