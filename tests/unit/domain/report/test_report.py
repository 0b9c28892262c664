"""`tidb-bench report` rendering: Markdown tables and the SVG chart, on docs/field-story.md's numbers."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from tidb_bench_operator.domain.api.capacity import CapacitySearch
from tidb_bench_operator.domain.api.run_status import BenchmarkRunStatus, StepStatus
from tidb_bench_operator.domain.report.chart import render_svg
from tidb_bench_operator.domain.report.html import markdown_to_html, render_html
from tidb_bench_operator.domain.report.markdown import render_markdown
from tidb_bench_operator.domain.report.model import run_report
from tidb_bench_operator.domain.report.reference import Reference, parse_reference
from tidb_bench_operator.domain.stats.capacity import results
from tidb_bench_operator.errors import TidbBenchError

SVG = "{http://www.w3.org/2000/svg}"


def step(
    index: int,
    workload: str,
    threads: int,
    qps: float,
    p95: float | None,
    tps: float | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A finished step in the CR's camelCase status form."""
    return {
        "index": index,
        "workload": workload,
        "threads": threads,
        "phase": "Succeeded",
        "clients": 1,
        "tps": tps if tps is not None else qps,
        "qps": qps,
        "readQps": qps,
        "writeQps": 0.0,
        "otherQps": 0.0,
        "latencyMs": {"min": 0.3, "avg": 1.5, "max": 40.0, "percentile": 95, "value": p95},
        "errorsPerSec": 0.0,
        "reconnectsPerSec": 0.0,
        "events": int(qps * 15),
        "durationSeconds": 15.0,
        "sysbenchVersion": "1.0.20",
        "valid": True,
        **extra,
    }


# docs/field-story.md: the point-select sweep from the benchmark node (TiKV=3) ...
POINT_SELECT = [
    step(0, "oltp_point_select", 64, 39562.0, 3.89),
    step(1, "oltp_point_select", 128, 49193.0, 4.33),
    step(2, "oltp_point_select", 256, 44952.0, 10.65),
]
# ... the OLTP read-write sweep ...
READ_WRITE = [
    step(3, "oltp_read_write", 32, 13020.0, 64.0, tps=651.0),
    step(4, "oltp_read_write", 64, 17286.0, 94.0, tps=864.0),
    step(5, "oltp_read_write", 128, 20203.0, 167.0, tps=1010.0),
    step(6, "oltp_read_write", 256, 22801.0, 314.0, tps=1140.0),
]
# ... and the same point-select sweep after TiKV-3 landed on the benchmark node.
TIKV4 = [
    step(0, "oltp_point_select", 64, 25665.0, 5.0),
    step(1, "oltp_point_select", 128, 30940.0, 7.5),
    step(2, "oltp_point_select", 256, 34665.0, 12.0),
]


def status(steps: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"phase": "Succeeded", "steps": steps, **extra}


