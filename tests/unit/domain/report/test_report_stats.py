"""The statistics in `tidb-bench report`: trials in the table and on the chart, the schedule's
verdict with the fingerprint diff, and a schedule's trend with its change points."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from tidb_bench_operator.domain.api.results import StepResult
from tidb_bench_operator.domain.api.run_status import BenchmarkRunStatus, StepStatus
from tidb_bench_operator.domain.api.trial import Trial
from tidb_bench_operator.domain.report.chart import render_svg
from tidb_bench_operator.domain.report.markdown import render_markdown
from tidb_bench_operator.domain.report.model import run_report, schedule_report
from tidb_bench_operator.domain.report.trend import render_schedule_markdown, render_schedule_svg
from tidb_bench_operator.domain.stats.inference import compare_runs
from tidb_bench_operator.domain.stats.trend import history_change_points
from tidb_bench_operator.domain.stats.trials import with_trial

SVG = "{http://www.w3.org/2000/svg}"


def result(threads: int, qps: float) -> StepResult:
    return StepResult.model_validate({
        "workload": "oltp_point_select", "threads": threads, "clients": 1, "tps": qps,
        "qps": qps, "read_qps": qps, "write_qps": 0.0, "other_qps": 0.0,
        "latency_ms": {"min": 0.2, "avg": 1.0, "max": 9.0, "percentile": 95, "value": 2.0},
        "errors_per_sec": 0.0, "reconnects_per_sec": 0.0, "events": int(qps * 10),
        "duration_seconds": 10.0, "sysbench_version": "1.0.20",
    })  # fmt: skip


def measured(index: int, threads: int, trials: list[float], cv_bound: float = 10.0) -> StepStatus:
    """A step measured once per trial, as the controller folds trials in (domain.trials)."""
    step = StepStatus(index=index, workload="oltp_point_select", threads=threads)
    for k, qps in enumerate(trials):
        trial = Trial(round=k, result=result(threads, qps), valid=True)
        step = with_trial(step, trial, cv_bound)
    step.phase = "Succeeded"  # type: ignore[assignment]
    return step


def run_status(**extra: Any) -> BenchmarkRunStatus:
    return BenchmarkRunStatus(
        phase="Succeeded",  # type: ignore[arg-type]
        steps=[
            measured(0, 2, [20_000.0, 21_000.0, 20_500.0]),
            measured(1, 4, [30_000.0, 38_000.0, 34_000.0]),
        ],
        **extra,
    )


def test_the_table_has_each_steps_median_interval_and_cv_and_marks_a_noisy_step() -> None:
    status = run_status()
    text = render_markdown(run_report("nightly-1", status))
    assert "| threads | QPS (median) | QPS 95% interval | CV |" in text
    quiet, noisy = status.steps
    assert quiet.qps_trials is not None and noisy.qps_trials is not None
    low, high = quiet.qps_trials.ci_low, quiet.qps_trials.ci_high
    assert low is not None and high is not None and low < 20_500 < high
    assert f"| 2 | 20,500 | {low:,.0f}–{high:,.0f} (n=3) | 2.4% |" in text
    assert "| 4 | 34,000 |" in text and "11.8% noisy |" in text


def test_a_step_measured_once_keeps_the_plain_table() -> None:
    status = BenchmarkRunStatus(steps=[measured(0, 2, [20_000.0])])
    text = render_markdown(run_report("once", status))
    assert "| threads | QPS | TPS |" in text and "95% interval" not in text


def test_the_chart_draws_each_steps_interval_and_trials_inside_the_qps_axis() -> None:
    status = run_status()
    root = ET.fromstring(render_svg(run_report("nightly-1", status)))
    bars = [g for g in root.iter(f"{SVG}g") if g.get("class") == "qps-interval"]
    assert [g.get("data-threads") for g in bars] == ["2", "4"]
    dots = [c for c in root.iter(f"{SVG}circle") if c.get("class") == "trial"]
    assert len(dots) == 6
    # The highest trial (38,000) and the top of the interval are drawn below the axis top.
    assert all(float(c.get("cy", "0")) > 0 for c in dots)
    texts = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    assert "bar: 95% interval of the mean" in texts


def test_the_verdict_section_names_effect_interval_p_values_and_the_fingerprint_diff() -> None:
    baseline = [{("oltp_point_select", 2): [20_000.0, 20_400.0 + k, 19_800.0]} for k in range(3)]
    current = {("oltp_point_select", 2): [15_000.0, 15_200.0, 14_900.0]}
    verdict = compare_runs(current, baseline, min_effect_percent=5.0)
    status = run_status(
        regression=verdict,
        fingerprint_diff=["tidb image pingcap/tidb:v8.1.0 → pingcap/tidb:v8.1.1"],
    )
    text = render_markdown(run_report("nightly-9", status))
    assert "## Against the schedule's baseline" in text
    assert f"**{verdict.verdict}**: {verdict.message}" in text
    (step,) = verdict.steps
    assert step.effect_percent is not None and step.effect_percent < -20
    assert f"| oltp_point_select | 2 | **{step.verdict}** | {step.effect_percent:+.1f}% |" in text
    assert "- tidb image pingcap/tidb:v8.1.0 → pingcap/tidb:v8.1.1" in text
    same = render_markdown(run_report("n", run_status(regression=verdict, fingerprint_diff=[])))
    assert "Nothing recorded differs from the baseline runs' fingerprints." in same


def _schedule(nights: list[float]) -> dict[str, Any]:
    history = []
    for i, qps in enumerate(nights):
        trials = [qps * 0.99, qps, qps * 1.01]
        history.append({
            "name": f"nightly-{i + 1}", "outcome": "Succeeded", "peakQps": qps,
            "finishedAt": f"2026-11-{i + 1:02d}T03:10:00Z",
            "verdict": "NoChange" if i else None,
            "steps": [{"workload": "oltp_point_select", "threads": 2, "qps": qps,
                       "trials": trials}],
        })  # fmt: skip
    runs = [(h["name"], {("oltp_point_select", 2): h["steps"][0]["qps"]}) for h in history]
    points = history_change_points(runs)
    return {
        "status": {
            "history": history,
            "verdict": "Regressed",
            "lastSuccessfulRun": history[-1]["name"],
            "changePoints": [p.model_dump(by_alias=True) for p in points],
        }
    }


def test_a_schedules_trend_marks_the_change_point_at_the_night_the_level_moved() -> None:
    nights = [40_000.0, 40_400.0, 39_700.0, 40_100.0, 39_900.0] + [34_000.0, 34_300.0] * 3
    report = schedule_report("nightly", _schedule(nights))
    assert [p.run for p in report.status.change_points] == ["nightly-6"]
    text = render_schedule_markdown(report)
    assert "Latest verdict: **Regressed** (nightly-11)." in text
    assert "oltp_point_select at 2 threads moved -" in text and "at run nightly-6" in text
    assert "| 6 | nightly-6 | 2026-11-06 03:10 | Succeeded | NoChange | — | 34,000 |" in text
    root = ET.fromstring(render_schedule_svg(report))
    (panel,) = [g for g in root.iter(f"{SVG}g") if g.get("class") == "trend"]
    (change,) = [g for g in panel.iter(f"{SVG}g") if g.get("class") == "change-point"]
    assert change.get("data-run") == "nightly-6"
    markers = [c for c in panel.iter(f"{SVG}circle") if c.get("class") != "trial"]
    # The change is drawn between night 5 and night 6.
    x5, x6 = (float(markers[k].get("cx", "0")) for k in (4, 5))
    line = next(change.iter(f"{SVG}line"))
    assert x5 < float(line.get("x1", "0")) < x6
    assert len([c for c in panel.iter(f"{SVG}circle") if c.get("class") == "trial"]) == 33


def test_a_schedule_without_history_says_so() -> None:
    report = schedule_report("new", {"status": {}})
    assert "no finished runs yet" in render_schedule_markdown(report)
    assert "no successful runs with steps yet" in render_schedule_svg(report)
