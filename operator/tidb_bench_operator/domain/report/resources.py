"""The report's resource panel: per step the server's cores per component, the node table
(cores used of allocatable, the pods on each node) and the bottleneck line, from
StepStatus.resources, in Markdown and drawn in SVG (docs/reports.md)."""

from __future__ import annotations

from collections.abc import Sequence
from xml.sax.saxutils import escape, quoteattr

from tidb_bench_operator.domain.api.run_status import StepStatus
from tidb_bench_operator.domain.api.step_resources import StepResources
from tidb_bench_operator.domain.report import svg
from tidb_bench_operator.domain.report.format import cell, rate

WIDTH = 760
LEFT = 24
MIDDLE = 392
RIGHT = WIDTH - 24
BAR_HEIGHT = 11
COMPONENT_ROW = 20
NODE_ROW = 34
COMPONENT_COLOUR = "#1f77b4"
CLIENT_COLOUR = "#7f7f7f"
NODE_COLOUR = "#2ca02c"
ALLOCATABLE_COLOUR = "#e6e6e6"
UNAVAILABLE_COLOUR = "#8c1c13"
#: The bottleneck line is red when something is saturated, grey when nothing is.
SATURATED_COLOUR = "#d62728"
#: Pods named under a node in the chart; the Markdown names them all.
PODS_SHOWN = 4


def with_resources(steps: Sequence[StepStatus]) -> list[StepStatus]:
    """The steps that carry resource data (measured, or saying why it is unavailable)."""
    return [s for s in steps if s.resources is not None]


def qps_per_core(step: StepStatus) -> str:
    """The step's QPS per server core, for the step table (a dash without it)."""
    res = step.resources
    return rate(res.qps_per_core) if res is not None else "—"


def _cores(value: float | None) -> str:
    return "—" if value is None else f"{value:,.2f}"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def _headline(res: StepResources) -> str:
    """`5.62 server cores, 8,754 QPS per core, 0.114 CPU ms per query; clients 1.55 cores`."""
    parts = [f"{_cores(res.server_cores)} server cores"]
    if res.qps_per_core is not None:
        parts.append(f"{rate(res.qps_per_core)} QPS per core")
    if res.cpu_ms_per_query is not None:
        parts.append(f"{_ms(res.cpu_ms_per_query)} CPU ms per query")
    text = ", ".join(parts)
    if res.client_cores is not None:
        text += f"; clients {_cores(res.client_cores)} cores"
    return text


def _node_use(used: float | None, allocatable: float | None) -> str:
    """`4.06 / 16 (25%)`."""
    text = f"{_cores(used)} / {'—' if allocatable is None else f'{allocatable:g}'}"
    if used is not None and allocatable:
        text += f" ({used / allocatable * 100:.0f}%)"
    return text


def _window(res: StepResources) -> str:
    if res.window_start is None or res.window_end is None:
        return ""
    start = res.window_start.strftime("%H:%M:%S")
    return f", window {start}–{res.window_end.strftime('%H:%M:%S')} UTC"


def resource_lines(steps: Sequence[StepStatus]) -> list[str]:
    """Markdown: per step with resource data, its headline, bottleneck, components and nodes;
    or why server metrics are unavailable."""
    lines: list[str] = []
    for step in with_resources(steps):
        res = step.resources
        assert res is not None
        lines += [
            f"### {step.threads} threads: server resources",
            "",
            f"Source: {cell(res.source)}{_window(res)}.",
            "",
        ]
        if res.unavailable:
            lines += [f"- Server metrics unavailable: {cell(res.unavailable)}.", ""]
            continue
        lines.append(f"- {_headline(res)}.")
        if res.bottleneck is not None:
            lines.append(f"- Bottleneck ({res.bottleneck.kind}): {cell(res.bottleneck.message)}.")
        lines += [f"- Note: {cell(note)}." for note in res.notes]
        lines.append("")
        if res.components:
            lines += [
                "| component | pods | cores | CPU ms/query |",
                "| :--- | ---: | ---: | ---: |",
                *(
                    f"| {cell(c.component)} | {c.pods} | {_cores(c.cores)} | "
                    f"{_ms(c.cpu_ms_per_query)} |"
                    for c in res.components
                ),
                "",
            ]
        if res.nodes:
            lines += [
                "| node | cores used / allocatable | pods |",
                "| :--- | :--- | :--- |",
                *(
                    f"| {cell(n.name)} | {_node_use(n.cores, n.allocatable_cores)}"
                    f"{' (sum of its pods)' if n.from_pods else ''} | "
                    f"{cell(', '.join(n.pods)) or '—'} |"
                    for n in res.nodes
                ),
                "",
            ]
    return lines


# --------------------------------------------------------------------------- the chart


#: Characters of the bottleneck line per row of the chart (bold, 12 px, 712 px wide).
BOTTLENECK_WRAP = 100


def _bottleneck_rows(res: StepResources) -> list[str]:
    if res.bottleneck is None:
        return []
    return svg.wrap(f"bottleneck: {res.bottleneck.message}", BOTTLENECK_WRAP)