def table_rows(markdown: str, header_start: str) -> list[list[str]]:
    """Cells of the table whose header line starts with `header_start` (without separator)."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


# --------------------------------------------------------------------------- markdown


def test_the_point_select_table_has_one_row_per_step_formatted_like_the_field_notes() -> None:
    md = render_markdown(run_report("nightly-1", status(POINT_SELECT)))
    assert "## oltp_point_select" in md
    assert "| threads | QPS | TPS | p95 (ms) | errors/s | notes |" in md
    rows = table_rows(md, "| threads |")
    assert [row[:5] for row in rows] == [
        ["64", "39,562", "39,562", "3.89", "0.00"],
        ["128", "49,193", "49,193", "4.33", "0.00"],
        ["256", "44,952", "44,952", "10.65", "0.00"],
    ]
    assert "peak" in rows[1][5] and "knee" in rows[1][5]


def test_the_summary_lines_name_peak_and_saturation_computed_from_the_steps() -> None:
    md = render_markdown(run_report("nightly-1", status(POINT_SELECT)))
    assert "- Peak: 49,193 QPS at 128 threads (p95 4.33 ms)." in md
    assert "- Saturation: 128 threads" in md
    # Without the controller's summary the SLO is unknown, and the report says so.
    assert "- Recommended under SLO: not known" in md


def test_the_controllers_summary_gives_the_recommended_step_under_the_slo() -> None:
    summary = {
        "peakQps": 22801.0,
        "peakThreads": 256,
        "perWorkload": [
            {
                "workload": "oltp_read_write",
                "peakQps": 22801.0,
                "peakThreads": 256,
                "peakLatencyMs": 314.0,
                "recommendedThreads": 64,
                "recommendedQps": 17286.0,
                "saturationThreads": None,
            }
        ],
        "headline": "oltp_read_write: peak 22,801 QPS at 256 threads",
    }
    md = render_markdown(run_report("nightly-2", status(READ_WRITE, summary=summary)))
    assert "- Recommended under SLO: 64 threads (17,286 QPS)" in md
    assert "- Saturation: not reached up to 256 threads." in md
    rows = table_rows(md, "| threads |")
    assert rows[0][:3] == ["32", "13,020", "651"]
    assert "recommended" in rows[1][5]
    assert "oltp_read_write: peak 22,801 QPS at 256 threads" in md


def test_a_capacity_search_gets_its_line_under_its_workloads_table() -> None:
    """The read-write curve searched for p95 < 105 ms between 32 and 256 threads."""
    measured = [(256, 22801.0, 314.0), (32, 13020.0, 64.0), (128, 20203.0, 167.0),
                (64, 17286.0, 94.0), (96, 19000.0, 120.0)]  # fmt: skip
    steps = [step(i, "oltp_read_write", *m) for i, m in enumerate(sorted(measured))]
    search = CapacitySearch(min_threads=32, max_threads=256, precision=32)
    models = [StepStatus.model_validate(s) for s in steps]
    capacity = results(search, 105.0, 95, ["oltp_read_write"], models)
    assert [c.model_dump(by_alias=True)["sloThreads"] for c in capacity] == [64]
    summary = {"capacity": [c.model_dump(by_alias=True) for c in capacity], "headline": "h"}
    md = render_markdown(run_report("search", status(steps, summary=summary)))
    assert (
        "- Capacity search (Found): oltp_read_write: capacity under p95 < 105 ms: 64 threads "
        "(96 miss it; to 32 threads in 5 steps); best 17,286 QPS at 64 threads (p95 94 ms); "
        "max 22,801 QPS at 256 threads." in md
    )
    assert [row[0] for row in table_rows(md, "| threads |")] == ["32", "64", "96", "128", "256"]


def test_the_latency_column_is_labelled_with_the_steps_percentile() -> None:
    steps = [step(0, "oltp_point_select", 64, 39562.0, 4.1)]
    steps[0]["latencyMs"]["percentile"] = 99
    md = render_markdown(run_report("r", status(steps)))
    assert "| threads | QPS | TPS | p99 (ms) | errors/s | notes |" in md


def test_an_invalid_step_is_marked_and_left_out_of_the_summary() -> None:
    steps = [
        *POINT_SELECT[:2],
        step(2, "oltp_point_select", 256, 60000.0, 10.65, valid=False, notes=["client CPU 100%"]),
    ]
    md = render_markdown(run_report("r", status(steps)))
    rows = table_rows(md, "| threads |")
    assert rows[2][5].startswith("**invalid**")
    assert "client CPU 100%" in rows[2][5]
    assert "- Peak: 49,193 QPS at 128 threads" in md


def test_unfinished_steps_show_dashes_and_their_phase() -> None:
    pending = {"index": 1, "workload": "oltp_point_select", "threads": 128, "phase": "Running"}
    md = render_markdown(run_report("r", status([POINT_SELECT[0], pending], phase="Running")))
    rows = table_rows(md, "| threads |")
    assert rows[1] == ["128", "—", "—", "—", "—", "Running"]


def test_a_pipe_in_a_note_does_not_break_the_table() -> None:
    steps = [step(0, "oltp_point_select", 64, 39562.0, 3.89, notes=["a | b"])]
    md = render_markdown(run_report("r", status(steps)))
    assert "a \\| b" in md
    row = next(line for line in md.splitlines() if line.startswith("| 64 |"))
    assert row.replace("\\|", "").count("|") == 7


def test_each_workload_gets_its_own_table() -> None:
    md = render_markdown(run_report("r", status(POINT_SELECT + READ_WRITE)))
    assert md.index("## oltp_point_select") < md.index("## oltp_read_write")
    assert md.count("| threads | QPS | TPS | p95 (ms) | errors/s | notes |") == 2


def test_compare_shows_both_runs_side_by_side_with_deltas_in_percent() -> None:
    md = render_markdown(
        run_report("tikv4", status(TIKV4), compare=("tikv3", status(POINT_SELECT)))
    )
    assert "## Compared with tikv3" in md
    rows = table_rows(md, "| workload | threads |")
    assert rows[0] == [
        "oltp_point_select",
        "64",
        "25,665",
        "39,562",
        "-35.1%",
        "5.00",
        "3.89",
        "+28.5%",
    ]
    assert rows[1][4] == "-37.1%"  # 30,940 vs 49,193
    assert rows[2][4] == "-22.9%"  # 34,665 vs 44,952


def test_compare_lists_steps_only_one_run_has_with_dashes() -> None:
    md = render_markdown(
        run_report("a", status(POINT_SELECT[:2]), compare=("b", status(POINT_SELECT)))
    )
    rows = table_rows(md, "| workload | threads |")
    assert rows[2][:5] == ["oltp_point_select", "256", "—", "44,952", "—"]


def test_a_whole_benchmark_run_object_is_accepted_as_well_as_its_status() -> None:
    run = {"kind": "BenchmarkRun", "spec": {}, "status": status(POINT_SELECT)}
    assert render_markdown(run_report("r", run)) == render_markdown(
        run_report("r", status(POINT_SELECT))
    )


def test_a_status_model_renders_the_same_as_its_dict() -> None:
    model = BenchmarkRunStatus.model_validate(status(POINT_SELECT))
    assert render_markdown(run_report("r", model)) == render_markdown(
        run_report("r", status(POINT_SELECT))
    )


# --------------------------------------------------------------------------- context

SPEC = {
    "cluster": {"name": "basic", "namespace": "tidb-cluster"},
    "dataset": {"tables": 16, "tableSize": 1000000},
    "clients": 1,
    "durationSeconds": 15,
    "percentile": 95,
    "slo": {"latencyMs": 100},
}
ENV = {"tidbVersion": "v8.1.0", "sysbenchVersion": "1.0.20"}


def test_the_header_names_cluster_version_date_dataset_clients_and_slo() -> None:
    st = status(POINT_SELECT, startedAt="2026-06-27T01:02:03Z", environment=ENV)
    md = render_markdown(run_report("r", st, spec=SPEC))
    assert (
        "cluster tidb-cluster/basic, TiDB v8.1.0, 2026-06-27 01:02 UTC, sysbench 1.0.20, "
        "phase Succeeded" in md
    )
    assert "dataset 16 tables × 1,000,000 rows, 1 client pod, threads per client, " in md
    assert "15 s per step, SLO p95 ≤ 100 ms" in md
    words = texts(ET.fromstring(render_svg(run_report("t", st, spec=SPEC))))
    assert any("cluster tidb-cluster/basic · TiDB v8.1.0" in w for w in words)
    assert any("dataset 16 tables × 1,000,000 rows" in w for w in words)


def test_without_a_spec_the_header_says_what_is_unknown() -> None:
    md = render_markdown(run_report("r", status(POINT_SELECT)))
    assert "TiDB version not recorded" in md
    assert "no spec in this source: dataset, clients and SLO unknown" in md


def test_with_the_spec_the_slo_gives_a_recommendation_even_without_a_summary() -> None:
    md = render_markdown(run_report("r", status(READ_WRITE), spec=SPEC))
    assert "- Recommended under SLO: 64 threads (17,286 QPS)" in md
    no_slo = {k: v for k, v in SPEC.items() if k != "slo"}
    assert "none (the run sets no spec.slo.latencyMs)" in render_markdown(
        run_report("r", status(READ_WRITE), spec=no_slo)
    )


# --------------------------------------------------------------------------- svg


def paths(root: ET.Element, cls: str) -> list[ET.Element]:
    return [p for p in root.iter(f"{SVG}path") if p.get("class") == cls]


def points(path: ET.Element) -> list[list[tuple[float, float]]]:
    """The runs of (x, y) of a path's d (M starts a run)."""
    runs: list[list[tuple[float, float]]] = []
    for token in (path.get("d") or "").replace(" L", " ").split():
        if token.startswith("M"):
            runs.append([])
            token = token[1:]
        x, y = token.split(",")
        runs[-1].append((float(x), float(y)))
    return runs


