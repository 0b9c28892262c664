"""`tidb-bench report FILE` for a BenchmarkExperiment: the variants compared, the window drawn."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tidb_bench_operator.cli import main

REPO = Path(__file__).resolve().parents[3]
COMPARE = REPO / "examples" / "experiment" / "what-if-tikv-3-vs-4.yaml"
WINDOW = REPO / "tests" / "data" / "experiment-window.json"


def report(path: Path, svg: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """`tidb-bench report PATH --svg SVG`: (its stdout, the SVG written)."""
    assert main(["report", str(path), "--svg", str(svg)]) == 0
    return capsys.readouterr().out, svg.read_text()


#: What each saved experiment prints (Markdown lines) and draws (SVG fragments).
EXPECTED = {
    "compare": (
        COMPARE,
        [
            "# Experiment what-if",
            "| baseline | Succeeded | what-if-baseline | — | 49,193 | — | — |  |  |",
            # the field story's numbers: 25.7k, 30.9k, 34.7k against 39.6k, 49.2k, 45.0k
            "| 64 | 39,562 | 3.89 | 25,665 | — | -35.1% | — |",
            "| 256 | 44,952 | 10.65 | 34,665 | — | -22.9% | — |",
        ],
        ["-37.1%", "p95 latency, ms"],
    ),
    "window": (
        WINDOW,
        [
            "# Operations window of roll",
            "| level before (median QPS) | 1,987 |",
            "| recovery time | 4.1 s |",
            "| 2 | +1.0 s | Kubernetes | PodRecreated | basic-tidb-0 |",
            "| 6 | +5.0 s | Experiment | Settled | basic |",
        ],
        ['class="tolerance"', "p95 latency", ">recovered<"],
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_saved_experiment_prints_its_tables_and_draws_its_chart(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, lines, fragments = EXPECTED[name]
    out, text = report(path, tmp_path / f"{name}.svg", capsys)
    assert [line for line in lines if line not in out] == []
    assert [f for f in fragments if f not in text] == []


def test_the_comparison_draws_one_curve_per_variant_that_has_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, text = report(COMPARE, tmp_path / "compare.svg", capsys)
    # QPS of both, latency of the baseline only (tikv-4's p95 was not recorded)
    assert text.count('class="variant"') == 3


def test_the_window_draws_each_interval_flat_over_its_length(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, text = report(WINDOW, tmp_path / "window.svg", capsys)
    qps = re.search(r'class="qps" d="([^"]+)"', text)
    assert qps is not None and qps.group(1).count("L") >= 60  # 34 intervals of 2 points each


def test_a_skipped_variant_shows_its_reason_and_no_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = yaml.safe_load(COMPARE.read_text())
    experiment = doc["items"][0]
    reason = "TiKV pod basic-tikv-3 runs on benchmark node node1"
    experiment["status"]["variants"][1].update(
        {"phase": "Skipped", "skippedReason": reason, "settleSeconds": 212.4}
    )
    doc["items"] = [experiment, doc["items"][1]]  # the skipped variant's run was never made
    path = tmp_path / "skipped.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"| tikv-4 | Skipped | what-if-tikv-4 | 212 s | — | — | — |  | {reason} |" in out
    assert "tikv-4 QPS" not in out  # nothing measured to compare


def test_a_window_without_its_results_configmaps_says_there_is_no_series(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc: dict[str, Any] = json.loads(WINDOW.read_text())
    doc["items"] = [i for i in doc["items"] if i["kind"] != "ConfigMap"]
    path = tmp_path / "no-series.json"
    path.write_text(json.dumps(doc))
    out, _ = report(path, tmp_path / "w.svg", capsys)
    assert "no interval series stored for the run's step" in out


def test_an_experiment_saved_alone_lists_its_variants_without_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "alone.yaml"
    path.write_text(yaml.safe_dump(yaml.safe_load(COMPARE.read_text())["items"][0]))
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "| tikv-4 | Succeeded | what-if-tikv-4 | — | — | — | — |  |  |" in out
    assert "QPS and p95 latency by threads" not in out


def test_compare_is_refused_for_an_experiment(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(COMPARE), "--compare", str(COMPARE)]) == 1
    assert "--compare, --results and --html are for runs" in capsys.readouterr().err
