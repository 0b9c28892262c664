"""Small SVG drawing helpers for the report's charts: scales, ticks, text and markers.

Hand-written SVG keeps the domain free of plotting libraries and the output deterministic
(the same run draws the same bytes, so rendered files can be compared in tests).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

TICKS = 5


def nice_ticks(maximum: float, count: int = TICKS) -> list[float]:
    """Round tick values 0, s, 2s, ... covering `maximum`, with s = 1, 2, 2.5 or 5 x 10^k."""
    if not maximum > 0 or not math.isfinite(maximum):
        maximum = 1.0
    raw = maximum / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    top = math.ceil(maximum / step - 1e-9) * step
    return [i * step for i in range(round(top / step) + 1)]


def tick_label(value: float, step: float) -> str:
    """A tick value with as many decimals as the tick step needs (2.5 -> 1), thousands separated."""
    decimals = 0
    while decimals < 4 and abs(round(step, decimals) - step) > step * 1e-9:
        decimals += 1
    return f"{value:,.{decimals}f}"


def short_number(value: float) -> str:
    """40000 -> 40k, 1500 -> 1,500, 2.5 -> 2.5: for labels beside markers."""
    if abs(value) >= 10_000:
        return f"{value / 1000:,.0f}k"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def num(value: float) -> str:
    return f"{value:.1f}"


def text(x: float, y: float, content: str, **attrs: str) -> str:
    """A <text> element; attribute names use _ for - (text_anchor -> text-anchor)."""
    extra = "".join(f" {k.replace('_', '-')}={quoteattr(v)}" for k, v in attrs.items())
    return f'<text x="{num(x)}" y="{num(y)}"{extra}>{escape(content)}</text>'


def line(x1: float, y1: float, x2: float, y2: float, stroke: str, **attrs: str) -> str:
    extra = "".join(f" {k.replace('_', '-')}={quoteattr(v)}" for k, v in attrs.items())
    return (
        f'<line x1="{num(x1)}" y1="{num(y1)}" x2="{num(x2)}" y2="{num(y2)}" '
        f'stroke="{stroke}"{extra}/>'
    )


def marker(
    x: float, y: float, colour: str, shape: str, hollow: bool = False, tooltip: str | None = None
) -> str:
    """A point marker: circle, square, diamond or triangle; hollow = white fill."""
    fill = "#ffffff" if hollow else colour
    tip = f"<title>{escape(tooltip)}</title>" if tooltip else ""
    style = f'fill="{fill}" stroke="{colour}" stroke-width="1.5"'
    if shape == "circle":
        return f'<circle cx="{num(x)}" cy="{num(y)}" r="4" {style}>{tip}</circle>'
    if shape == "square":
        return (
            f'<rect x="{num(x - 3.5)}" y="{num(y - 3.5)}" width="7" height="7" {style}>{tip}</rect>'
        )
    if shape == "diamond":
        pts = (
            f"{num(x)},{num(y - 5.5)} {num(x + 5.5)},{num(y)} "
            f"{num(x)},{num(y + 5.5)} {num(x - 5.5)},{num(y)}"
        )
        return f'<polygon points="{pts}" {style}>{tip}</polygon>'
    pts = f"{num(x)},{num(y - 4.5)} {num(x + 4.5)},{num(y + 3.5)} {num(x - 4.5)},{num(y + 3.5)}"
    return f'<polygon points="{pts}" {style}>{tip}</polygon>'


def cross(x: float, y: float, colour: str, tooltip: str) -> str:
    """An ✕ drawn with two lines: a failed step on the axis."""
    return (
        f'<g class="failed-step"><title>{escape(tooltip)}</title>'
        + line(x - 5, y - 5, x + 5, y + 5, colour, stroke_width="2.5")
        + line(x - 5, y + 5, x + 5, y - 5, colour, stroke_width="2.5")
        + "</g>"
    )


@dataclass(frozen=True)
class LogScale:
    """Threads on a log2 axis between `left` and `right` pixels, padded on both sides."""

    low: float
    high: float
    left: float
    right: float

    @classmethod
    def over(cls, values: Sequence[int], left: float, right: float) -> LogScale:
        logs = [math.log2(v) for v in values if v > 0] or [0.0]
        lo, hi = min(logs), max(logs)
        pad = 1.0 if hi == lo else (hi - lo) * 0.06 + 0.3
        return cls(lo - pad, hi + pad, left, right)

    def __call__(self, threads: float) -> float:
        return self.left + (math.log2(threads) - self.low) / (self.high - self.low) * (
            self.right - self.left
        )


@dataclass(frozen=True)
class LinearScale:
    """Values 0..ticks[-1] between pixel `bottom` and `top` (SVG y grows downwards)."""

    ticks: tuple[float, ...]
    bottom: float
    top: float

    def __call__(self, value: float) -> float:
        return self.bottom - value / self.ticks[-1] * (self.bottom - self.top)

    @property
    def step(self) -> float:
        return self.ticks[1] if len(self.ticks) > 1 else self.ticks[0] or 1.0


def path(points: Sequence[Sequence[tuple[float, float]]]) -> str:
    """The `d` of a path drawing each run of points as a connected line (M..L..)."""
    parts = []
    for run in points:
        if not run:
            continue
        parts.append(
            "M" + " L".join(f"{num(x)},{num(y)}" for x, y in run)
            if len(run) > 1
            else f"M{num(run[0][0])},{num(run[0][1])}"
        )
    return " ".join(parts)


def wrap(content: str, width: int) -> list[str]:
    """Greedy word wrap to `width` characters."""
    lines: list[str] = []
    current = ""
    for word in content.split():
        if current and len(current) + 1 + len(word) > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    if current:
        lines.append(current)
    return lines


def document(title: str, width: int, height: int, body: Sequence[str]) -> str:
    """A self-contained SVG document: white background, `title`, then `body`'s elements."""
    head = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
    ]
    return "\n".join([*head, *body, "</svg>"]) + "\n"


def y_grid(
    scale: LinearScale, left: float, right: float, colour: str, grid: str = "#e6e6e6"
) -> list[str]:
    """A value axis's grid: a line across the plot at each tick, its label left of the axis."""
    out = []
    for tick in scale.ticks:
        y = scale(tick)
        out.append(line(left, y, right, y, grid))
        out.append(
            text(left - 6, y + 4, tick_label(tick, scale.step), text_anchor="end", fill=colour)
        )
    return out