def texts(root: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]


def panel(root: ET.Element, workload: str) -> ET.Element:
    return next(
        g
        for g in root.iter(f"{SVG}g")
        if g.get("class") == "panel" and g.get("data-workload") == workload
    )


def test_the_svg_has_a_qps_and_a_latency_curve_with_one_point_per_step() -> None:
    root = ET.fromstring(render_svg(run_report("nightly-1", status(POINT_SELECT))))
    assert root.tag == f"{SVG}svg"
    for cls in ("qps", "latency"):
        (line,) = paths(root, cls)
        assert [len(run) for run in points(line)] == [len(POINT_SELECT)]
    assert paths(root, "tps") == []  # one query per transaction: TPS would repeat QPS


def test_threads_are_on_a_log_axis_said_so_and_doublings_are_equally_spaced() -> None:
    root = ET.fromstring(render_svg(run_report("t", status(POINT_SELECT))))
    (qps,) = paths(root, "qps")
    xs = [x for x, _ in points(qps)[0]]
    assert xs[1] - xs[0] == pytest.approx(xs[2] - xs[1], abs=0.2)
    words = texts(root)
    assert "threads (log scale: each doubling is the same distance)" in words
    assert {"64", "128", "256"} <= set(words)
    uneven = [step(0, "oltp_point_select", t, 1000.0 * t, 1.0) for t in (1, 2, 8)]
    (line,) = paths(ET.fromstring(render_svg(run_report("t", status(uneven)))), "qps")
    xs = [x for x, _ in points(line)[0]]
    assert xs[2] - xs[1] == pytest.approx(2 * (xs[1] - xs[0]), abs=0.3)  # 2->8 is two doublings


