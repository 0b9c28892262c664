"""Published numbers on a report panel (`--compare REFERENCE.yaml`, reference.py):
at a thread count a diamond (a bar for a range), without one a band or line across."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

from tidb_bench_operator.domain.report import svg
from tidb_bench_operator.domain.report.format import amount
from tidb_bench_operator.domain.report.model import RefRow

REF_COLOUR = "#9467bd"


def reference_points(
    ref: RefRow,
    x_at: svg.LogScale,
    scales: Mapping[str, svg.LinearScale],
    label: str,
    taken: list[tuple[float, float]],
) -> list[str]:
    """A published number at a thread count: a diamond (a bar for a range) and its label."""
    row = ref.row
    if row.threads is None:
        return []
    out = []
    x = x_at(row.threads)
    for kind, value in (("qps", row.qps), ("tps", row.tps), ("latency", row.latency_ms)):
        scale = scales.get(kind)
        if value is None or scale is None:
            continue
        unit = {"qps": "QPS", "tps": "TPS", "latency": f"ms {label}"}[kind]
        tip = f"{ref.label} {ref.reference.name}: {amount(value)} {unit} at {row.threads} threads"
        if isinstance(value, tuple):
            out.append(
                svg.line(x, scale(value[0]), x, scale(value[1]), REF_COLOUR, stroke_width="3")
            )
            y = scale((value[0] + value[1]) / 2)
        else:
            y = scale(value)
        out.append(svg.marker(x, y, REF_COLOUR, "diamond", tooltip=tip))
        text_y = y + 4
        while any(abs(tx - x) < 20 and abs(ty - text_y) < 11 for tx, ty in taken):
            text_y += 11
        taken.append((x, text_y))
        out.append(svg.text(x + 8, text_y, ref.label, fill=REF_COLOUR, font_size="11"))
    return out


def reference_spans(
    refs: Sequence[RefRow],
    qps_y: svg.LinearScale,
    tps_y: svg.LinearScale | None,
    left: float,
    right: float,
) -> list[str]:
    """Published numbers without a thread count: a band (a range) or a line across the plot."""
    out = []
    for ref in refs:
        row = ref.row
        if row.threads is not None:
            continue
        for value, scale, unit in ((row.qps, qps_y, "QPS"), (row.tps, tps_y, "TPS")):
            if value is None or scale is None:
                continue
            low, high = value if isinstance(value, tuple) else (value, value)
            y_low, y_high = scale(low), scale(high)
            tip = f"{ref.label} {ref.reference.name}: {amount(value)} {unit}, threads not published"
            if high > low:
                out.append(
                    f'<rect class="reference-band" x="{left}" y="{svg.num(y_high)}" '
                    f'width="{right - left}" height="{svg.num(y_low - y_high)}" '
                    f'fill="{REF_COLOUR}" fill-opacity="0.12">'
                    f"<title>{html.escape(tip)}</title></rect>"
                )
            else:
                out.append(svg.line(left, y_low, right, y_low, REF_COLOUR, stroke_dasharray="1 3"))
            text = (
                f"{ref.label} {svg.short_number(low)}"
                + (f"–{svg.short_number(high)}" if high > low else "")
                + f" {unit}"
            )
            out.append(svg.text(left + 4, y_high + 11, text, fill=REF_COLOUR, font_size="11"))
    return out
