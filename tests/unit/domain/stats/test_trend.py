"""A schedule's trend: change points per step over named runs, and the verdict's condition."""

from __future__ import annotations

import numpy as np

from tidb_bench_operator.domain.stats.inference import compare_runs
from tidb_bench_operator.domain.stats.trend import (
    describe_change_point,
    history_change_points,
    regression_condition,
)

PS = "oltp_point_select"


def _history(
    nights: int, drop_at: int | None, seed: int = 1, noise: float = 0.05
) -> list[tuple[str, dict]]:
    rng = np.random.default_rng(seed)
    runs = []
    for night in range(nights):
        level = 0.9 if drop_at is not None and night >= drop_at else 1.0
        steps = {
            (PS, 1): 40_000 * level * (1 + rng.uniform(-noise, noise)),
            (PS, 2): 70_000 * (1 + rng.uniform(-noise, noise)),  # this step never moved
        }
        runs.append((f"nightly-{night:02d}", steps))
    return runs


def test_a_drop_on_one_step_is_named_by_its_first_run() -> None:
    (point,) = history_change_points(_history(20, drop_at=12))
    assert (point.workload, point.threads, point.run, point.previous_run) == (
        PS,
        1,
        "nightly-12",
        "nightly-11",
    )
    assert -14 < point.change_percent < -6
    text = describe_change_point(point)
    assert text.startswith(f"{PS} at 1 threads moved -") and "at run nightly-12" in text


def test_a_step_missing_from_some_runs_is_searched_over_the_runs_that_have_it() -> None:
    runs = _history(20, drop_at=12, noise=0.01)
    runs = [
        (n, {k: v for k, v in s.items() if not (k[1] == 1 and i % 5 == 0)})
        for i, (n, s) in enumerate(runs)
    ]
    points = history_change_points(runs)
    assert [p.run for p in points] == ["nightly-12"]


def test_a_short_history_is_not_searched() -> None:
    assert history_change_points(_history(5, drop_at=3)) == []


def test_the_condition_follows_the_verdict() -> None:
    base = [{(PS, 1): [100.0, 101.0, 99.0]} for _ in range(3)]
    assert regression_condition(compare_runs({(PS, 1): [70.0, 71.0, 69.0]}, base, 10))[:2] == (
        "True",
        "QpsDrop",
    )
    assert regression_condition(compare_runs({(PS, 1): [99.5, 100.5, 100.0]}, base, 10))[:2] == (
        "False",
        "NoChange",
    )
    assert regression_condition(compare_runs({(PS, 1): [140.0, 141.0, 139.0]}, base, 10))[:2] == (
        "False",
        "Improved",
    )
    assert (
        regression_condition(compare_runs({(PS, 1): [70.0]}, [], 10))[1] == "InsufficientBaseline"
    )
    assert regression_condition(compare_runs({(PS, 1): [70.0]}, base[:1], 10))[1] == "Inconclusive"