def test_the_svg_labels_its_axes_ticks_and_title() -> None:
    root = ET.fromstring(render_svg(run_report("point select <TiKV=3>", status(POINT_SELECT))))
    words = texts(root)
    assert {"QPS", "p95 latency (ms)"} <= set(words)
    assert "BenchmarkRun point select <TiKV=3>" in words  # escaped in the file, intact once parsed
    assert "60,000" in words  # a QPS tick above the 49,193 peak (plus headroom for labels)
    assert "49k" in words  # the peak's value written beside its point


def test_the_qps_curve_peaks_at_128_threads_in_the_drawing() -> None:
    root = ET.fromstring(render_svg(run_report("t", status(POINT_SELECT))))
    ys = [y for _, y in points(paths(root, "qps")[0])[0]]
    assert ys.index(min(ys)) == 1  # SVG y grows downwards: the highest QPS is the smallest y


def test_read_write_gets_a_tps_plot_between_qps_and_latency() -> None:
    root = ET.fromstring(render_svg(run_report("t", status(POINT_SELECT + READ_WRITE))))
    assert paths(panel(root, "oltp_point_select"), "tps") == []
    rw = panel(root, "oltp_read_write")
    (tps,) = paths(rw, "tps")
    (qps,) = paths(rw, "qps")
    (latency,) = paths(rw, "latency")
    top_of = {
        name: min(y for _, y in points(p)[0])
        for name, p in [("q", qps), ("t", tps), ("l", latency)]
    }
    assert top_of["q"] < top_of["t"] < top_of["l"]  # stacked: QPS, then TPS, then latency
    assert "1,140" in texts(rw) or "1,140" in [w.replace("k", "") for w in texts(rw)]


