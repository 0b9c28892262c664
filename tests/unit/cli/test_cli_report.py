"""`tidb-bench report FILE`: saved runs and results ConfigMaps in, Markdown and SVG out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tidb_bench_operator.cli import main
from tidb_bench_operator.cli.sources import load_report_source
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
    source = load_report_source(yaml.safe_dump(cm), "cm.yaml")
    assert source.name == "nightly-1"
    assert source.status["phase"] == "Succeeded"
    assert source.spec is None and source.series == {}
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
    from tidb_bench_operator.domain.results_store import (
        index_part,
        series_parts,
        step_parts,
        step_series,
    )

    run = RunRef("nightly-1", "bench", "u")
    parts = [index_part("nightly-1-results", len(STEPS))]
    parts += [p for step in STEPS for p in step_parts("nightly-1-results", step, 200)]
    parts += series_parts("nightly-1-results", 0, step_series("oltp_point_select", 2, {}), 200)
    items = [build_results_configmap(run, p.name, p.data) for p in parts]
    assert len(items) > 3, "a step's document cut in parts at this budget"
    doc = {"apiVersion": "v1", "kind": "List", "items": items}
    source = load_report_source(yaml.safe_dump(doc), "cms.yaml")
    assert (source.name, source.status["phase"], source.status["steps"]) == (
        "nightly-1",
        "Succeeded",
        STEPS,
    )
    assert source.series is not None and set(source.series) == {"0"}
    short = {**doc, "items": [i for i in items if not i["metadata"]["name"].endswith("-p1")]}
    with pytest.raises(TidbBenchError, match=r"nightly-1-results-st0-p1 \(part 2 of"):
        load_report_source(yaml.safe_dump(short), "cms.yaml")


REFERENCE = (
    Path(__file__).resolve().parents[3] / "examples" / "reference" / "published-sysbench.yaml"
)


def test_html_holds_chart_and_tables_and_the_path_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(saved_run()))
    out = tmp_path / "report.html"
    assert main(["report", str(path), "--html", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().err
    page = out.read_text()
    assert "<svg" in page and '<td class="right">61,234</td>' in page


def test_compare_takes_the_example_reference_file_and_prints_its_sources(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    steps = [
        {**step(0, 64, 13020.0, 64.0), "workload": "oltp_read_write", "tps": 651.0},
        {**step(1, 128, 20203.0, 167.0), "workload": "oltp_read_write", "tps": 1010.0},
    ]
    path = tmp_path / "rw.yaml"
    path.write_text(yaml.safe_dump(saved_run("rw", steps)))
    svg = tmp_path / "rw.svg"
    assert main(["report", str(path), "--compare", str(REFERENCE), "--svg", str(svg)]) == 0
    out = capsys.readouterr().out
    assert "## Compared with published numbers" in out
    assert "Source: TiDB Cloud Performance Reference, https://docs.pingcap.com/" in out
    assert "| oltp_read_write | 100 | 30,218 | 1,511 | p95 94.10 |" in out
    assert "reference-band" in svg.read_text()


def test_compare_with_a_run_and_a_reference_together_but_not_two_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(saved_run(name)))
    args = ["report", str(tmp_path / "a.yaml"), "--compare", str(tmp_path / "b.yaml")]
    assert main([*args, "--compare", str(REFERENCE)]) == 0
    assert "## Compared with b" in capsys.readouterr().out
    assert main([*args, "--compare", str(tmp_path / "c.yaml")]) == 1
    assert "compare with one run at a time" in capsys.readouterr().err


def test_a_bad_reference_file_is_an_error_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(saved_run("a")))
    bad = yaml.safe_load(REFERENCE.read_text())
    del bad["references"][0]["source"]
    (tmp_path / "ref.yaml").write_text(yaml.safe_dump(bad))
    assert main(["report", str(tmp_path / "a.yaml"), "--compare", str(tmp_path / "ref.yaml")]) == 1
    err = capsys.readouterr().err
    assert "ref.yaml: not a valid BenchmarkReference: references.0.source: Field required" in err


def test_results_configmap_adds_qps_over_time_to_a_saved_run(tmp_path: Path) -> None:
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(saved_run()))
    series = {
        "0": {"workload": "oltp_point_select", "threads": 2, "clients": {"0": [
            {"t": 1.0, "qps": 60000.0}, {"t": 2.0, "qps": 62000.0}]}},
    }  # fmt: skip
    cm = {"kind": "ConfigMap", "metadata": {"name": "x"},
          "data": {"steps.json": json.dumps(STEPS), "series.json": json.dumps(series)}}  # fmt: skip
    (tmp_path / "cm.yaml").write_text(yaml.safe_dump(cm))
    svg = tmp_path / "out.svg"
    args = ["report", str(tmp_path / "run.yaml"), "--svg", str(svg)]
    assert main([*args, "--results", str(tmp_path / "cm.yaml")]) == 0
    assert svg.read_text().count('class="interval-qps"') == 1
    (tmp_path / "empty.yaml").write_text(yaml.safe_dump({**cm, "data": {"steps.json": "[]"}}))
    assert main([*args, "--results", str(tmp_path / "empty.yaml")]) == 1


def test_a_saved_schedule_reports_its_history_and_trend_and_refuses_run_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = [
        {"name": f"nightly-{i}", "outcome": "Succeeded", "peakQps": qps, "steps": [
            {"workload": "oltp_point_select", "threads": 2, "qps": qps, "trials": [qps]}]}
        for i, qps in enumerate([40_000.0, 41_000.0, 30_000.0], start=1)
    ]  # fmt: skip
    saved = {
        "apiVersion": "tidbbench.io/v1alpha1",
        "kind": "BenchmarkSchedule",
        "metadata": {"name": "nightly"},
        "status": {"history": history, "verdict": "Regressed", "lastSuccessfulRun": "nightly-3"},
    }
    path = tmp_path / "schedule.yaml"
    path.write_text(yaml.safe_dump(saved))
    svg, page = tmp_path / "trend.svg", tmp_path / "trend.html"
    assert main(["report", str(path), "--svg", str(svg), "--html", str(page)]) == 0
    out = capsys.readouterr().out
    assert "# BenchmarkSchedule nightly" in out and "| 3 | nightly-3 |" in out
    assert svg.read_text().count('class="trend"') == 1
    assert "<svg" in page.read_text() and "<table>" in page.read_text()
    assert main(["report", str(path), "--compare", str(path)]) == 1
    assert "--compare and --results are for runs" in capsys.readouterr().err
    assert main(["report", "schedule/Not_A_Name"]) == 1
    assert "not a BenchmarkSchedule name" in capsys.readouterr().err
    del saved["status"]
    path.write_text(yaml.safe_dump(saved))
    assert main(["report", str(path)]) == 1
    assert "a BenchmarkSchedule without a status" in capsys.readouterr().err


def test_a_saved_run_edited_after_it_left_pending_reports_the_spec_it_ran_with() -> None:
    run = saved_run()
    run["spec"] = {"threads": [64]}  # edited after admission: ignored by the controller
    run["status"]["admitted"] = {"generation": 1, "spec": json.dumps({"threads": [2, 4]})}
    assert load_report_source(yaml.safe_dump(run), "run.yaml").spec == {"threads": [2, 4]}
    del run["status"]["admitted"]
    assert load_report_source(yaml.safe_dump(run), "run.yaml").spec == {"threads": [64]}