def _panel_height(res: StepResources) -> float:
    if res.unavailable:
        return 64.0
    rows = max((len(res.components) + 1) * COMPONENT_ROW, len(res.nodes) * NODE_ROW)
    return 70.0 + rows + 16.0 * len(_bottleneck_rows(res)) + 14.0


def _bar(x: float, y: float, width: float, colour: str, tip: str) -> str:
    return (
        f'<rect x="{svg.num(x)}" y="{svg.num(y)}" width="{svg.num(max(width, 0.5))}" '
        f'height="{BAR_HEIGHT}" fill="{colour}"><title>{escape(tip)}</title></rect>'
    )


def _components(res: StepResources, top: float) -> list[str]:
    """Cores per component, the clients' below them, as bars on one scale."""
    rows = [(c.component, c.cores, COMPONENT_COLOUR) for c in res.components]
    if res.client_cores is not None:
        rows.append(("clients", res.client_cores, CLIENT_COLOUR))
    top_cores = max([cores for _, cores, _ in rows] + [0.01])
    x0, x1 = LEFT + 70, MIDDLE - 60
    out = [svg.text(LEFT, top, "cores per component", font_weight="bold")]
    for i, (name, cores, colour) in enumerate(rows):
        y = top + 10 + i * COMPONENT_ROW
        width = cores / top_cores * (x1 - x0)
        out.append(svg.text(LEFT, y + BAR_HEIGHT - 1, name, fill=colour))
        out.append(_bar(x0, y, width, colour, f"{name}: {_cores(cores)} cores"))
        out.append(svg.text(x0 + width + 5, y + BAR_HEIGHT - 1, _cores(cores), font_size="11"))
    return out


def _nodes(res: StepResources, top: float) -> list[str]:
    """Each node: a bar of its allocatable cores, filled to the cores used; its pods below."""
    out = [svg.text(MIDDLE, top, "nodes: cores used of allocatable", font_weight="bold")]
    known = [n.allocatable_cores or n.cores or 0.0 for n in res.nodes]
    widest = max([*known, 0.01])
    x0, x1 = MIDDLE + 60, RIGHT - 116
    for i, node in enumerate(res.nodes):
        y = top + 10 + i * NODE_ROW
        full = (node.allocatable_cores or node.cores or 0.0) / widest * (x1 - x0)
        used = (node.cores or 0.0) / widest * (x1 - x0)
        out.append(svg.text(MIDDLE, y + BAR_HEIGHT - 1, node.name))
        out.append(_bar(x0, y, full, ALLOCATABLE_COLOUR, f"{node.name}: allocatable"))
        use = _node_use(node.cores, node.allocatable_cores)
        out.append(_bar(x0, y, used, NODE_COLOUR, f"{node.name}: {use} cores"))
        out.append(svg.text(x0 + full + 5, y + BAR_HEIGHT - 1, use, font_size="11"))
        pods = ", ".join(node.pods[:PODS_SHOWN])
        if len(node.pods) > PODS_SHOWN:
            pods += f" +{len(node.pods) - PODS_SHOWN}"
        out.append(svg.text(x0, y + BAR_HEIGHT + 12, pods or "no pods of the run", font_size="10",
                            fill="#555555"))  # fmt: skip
    return out


def _panel(workload: str, step: StepStatus, res: StepResources, top: float) -> list[str]:
    out = [
        f'<g class="resources" data-workload={quoteattr(workload)} data-threads="{step.threads}">',
        svg.text(
            LEFT,
            top + 18,
            f"{workload}, {step.threads} threads: server resources ({rate(step.qps)} QPS)",
            font_size="13",
            font_weight="bold",
        ),
    ]
    if res.unavailable:
        out.append(
            svg.text(
                LEFT,
                top + 40,
                f"server metrics unavailable: {res.unavailable}",
                fill=UNAVAILABLE_COLOUR,
                **{"class": "unavailable"},
            )
        )
        return [*out, "</g>"]
    out.append(svg.text(LEFT, top + 36, _headline(res), fill="#333333"))
    out += _components(res, top + 58)
    out += _nodes(res, top + 58)
    rows = _bottleneck_rows(res)
    saturated = res.bottleneck is not None and res.bottleneck.kind not in ("none", "unknown")
    first = top + _panel_height(res) - 14 - 16 * (len(rows) - 1)
    for i, row in enumerate(rows):
        out.append(
            svg.text(
                LEFT,
                first + 16 * i,
                row,
                fill=SATURATED_COLOUR if saturated else "#333333",
                font_weight="bold",
                **{"class": "bottleneck"},
            )
        )
    return [*out, "</g>"]


def resource_panels(
    workload: str, steps: Sequence[StepStatus], top: float
) -> tuple[list[str], float]:
    """A resource panel per step of the workload that has resource data; (svg, height)."""
    out: list[str] = []
    y = top
    for step in with_resources(steps):
        res = step.resources
        assert res is not None
        out += _panel(workload, step, res, y)
        y += _panel_height(res)
    return out, y - top