def test_the_slo_is_a_line_on_the_latency_axis_at_its_value() -> None:
    root = ET.fromstring(render_svg(run_report("t", status(READ_WRITE), spec=SPEC)))
    (slo,) = [line for line in root.iter(f"{SVG}line") if line.get("class") == "slo"]
    y_slo = float(slo.get("y1") or 0)
    lat = [y for _, y in points(paths(root, "latency")[0])[0]]
    # 94 ms (64 threads) is drawn just below the 100 ms line, 167 ms (128 threads) above it.
    assert lat[1] > y_slo > lat[2]
    assert "SLO p95 ≤ 100 ms" in texts(root)


def test_an_slo_far_above_every_step_is_said_instead_of_flattening_the_curve() -> None:
    root = ET.fromstring(
        render_svg(run_report("t", status(POINT_SELECT), spec=SPEC))
    )  # 10.65 ms vs 100
    assert not [line for line in root.iter(f"{SVG}line") if line.get("class") == "slo"]
    assert "↑ SLO p95 ≤ 100 ms: far above every step" in texts(root)


def test_peak_recommended_and_knee_are_marked_at_their_threads() -> None:
    root = ET.fromstring(render_svg(run_report("t", status(READ_WRITE), spec=SPEC)))
    marks = {
        g.get("data-threads"): "".join(g.itertext())
        for g in root.iter(f"{SVG}g")
        if g.get("class") == "verdict"
    }
    assert marks == {"64": "recommended", "256": "peak"}
    root = ET.fromstring(render_svg(run_report("t", status(POINT_SELECT))))
    marks = {
        g.get("data-threads"): "".join(g.itertext())
        for g in root.iter(f"{SVG}g")
        if g.get("class") == "verdict"
    }
    assert marks == {"128": "peak · knee"}


FAILED = {
    "index": 1,
    "workload": "oltp_point_select",
    "threads": 128,
    "phase": "Failed",
    "notes": ["sysbench exited 1: FATAL: connection lost"],
}


def test_a_failed_step_is_on_the_axis_and_the_line_is_not_drawn_across_it() -> None:
    steps = [POINT_SELECT[0], FAILED, POINT_SELECT[2]]
    root = ET.fromstring(render_svg(run_report("t", status(steps, phase="Failed"))))
    (qps,) = paths(root, "qps")
    assert [len(run) for run in points(qps)] == [1, 1]  # two points, no segment between
    crosses = [g for g in root.iter(f"{SVG}g") if g.get("class") == "failed-step"]
    assert len(crosses) == 2  # on the QPS and the latency axis
    assert "connection lost" in "".join(crosses[0].itertext())
    assert "failed" in texts(root)
    assert "128" in texts(root)  # its tick stays


def test_invalid_steps_are_hollow_with_dotted_segments_and_named_on_the_axis() -> None:
    steps = [*POINT_SELECT[:2], step(2, "oltp_point_select", 256, 44952.0, 10.65, valid=False)]
    root = ET.fromstring(render_svg(run_report("t", status(steps))))
    hollow = [c for c in root.iter(f"{SVG}circle") if c.get("fill") == "#ffffff"]
    assert len(hollow) == 1
    assert "invalid" in "".join(hollow[0].itertext())
    (solid,) = paths(root, "qps")
    assert [len(run) for run in points(solid)] == [2, 1]
    (dotted,) = paths(root, "qps invalid-segment")
    assert [len(run) for run in points(dotted)] == [2]
    assert "invalid" in texts(root)
    assert any(w.startswith("hollow marker, dotted line: invalid step") for w in texts(root))


