"""How a report writes numbers and text: rates, milliseconds, deltas, published amounts and
Markdown table cells (one home for every renderer)."""

from __future__ import annotations


def rate(value: float | None) -> str:
    """QPS/TPS as people write them (docs/field-story.md): thousands separators, decimals < 100."""
    if value is None:
        return "—"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}"


def ms(value: float | None) -> str:
    """Milliseconds with 2 decimals, as sysbench prints them."""
    return "—" if value is None else f"{value:,.2f}"


def delta(current: float | None, other: float | None) -> str:
    """(current - other) / other in percent, signed; a dash when either side is missing."""
    if current is None or other is None or other == 0:
        return "—"
    return f"{(current - other) / other * 100:+.1f}%"


def amount(value: float | tuple[float, float] | None) -> str:
    """A published QPS or TPS: a rate, or a range of two."""
    if value is None:
        return "—"
    if isinstance(value, tuple):
        return f"{rate(value[0])}–{rate(value[1])}"
    return rate(value)


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()
