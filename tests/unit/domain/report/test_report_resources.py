"""The report's resource panel and QPS per core, from StepResources built here, and the
schedule's efficiency verdict in the run's and the schedule's reports."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime

from tidb_bench_operator.domain.api.run_status import BenchmarkRunStatus, StepStatus
from tidb_bench_operator.domain.api.schedule import (
    BenchmarkScheduleStatus,
    HistoryEntry,
    HistoryStep,
)
from tidb_bench_operator.domain.api.step_resources import (
    Bottleneck,
    ComponentUsage,
    NodeResources,
    PodResources,
    StepResources,
)
from tidb_bench_operator.domain.api.verdicts import RunComparison
from tidb_bench_operator.domain.report.chart import render_svg
from tidb_bench_operator.domain.report.html import render_html
from tidb_bench_operator.domain.report.markdown import render_markdown
from tidb_bench_operator.domain.report.model import run_report, schedule_report
from tidb_bench_operator.domain.report.trend import render_schedule_markdown, render_schedule_svg
from tidb_bench_operator.domain.stats.inference import compare_runs

PS = "oltp_point_select"
SVG = "{http://www.w3.org/2000/svg}"


def field_story_resources() -> StepResources:
    """The home lab's 128-thread step (docs/field-story.md): node2 with TiDB-0 and two TiKV
    at 4.06 of 16 cores, node3 at 1.64, sysbench 1.55, 49k QPS; saturated when `hot`."""
    return StepResources(
        source="prometheus (cAdvisor)",
        window_start=datetime(2026, 6, 27, 0, 30, 40, tzinfo=UTC),
        window_end=datetime(2026, 6, 27, 0, 30, 55, tzinfo=UTC),
        server_cores=5.46,
        qps_per_core=9010.0,
        cpu_ms_per_query=0.111,
        client_cores=1.55,
        components=[
            ComponentUsage(component="tikv", pods=3, cores=3.04, cpu_ms_per_query=0.0618),
            ComponentUsage(component="tidb", pods=1, cores=2.31, cpu_ms_per_query=0.047),
            ComponentUsage(component="pd", pods=1, cores=0.11, cpu_ms_per_query=0.0022),
        ],
        pods=[
            PodResources(name="basic-tidb-0", component="tidb", node="node2", cores=2.31),
            PodResources(name="basic-tikv-2", component="tikv", node="node3", cores=1.41),
        ],
        nodes=[
            NodeResources(
                name="node2",
                cores=4.06,
                allocatable_cores=16,
                pods=["basic-tidb-0", "basic-tikv-0", "basic-tikv-1"],
            ),
            NodeResources(
                name="node3", cores=1.64, allocatable_cores=16, pods=["basic-tikv-2", "basic-pd-0"]
            ),
        ],
        bottleneck=Bottleneck(
            kind="none",
            message="no server resource saturated (highest 25 %): the limit is elsewhere — "
            "client path, network, or the software",
        ),
    )


def step(index: int, threads: int, qps: float, resources: StepResources | None) -> StepStatus:
    return StepStatus(
        index=index,
        workload=PS,
        threads=threads,
        phase="Succeeded",
        qps=qps,
        tps=qps,
        valid=True,
        resources=resources,
    )


def status(*steps: StepStatus) -> BenchmarkRunStatus:
    return BenchmarkRunStatus(phase="Succeeded", steps=list(steps))


def test_the_step_table_has_qps_per_core_beside_qps_and_a_dash_without_resource_data() -> None:
    text = render_markdown(
        run_report(
            "r", status(step(0, 64, 39562, None), step(1, 128, 49193, field_story_resources()))
        )
    )
    assert "| threads | QPS | QPS/core | TPS |" in text
    assert "| 128 | 49,193 | 9,010 | 49,193 |" in text
    assert "| 64 | 39,562 | — | 39,562 |" in text


def test_a_run_without_resource_data_keeps_its_table_as_it_was() -> None:
    text = render_markdown(run_report("r", status(step(0, 64, 39562, None))))
    assert "QPS/core" not in text and "server resources" not in text


def test_the_panel_lists_components_nodes_with_their_pods_and_the_bottleneck() -> None:
    text = render_markdown(run_report("r", status(step(0, 128, 49193, field_story_resources()))))
    assert "### 128 threads: server resources" in text
    assert (
        "- 5.46 server cores, 9,010 QPS per core, 0.111 CPU ms per query; clients 1.55 cores."
        in text
    )
    assert "| tikv | 3 | 3.04 | 0.0618 |" in text
    assert "| node2 | 4.06 / 16 (25%) | basic-tidb-0, basic-tikv-0, basic-tikv-1 |" in text
    assert "| node3 | 1.64 / 16 (10%) | basic-tikv-2, basic-pd-0 |" in text
    assert "- Bottleneck (none): no server resource saturated (highest 25 %)" in text
    assert "window 00:30:40–00:30:55 UTC" in text


def test_unavailable_server_metrics_are_said_in_the_table_and_the_chart() -> None:
    down = StepResources(source="prometheus", unavailable="Prometheus did not answer in 5 s")
    report = run_report("r", status(step(0, 128, 49193, down)))
    assert "- Server metrics unavailable: Prometheus did not answer in 5 s." in render_markdown(
        report
    )
    root = ET.fromstring(render_svg(report))
    [said] = [t for t in root.iter(f"{SVG}text") if t.get("class") == "unavailable"]
    assert said.text == "server metrics unavailable: Prometheus did not answer in 5 s"


def test_the_chart_draws_a_bar_per_component_and_node_and_names_a_saturated_pod_in_red() -> None:
    hot = field_story_resources().model_copy(
        update={
            "bottleneck": Bottleneck(
                kind="component",
                subject="basic-tikv-0",
                message="tikv basic-tikv-0 on node2 at 94 % of its 8-core limit",
            )
        }
    )
    root = ET.fromstring(render_svg(run_report("r", status(step(0, 128, 49193, hot)))))
    [panel] = [g for g in root.iter(f"{SVG}g") if g.get("class") == "resources"]
    assert panel.get("data-threads") == "128"
    tips = [r.findtext(f"{SVG}title") for r in panel.iter(f"{SVG}rect")]
    assert "tikv: 3.04 cores" in tips and "clients: 1.55 cores" in tips
    assert "node2: 4.06 / 16 (25%) cores" in tips
    [line] = [t for t in panel.iter(f"{SVG}text") if t.get("class") == "bottleneck"]
    assert line.get("fill") == "#d62728" and "basic-tikv-0 on node2 at 94 %" in (line.text or "")


def test_the_html_page_has_the_panel_tables() -> None:
    page = render_html(run_report("r", status(step(0, 128, 49193, field_story_resources()))))
    assert '<td class="left">node2</td>' in page and 'class="resources"' in page


def _cpu_verdict(planted: float) -> RunComparison:
    base = [{(PS, 128): [0.112, 0.114, 0.116]}, {(PS, 128): [0.115, 0.113, 0.111]}]
    now = {(PS, 128): [planted * 0.99, planted, planted * 1.01]}
    return compare_runs(now, base, 10, metric="cpuMsPerQuery")


def test_a_judged_run_shows_its_efficiency_verdict_with_effect_and_interval() -> None:
    run = status(step(0, 128, 49193, field_story_resources()))
    run.efficiency = _cpu_verdict(0.16)
    run.regression = compare_runs({(PS, 128): [49000.0, 49200, 49400]},
                                  [{(PS, 128): [49100.0, 49300, 48900]}] * 2, 10)  # fmt: skip
    text = render_markdown(run_report("r", run))
    assert "Efficiency (server CPU ms per query; a rise regresses): **Regressed**" in text
    row = next(
        line for line in text.splitlines() if line.startswith(f"| {PS} | 128 | **Regressed**")
    )
    # baseline median 0.1135: +41.0%, its 95% bootstrap interval beside it
    assert "| +41.0% | +37.7% … +44.3% |" in row and "0.16 vs 0.114" in row


def test_a_judged_run_without_resource_data_says_it_has_no_efficiency_verdict() -> None:
    run = status(step(0, 128, 49193, None))
    run.regression = compare_runs({(PS, 128): [49000.0]}, [{(PS, 128): [49100.0]}], 10)
    assert "No efficiency verdict (server CPU per query): no resource data." in render_markdown(
        run_report("r", run)
    )


def test_the_schedules_report_shows_the_efficiency_verdict_and_each_nights_cpu_per_query() -> None:
    entry = HistoryEntry(
        name="nightly-2",
        outcome="Succeeded",
        verdict="NoChange",
        efficiency="Regressed",
        peak_qps=49193,
        steps=[HistoryStep(workload=PS, threads=128, qps=49193, trials=[49193.0] * 3,
                           cpu_ms_per_query=[0.158, 0.16, 0.162])],
    )  # fmt: skip
    sched = BenchmarkScheduleStatus(
        history=[entry], verdict="NoChange", efficiency="Regressed", last_successful_run="nightly-2"
    )
    text = render_schedule_markdown(schedule_report("nightly", sched))
    assert "Latest efficiency verdict (server CPU per query): **Regressed** (nightly-2)." in text
    assert "| NoChange | Regressed | 49,193 | 128 thr 49,193 (3) 0.16 ms |" in text


def test_the_schedules_chart_draws_cpu_per_query_night_by_night_under_qps() -> None:
    def night(n: int, cpu: list[float]) -> HistoryEntry:
        return HistoryEntry(
            name=f"nightly-{n}",
            outcome="Succeeded",
            steps=[HistoryStep(workload=PS, threads=128, qps=49000.0, trials=[49000.0] * 3,
                               cpu_ms_per_query=cpu)],
        )  # fmt: skip

    nights = [night(1, []), night(2, [0.113, 0.114, 0.115]), night(3, [0.158, 0.16, 0.162])]
    chart = render_schedule_svg(schedule_report("nightly", BenchmarkScheduleStatus(history=nights)))
    root = ET.fromstring(chart)
    [cpu] = [p for p in root.iter(f"{SVG}path") if p.get("class") == "trend-cpu"]
    assert cpu.get("d", "").count("L") == 1  # the two nights with resource data
    tips = [c.findtext(f"{SVG}title") for c in root.iter(f"{SVG}circle")]
    assert "nightly-3: 0.16 CPU ms/query" in tips
    without = render_schedule_svg(
        schedule_report("nightly", BenchmarkScheduleStatus(history=[night(1, [])]))
    )
    assert "trend-cpu" not in without and "CPU ms per query" not in without