def test_compare_overlays_the_other_runs_curves_dashed() -> None:
    root = ET.fromstring(
        render_svg(run_report("t", status(TIKV4), compare=("tikv3", status(POINT_SELECT))))
    )
    (other,) = paths(root, "compare-qps")
    assert other.get("stroke-dasharray") == "5 3"
    assert [len(run) for run in points(other)] == [3]
    (mine,) = paths(root, "qps")
    # Same threads, so the same x; TiKV=3 is higher everywhere (smaller y).
    for (x1, y1), (x2, y2) in zip(points(mine)[0], points(other)[0], strict=True):
        assert x1 == x2 and y2 < y1
    assert "tikv3 (compared)" in texts(root)


def test_several_workloads_stack_as_panels() -> None:
    root = ET.fromstring(render_svg(run_report("t", status(POINT_SELECT + READ_WRITE))))
    panels = [g for g in root.iter(f"{SVG}g") if g.get("class") == "panel"]
    assert [p.get("data-workload") for p in panels] == ["oltp_point_select", "oltp_read_write"]
    assert int(root.get("height") or 0) > 2 * 400


def test_the_svg_is_deterministic() -> None:
    assert render_svg(run_report("t", status(POINT_SELECT))) == render_svg(
        run_report("t", status(POINT_SELECT))
    )


def test_a_run_without_finished_steps_still_renders_a_valid_svg() -> None:
    root = ET.fromstring(render_svg(run_report("nothing yet", status([], phase="Pending"))))
    assert "no finished steps" in texts(root)
    assert list(root.iter(f"{SVG}path")) == []


# --------------------------------------------------------------------------- QPS over time


def interval(t: float, qps: float) -> dict[str, Any]:
    return {"t": t, "threads": 2, "tps": qps, "qps": qps, "percentile": 95, "latencyMs": 1.0}


def test_qps_over_time_is_one_small_chart_per_step_with_the_clients_summed() -> None:
    series = {
        "0": {
            "workload": "oltp_point_select",
            "threads": 64,
            "clients": {
                "0": [interval(1, 100.0), interval(2, 300.0)],
                "1": [interval(1, 50.0), interval(2, 50.0)],
            },
        },
        "1": {
            "workload": "oltp_point_select",
            "threads": 128,
            "clients": {"0": [interval(1, 200.0), interval(2, 0.0), interval(3, 200.0)]},
        },
    }
    root = ET.fromstring(render_svg(run_report("t", status(POINT_SELECT), series=series)))
    lines = [p for p in root.iter(f"{SVG}polyline") if p.get("class") == "interval-qps"]
    assert len(lines) == 2  # the third step has no interval lines: no chart
    first = [tuple(map(float, p.split(","))) for p in (lines[0].get("points") or "").split()]
    second = [tuple(map(float, p.split(","))) for p in (lines[1].get("points") or "").split()]
    # Shared QPS scale: 350 (100 + 250... clients summed: 150 then 350) is the highest point.
    assert min(y for _, y in first) < min(y for _, y in second)
    assert second[2][1] > second[1][1]  # the stall at t=2 (0 QPS) is a dip
    assert any(w.startswith("64 threads: 39,562 QPS") for w in texts(root))


# --------------------------------------------------------------------------- references

REFERENCE_DOC = {
    "apiVersion": "tidbbench.io/v1alpha1",
    "kind": "BenchmarkReference",
    "references": [
        {
            "name": "Cloud 8 vCPU",
            "source": "Vendor performance reference, https://example.com/perf",
            "conditions": "v6.1.1; p95 < 105 ms",
            "results": [
                {
                    "workload": "oltp_read_write",
                    "threads": 100,
                    "qps": 30218.42,
                    "tps": 1510.92,
                    "latencyMs": 94.1,
                },
                {"workload": "oltp_write_only", "threads": 350, "qps": 30763.72},
            ],
        },
        {
            "name": "Aurora 2xlarge",
            "source": "an estimate",
            "results": [
                {"workload": "oltp_point_select", "qps": [40000, 60000]},
                {"workload": "oltp_read_write", "tps": [1000, 1500]},
            ],
        },
    ],
}


