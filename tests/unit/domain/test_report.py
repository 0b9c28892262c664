"""`tidb-bench report` rendering: Markdown tables and the SVG chart, on docs/field-story.md's numbers."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from tidb_bench_operator.domain.models import BenchmarkRunStatus
from tidb_bench_operator.domain.report import render_markdown, render_svg

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
    md = render_markdown("nightly-1", status(POINT_SELECT))
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
    md = render_markdown("nightly-1", status(POINT_SELECT))
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
    md = render_markdown("nightly-2", status(READ_WRITE, summary=summary))
    assert "- Recommended under SLO: 64 threads (17,286 QPS)" in md
    assert "- Saturation: not reached up to 256 threads." in md
    rows = table_rows(md, "| threads |")
    assert rows[0][:3] == ["32", "13,020", "651"]
    assert "recommended" in rows[1][5]
    assert "oltp_read_write: peak 22,801 QPS at 256 threads" in md


def test_the_latency_column_is_labelled_with_the_steps_percentile() -> None:
    steps = [step(0, "oltp_point_select", 64, 39562.0, 4.1)]
    steps[0]["latencyMs"]["percentile"] = 99
    md = render_markdown("r", status(steps))
    assert "| threads | QPS | TPS | p99 (ms) | errors/s | notes |" in md


def test_an_invalid_step_is_marked_and_left_out_of_the_summary() -> None:
    steps = [
        *POINT_SELECT[:2],
        step(2, "oltp_point_select", 256, 60000.0, 10.65, valid=False, notes=["client CPU 100%"]),
    ]
    md = render_markdown("r", status(steps))
    rows = table_rows(md, "| threads |")
    assert rows[2][5].startswith("**invalid**")
    assert "client CPU 100%" in rows[2][5]
    assert "- Peak: 49,193 QPS at 128 threads" in md


def test_unfinished_steps_show_dashes_and_their_phase() -> None:
    pending = {"index": 1, "workload": "oltp_point_select", "threads": 128, "phase": "Running"}
    md = render_markdown("r", status([POINT_SELECT[0], pending], phase="Running"))
    rows = table_rows(md, "| threads |")
    assert rows[1] == ["128", "—", "—", "—", "—", "Running"]


def test_a_pipe_in_a_note_does_not_break_the_table() -> None:
    steps = [step(0, "oltp_point_select", 64, 39562.0, 3.89, notes=["a | b"])]
    md = render_markdown("r", status(steps))
    assert "a \\| b" in md
    row = next(line for line in md.splitlines() if line.startswith("| 64 |"))
    assert row.replace("\\|", "").count("|") == 7


def test_each_workload_gets_its_own_table() -> None:
    md = render_markdown("r", status(POINT_SELECT + READ_WRITE))
    assert md.index("## oltp_point_select") < md.index("## oltp_read_write")
    assert md.count("| threads | QPS | TPS | p95 (ms) | errors/s | notes |") == 2


def test_compare_shows_both_runs_side_by_side_with_deltas_in_percent() -> None:
    md = render_markdown("tikv4", status(TIKV4), compare=("tikv3", status(POINT_SELECT)))
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
    md = render_markdown("a", status(POINT_SELECT[:2]), compare=("b", status(POINT_SELECT)))
    rows = table_rows(md, "| workload | threads |")
    assert rows[2][:5] == ["oltp_point_select", "256", "—", "44,952", "—"]


def test_a_whole_benchmark_run_object_is_accepted_as_well_as_its_status() -> None:
    run = {"kind": "BenchmarkRun", "spec": {}, "status": status(POINT_SELECT)}
    assert render_markdown("r", run) == render_markdown("r", status(POINT_SELECT))


def test_a_status_model_renders_the_same_as_its_dict() -> None:
    model = BenchmarkRunStatus.model_validate(status(POINT_SELECT))
    assert render_markdown("r", model) == render_markdown("r", status(POINT_SELECT))


# --------------------------------------------------------------------------- svg


def polylines(root: ET.Element) -> list[ET.Element]:
    return list(root.iter(f"{SVG}polyline"))


def texts(root: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]


def test_the_svg_parses_as_xml_with_a_qps_and_a_latency_curve_of_one_point_per_step() -> None:
    root = ET.fromstring(render_svg(status(POINT_SELECT), "nightly-1"))
    assert root.tag == f"{SVG}svg"
    lines = polylines(root)
    assert [line.get("class") for line in lines] == ["qps", "latency"]
    for line in lines:
        assert len((line.get("points") or "").split()) == len(POINT_SELECT)


def test_the_svg_labels_its_axes_legend_ticks_and_title() -> None:
    root = ET.fromstring(render_svg(status(POINT_SELECT), "point select <TiKV=3>"))
    words = texts(root)
    assert {"threads", "QPS", "p95 latency (ms)"} <= set(words)
    assert words.count("QPS") == 2  # axis title and legend
    assert "point select <TiKV=3>" in words  # escaped in the file, intact once parsed
    assert {"64", "128", "256"} <= set(words)  # x ticks
    assert "50,000" in words  # a QPS tick above the 49,193 peak
    assert {"2.5", "7.5", "12.5"} <= set(words)  # latency ticks up past the 10.65 ms worst step


def test_the_qps_curve_peaks_at_128_threads_in_the_drawing() -> None:
    root = ET.fromstring(render_svg(status(POINT_SELECT), "t"))
    qps = polylines(root)[0].get("points") or ""
    ys = [float(point.split(",")[1]) for point in qps.split()]
    assert ys.index(min(ys)) == 1  # SVG y grows downwards: the highest QPS is the smallest y


def test_several_workloads_stack_as_panels_each_with_two_curves() -> None:
    root = ET.fromstring(render_svg(status(POINT_SELECT + READ_WRITE), "t"))
    panels = [g for g in root.iter(f"{SVG}g") if g.get("class") == "panel"]
    assert [p.get("data-workload") for p in panels] == ["oltp_point_select", "oltp_read_write"]
    for panel, steps in zip(panels, (POINT_SELECT, READ_WRITE), strict=True):
        lines = list(panel.iter(f"{SVG}polyline"))
        assert len(lines) == 2
        assert all(len((x.get("points") or "").split()) == len(steps) for x in lines)
    assert int(root.get("height") or 0) > 2 * 300


def test_invalid_steps_are_drawn_hollow_and_the_panel_says_what_hollow_means() -> None:
    steps = [*POINT_SELECT[:2], step(2, "oltp_point_select", 256, 44952.0, 10.65, valid=False)]
    root = ET.fromstring(render_svg(status(steps), "t"))
    hollow = [c for c in root.iter(f"{SVG}circle") if c.get("fill") == "#ffffff"]
    assert len(hollow) == 1
    assert "invalid" in "".join(hollow[0].itertext())
    assert "hollow marker: invalid step" in texts(root)


def test_the_svg_is_deterministic() -> None:
    assert render_svg(status(POINT_SELECT), "t") == render_svg(status(POINT_SELECT), "t")


def test_a_run_without_finished_steps_still_renders_a_valid_svg() -> None:
    root = ET.fromstring(render_svg(status([], phase="Pending"), "nothing yet"))
    assert "no finished steps" in texts(root)
    assert polylines(root) == []
