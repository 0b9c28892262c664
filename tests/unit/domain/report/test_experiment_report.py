"""The experiment's report from its object alone: what it says when parts are missing."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

from tidb_bench_operator.domain.report import experiment as compare
from tidb_bench_operator.domain.report import window

REPO = Path(__file__).resolve().parents[4]
WINDOW = json.loads((REPO / "tests" / "data" / "experiment-window.json").read_text())
COMPARE = yaml.safe_load(
    (REPO / "examples" / "experiment" / "what-if-tikv-3-vs-4.yaml").read_text()
)


def test_a_window_without_its_run_keeps_the_numbers_and_draws_the_events_alone() -> None:
    report = window.window_report(WINDOW["items"][0], None, None)
    assert report.points == [] and report.window.level_qps == 1987.09
    markdown = window.render_window_markdown(report)
    assert "Note: the run roll-restart-tidb was not given: no time series." in markdown
    chart = window.render_window_svg(report)
    assert 'class="qps" d=""' in chart and chart.count('stroke-dasharray="2 3"') == 12  # 6 events


def test_an_experiment_not_started_has_no_variants_to_draw() -> None:
    pending = {"metadata": {"name": "what-if"}, "spec": COMPARE["items"][0]["spec"]}
    report = compare.experiment_report(pending, [])
    assert report.variants == [] and report.phase == "Pending"
    assert "no variant measured yet" in compare.render_experiment_svg(report)
    assert "| variant | status |" in compare.render_experiment_markdown(report)


def test_the_restore_and_what_it_left_alone_are_said() -> None:
    experiment = dict(COMPARE["items"][0])
    experiment["status"] = {
        **experiment["status"],
        "restored": {
            "at": "2026-12-03T10:00:00Z",
            "settled": True,
            "leftAlone": ["/tikv/replicas"],
        },
    }
    markdown = compare.render_experiment_markdown(
        compare.experiment_report(experiment, COMPARE["items"][1:])
    )
    assert (
        "restored 2026-12-03 10:00:00Z, settled; left alone (changed by someone else): "
        "/tikv/replicas" in markdown
    )


def _with_resources(run: dict[str, Any], cpu_ms: float, neck: str) -> dict[str, Any]:
    run = copy.deepcopy(run)
    steps = run["status"]["steps"]
    top = max((s for s in steps if s.get("qps") is not None), key=lambda s: s["qps"])
    top["resources"] = {
        "source": "Prometheus", "qpsPerCore": round(1000 / cpu_ms), "cpuMsPerQuery": cpu_ms,
        "bottleneck": {"kind": "component", "subject": "tikv-0", "message": neck},
    }  # fmt: skip
    return run


def test_the_variants_table_has_each_peaks_efficiency_and_cpu_per_query_against_the_baseline() -> (
    None
):
    base, tikv4 = COMPARE["items"][1:3]
    runs = [_with_resources(base, 2.0, "tikv `tikv-0` at 97% | hot"),
            _with_resources(tikv4, 2.5, "none (highest 60%: tikv)")]  # fmt: skip
    markdown = compare.render_experiment_markdown(
        compare.experiment_report(COMPARE["items"][0], runs)
    )
    rows = [line for line in markdown.splitlines() if line.startswith("| baseline |")]
    assert len(rows) == 1 and "| 500 | 2.00 | tikv `tikv-0` at 97% \\| hot |" in rows[0], rows
    rows = [line for line in markdown.splitlines() if line.startswith("| tikv-4 |")]
    assert "| 400 | 2.50 (+25.0%) | none (highest 60%: tikv) |" in rows[0], rows


def test_a_variant_without_server_metrics_shows_dashes_not_a_change() -> None:
    markdown = compare.render_experiment_markdown(
        compare.experiment_report(COMPARE["items"][0], COMPARE["items"][1:])
    )
    row = next(line for line in markdown.splitlines() if line.startswith("| tikv-4 |"))
    assert "| — | — |  |" in row, row


def test_a_point_selects_hundredths_of_a_millisecond_keep_three_digits() -> None:
    base, tikv4 = COMPARE["items"][1:3]
    runs = [_with_resources(base, 0.0201, "none"), _with_resources(tikv4, 0.0185, "none")]
    markdown = compare.render_experiment_markdown(
        compare.experiment_report(COMPARE["items"][0], runs)
    )
    assert "| 0.0201 | none |" in markdown and "| 0.0185 (-8.0%) | none |" in markdown, markdown