def references() -> list[Reference]:
    return parse_reference(REFERENCE_DOC, "ref.yaml").references


def test_published_numbers_are_tabled_with_their_source_and_conditions() -> None:
    md = render_markdown(
        run_report("r", status(POINT_SELECT + READ_WRITE), references=references())
    )
    assert "## Compared with published numbers" in md
    assert "### R1: Cloud 8 vCPU" in md
    assert "Source: Vendor performance reference, https://example.com/perf" in md
    assert "Conditions: v6.1.1; p95 < 105 ms" in md
    rows = table_rows(md, "| workload | threads | published QPS")
    # R1 read-write at 100 threads: this run has no 100-thread step, so its peak is compared.
    assert rows[0][:5] == ["oltp_read_write", "100", "30,218", "1,511", "p95 94.10"]
    assert rows[0][5] == "peak 22,801 QPS, 1,140 TPS at 256 threads"
    assert rows[0][6] == "-24.5%"
    assert "(1 published row(s) for workloads this run did not measure.)" in md
    md_rows = md.split("### R2: Aurora 2xlarge")[1]
    assert "| oltp_point_select | — | 40,000–60,000 | — | — | peak 49,193 QPS" in md_rows
    assert "| within the range |" in md_rows
    assert "| within the range (TPS) |" in md_rows  # 1,140 TPS in 1,000–1,500
    below = render_markdown(run_report("r", status(TIKV4), references=references()))
    assert "| -13.3% below the range |" in below  # 34,665 QPS against 40,000


def test_published_numbers_are_drawn_as_diamonds_and_bands() -> None:
    root = ET.fromstring(
        render_svg(run_report("t", status(POINT_SELECT + READ_WRITE), references=references()))
    )
    rw = panel(root, "oltp_read_write")
    diamonds = [p for p in rw.iter(f"{SVG}polygon") if "R1" in "".join(p.itertext())]
    assert len(diamonds) == 3  # QPS, TPS and latency at 100 threads
    bands = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "reference-band"]
    assert len(bands) == 2  # point-select QPS range, read-write TPS range
    assert "R2 40k–60k QPS" in texts(panel(root, "oltp_point_select"))
    words = texts(root)
    assert any("Source: Vendor performance reference" in w for w in words) or any(
        "https://example.com/perf" in w for w in words
    )


@pytest.mark.parametrize(
    ("mutate", "words"),
    [
        (lambda d: d.pop("kind"), "kind"),
        (lambda d: d["references"][0].pop("source"), "references.0.source"),
        (
            lambda d: d["references"][1]["results"][0].update(qps=[60000, 40000]),
            "low > high",
        ),
        (lambda d: d["references"][0]["results"][1].pop("qps"), "neither qps nor tps"),
        (
            lambda d: d["references"][0]["results"][0].update(workload="tpcc"),
            "references.0.results.0.workload",
        ),
    ],
)
def test_a_bad_reference_file_names_the_field(mutate: Any, words: str) -> None:
    import copy

    doc = copy.deepcopy(REFERENCE_DOC)
    mutate(doc)
    with pytest.raises(TidbBenchError, match=words) as err:
        parse_reference(doc, "ref.yaml")
    assert str(err.value).startswith("ref.yaml: ")


# --------------------------------------------------------------------------- html


def test_the_html_is_one_self_contained_file_with_the_chart_and_the_tables() -> None:
    page = render_html(
        run_report(
            "nightly <1>",
            status(POINT_SELECT, environment=ENV),
            compare=("tikv4", status(TIKV4)),
            spec=SPEC,
            references=references(),
        )
    )
    assert page.startswith("<!DOCTYPE html>")
    assert page.count("<svg") == 1 and "<table>" in page
    assert "<title>BenchmarkRun nightly &lt;1&gt;</title>" in page
    # Nothing fetched from elsewhere: no scripts, stylesheets or images by reference.
    assert not re.search(r"<(script|link|img)\b", page)
    assert not re.search(r"\bsrc=", page)
    assert '<td class="right">49,193</td>' in page
    assert "<h2>Compared with tikv4</h2>" in page


