"""`tidb-bench report FILE`: saved runs and results ConfigMaps in, Markdown and SVG out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tidb_bench_operator.cli import load_report_source, main
from tidb_bench_operator.errors import TidbBenchError


def step(index: int, threads: int, qps: float, p95: float) -> dict[str, Any]:
    return {
        "index": index,
        "workload": "oltp_point_select",
        "threads": threads,
        "phase": "Succeeded",
        "clients": 1,
        "qps": qps,
        "tps": qps,
        "readQps": qps,
        "writeQps": 0.0,
        "otherQps": 0.0,
        "latencyMs": {"min": 0.1, "avg": 0.5, "max": 9.0, "percentile": 95, "value": p95},
        "errorsPerSec": 0.0,
        "reconnectsPerSec": 0.0,
        "events": int(qps * 3),
        "durationSeconds": 3.0,
        "sysbenchVersion": "1.0.20",
        "valid": True,
    }


STEPS = [step(0, 2, 61234.5, 0.04), step(1, 4, 88000.0, 0.09)]


def saved_run(name: str = "nightly-1", steps: list[dict[str, Any]] = STEPS) -> dict[str, Any]:
    return {
        "apiVersion": "tidbbench.io/v1alpha1",
        "kind": "BenchmarkRun",
        "metadata": {"name": name, "namespace": "bench"},
        "spec": {"threads": [2, 4]},
        "status": {"phase": "Succeeded", "steps": steps},
    }


def test_a_saved_run_in_yaml_renders_as_a_markdown_table_and_an_svg(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(saved_run()))
    svg = tmp_path / "out.svg"
    assert main(["report", str(path), "--svg", str(svg)]) == 0
    out = capsys.readouterr().out
    assert "# BenchmarkRun nightly-1" in out
    assert "| 2 | 61,234 |" in out and "| 4 | 88,000 |" in out
    text = svg.read_text()
    assert text.startswith("<svg") and 'class="qps"' in text and 'class="latency"' in text


def test_a_saved_run_compared_with_another_shows_the_deltas(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.json").write_text(json.dumps(saved_run("a")))
    slower = [step(0, 2, 30617.25, 0.08), step(1, 4, 44000.0, 0.2)]
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(saved_run("b", slower)))
    assert main(["report", str(tmp_path / "b.yaml"), "--compare", str(tmp_path / "a.json")]) == 0
    out = capsys.readouterr().out
    assert "## Compared with a" in out
    assert "-50.0%" in out


def test_a_results_configmap_is_read_and_its_phase_derived_from_the_steps() -> None:
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "nightly-1-results", "labels": {"tidbbench.io/run": "nightly-1"}},
        "data": {"steps.json": json.dumps(STEPS), "series.json": "{}"},
    }
    name, status = load_report_source(yaml.safe_dump(cm), "cm.yaml")
    assert name == "nightly-1"
    assert status["phase"] == "Succeeded"
    partial = {
        **cm,
        "data": {"steps.json": json.dumps([STEPS[0], {**STEPS[1], "phase": "Running"}])},
    }
    assert load_report_source(json.dumps(partial), "cm.json")[1]["phase"] == "Running"


def test_a_results_configmap_names_its_run_by_owner_even_when_the_label_is_shortened() -> None:
    run = "nightly-" + "x" * 80
    cm = {
        "kind": "ConfigMap",
        "metadata": {
            "name": run[:50] + "-1a2b3c4d",
            "labels": {"tidbbench.io/run": run[:54] + "-1a2b3c4d"},
            "ownerReferences": [{"kind": "BenchmarkRun", "name": run, "uid": "u"}],
        },
        "data": {"steps.json": json.dumps(STEPS)},
    }
    assert load_report_source(yaml.safe_dump(cm), "cm.yaml")[0] == run


def test_a_kubectl_list_of_one_run_is_accepted() -> None:
    doc = {"apiVersion": "v1", "kind": "List", "items": [saved_run()]}
    assert load_report_source(yaml.safe_dump(doc), "list.yaml")[0] == "nightly-1"


@pytest.mark.parametrize(
    ("doc", "words"),
    [
        ({"kind": "List", "items": [saved_run(), saved_run()]}, "exactly one run"),
        (
            {"kind": "ConfigMap", "metadata": {"name": "x"}, "data": {}},
            "no ConfigMap with steps.json",
        ),
        ({"kind": "Secret", "metadata": {"name": "x"}}, "without a BenchmarkRun status"),
        ([1, 2], "expected a BenchmarkRun"),
    ],
)
def test_a_file_that_is_not_a_run_says_what_to_save_instead(doc: Any, words: str) -> None:
    # JSON (a subset of YAML): yaml.safe_dump would write the shared step list as an alias,
    # which kubectl never does and the loader refuses.
    with pytest.raises(TidbBenchError, match=words):
        load_report_source(json.dumps(doc), "x.yaml")


def test_an_unreadable_file_is_an_error_with_exit_code_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("kind: [unclosed")
    assert main(["report", str(path)]) == 1
    assert "not YAML or JSON" in capsys.readouterr().err


def test_a_list_of_a_runs_results_configmaps_is_put_back_together() -> None:
    from tidb_bench_operator.domain.manifests import RunRef, build_results_configmap
    from tidb_bench_operator.domain.results_store import index_parts, series_parts, step_series

    run = RunRef("nightly-1", "bench", "u")
    parts = index_parts("nightly-1-results", STEPS, 200)
    parts += series_parts("nightly-1-results", 0, step_series("oltp_point_select", 2, {}), 200)
    items = [build_results_configmap(run, p.name, p.data) for p in parts]
    assert len(items) > 3, "steps.json cut in parts at this budget"
    doc = {"apiVersion": "v1", "kind": "List", "items": items}
    name, status = load_report_source(yaml.safe_dump(doc), "cms.yaml")
    assert (name, status["phase"], status["steps"]) == ("nightly-1", "Succeeded", STEPS)
    short = {**doc, "items": [i for i in items if not i["metadata"]["name"].endswith("-p1")]}
    with pytest.raises(TidbBenchError, match=r"nightly-1-results-steps-p1 \(part 2 of"):
        load_report_source(yaml.safe_dump(short), "cms.yaml")