def test_markdown_to_html_keeps_escaped_pipes_and_bold() -> None:
    out = markdown_to_html("| a | b |\n| --: | :-- |\n| x \\| y | **z** |\n\n- one")
    assert '<td class="right">x | y</td>' in out
    assert "<strong>z</strong>" in out
    assert "<li>one</li>" in out


def test_a_saturation_point_at_the_last_step_is_the_peak_fallback_not_a_knee() -> None:
    per = {"workload": "oltp_read_write", "peakQps": 22801.0, "peakThreads": 256,
           "saturationThreads": 256, "recommendedThreads": 64, "recommendedQps": 17286.0}  # fmt: skip
    md = render_markdown(run_report("r", status(READ_WRITE, summary={"perWorkload": [per]})))
    assert "- Saturation: not reached up to 256 threads." in md
    knee = {**per, "saturationThreads": 128}
    md = render_markdown(run_report("r", status(READ_WRITE, summary={"perWorkload": [knee]})))
    assert "- Saturation: 128 threads" in md


# A rate sweep at 2 threads on the bed: 1,000/s and 4,000/s reached, 40,000/s not.
def _rate(target: int, achieved: float, reached: bool) -> dict[str, Any]:
    short = round(max(0.0, (target - achieved) / target * 100), 2)
    return {"target": target, "achieved": achieved, "shortfallPercent": short,
            "tolerancePercent": 5.0, "reached": reached}  # fmt: skip


RATES = [
    step(0, "oltp_point_select", 2, 1001.0, 1.9, targetRate=1000, rate=_rate(1000, 1001.0, True)),
    step(1, "oltp_point_select", 2, 3979.0, 2.8, targetRate=4000, rate=_rate(4000, 3979.0, True)),
    step(2, "oltp_point_select", 2, 14822.0, 2279.1, targetRate=40000,
         rate=_rate(40000, 14822.0, False)),
]  # fmt: skip
RATE_SUMMARY = {
    "perWorkload": [
        {
            "workload": "oltp_point_select",
            "peakQps": 14822.0,
            "peakThreads": 2,
            "peakLatencyMs": 2279.1,
            "recommendedThreads": 2,
            "recommendedQps": 3979.0,
            "recommendedRate": 4000,
            "highestReachedRate": 4000,
        }
    ]
}


def test_a_rate_sweep_table_has_the_target_and_whether_it_was_reached() -> None:
    md = render_markdown(run_report("r", status(RATES, summary=RATE_SUMMARY)))
    rows = table_rows(md, "| target/s | reached | threads |")
    assert [r[:4] for r in rows] == [
        ["1,000", "yes", "2", "1,001"],
        ["4,000", "yes", "2", "3,979"],
        ["40,000", "**no** (−62.94%)", "2", "14,822"],
    ]
    assert "recommended" in rows[1][-1] and "peak" in rows[2][-1]
    assert "recommended" not in rows[2][-1] and "peak" not in rows[0][-1]
    assert "- Peak: 14,822 QPS at a 40,000/s target (p95 2,279.10 ms)." in md
    assert "- Recommended under SLO: 4,000/s (3,979 QPS)" in md
    assert "- Rates reached: up to 4,000/s; not reached: 40,000/s (14,822/s)." in md


def test_a_rate_sweep_is_drawn_against_its_target_rates() -> None:
    root = ET.fromstring(render_svg(run_report("r", status(RATES, summary=RATE_SUMMARY))))
    words = texts(root)
    assert "target rate, events/s (sysbench --rate; log scale)" in words
    assert {"1000", "4000", "40000"} <= set(words)
    (qps,) = paths(root, "qps")
    xs = [x for x, _ in points(qps)[0]]
    assert xs[0] < xs[1] < xs[2]  # three places, not one column at 2 threads
