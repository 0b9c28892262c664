"""The report as one self-contained HTML file: the chart inline and the Markdown tables as
HTML, for attaching to a ticket."""

from __future__ import annotations

import html
import re

from tidb_bench_operator.domain.report.chart import render_svg
from tidb_bench_operator.domain.report.markdown import render_markdown
from tidb_bench_operator.domain.report.model import RunReport, ScheduleReport
from tidb_bench_operator.domain.report.trend import render_schedule_markdown, render_schedule_svg


def _inline(text: str) -> str:
    """Markdown inline markup this module writes (**bold**, `code`, escaped pipes) as HTML."""
    escaped = html.escape(text.replace("\\|", "|"), quote=False)
    escaped = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", escaped)


def _split_row(line: str) -> list[str]:
    cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
    return [c.strip() for c in cells]


def markdown_to_html(markdown: str) -> str:
    """The Markdown render_markdown writes (headings, paragraphs, lists, tables) as HTML."""
    out: list[str] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{_inline(line[level:].strip())}</h{level}>")
        elif line.startswith("| "):
            header = _split_row(line)
            aligns = [
                "right" if c.endswith(":") and not c.startswith(":") else "left"
                for c in _split_row(lines[i + 1])
            ]
            i += 2
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(_split_row(lines[i]))
                i += 1
            out.append("<table>")
            out.append(
                "<tr>"
                + "".join(
                    f'<th class="{a}">{_inline(c)}</th>'
                    for c, a in zip(header, aligns, strict=False)
                )
                + "</tr>"
            )
            for row in rows:
                out.append(
                    "<tr>"
                    + "".join(
                        f'<td class="{a}">{_inline(c)}</td>'
                        for c, a in zip(row, aligns, strict=False)
                    )
                    + "</tr>"
                )
            out.append("</table>")
            continue
        elif line.startswith("- "):
            out.append("<ul>")
            while i < len(lines) and lines[i].startswith("- "):
                out.append(f"<li>{_inline(lines[i][2:])}</li>")
                i += 1
            out.append("</ul>")
            continue
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
        i += 1
    return "\n".join(out)


_CSS = """
body { font-family: sans-serif; max-width: 800px; margin: 2em auto; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 14px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; }
th { background: #f3f3f3; }
td.right, th.right { text-align: right; }
figure { margin: 1em 0; }
code { background: #f3f3f3; padding: 0 3px; }
"""


def render_html(
    report: RunReport | ScheduleReport,
    *,
    markdown: str | None = None,
    chart: str | None = None,
) -> str:
    """One self-contained HTML file (no external resources): the chart inline, then the
    tables — for attaching to a ticket. `markdown` and `chart` are the report's Markdown and
    SVG when the caller rendered them already (`tidb-bench report` printed the Markdown)."""
    if isinstance(report, ScheduleReport):
        markdown = render_schedule_markdown(report) if markdown is None else markdown
        chart = render_schedule_svg(report) if chart is None else chart
    else:
        markdown = render_markdown(report) if markdown is None else markdown
        chart = render_svg(report) if chart is None else chart
    return _page(report.title, chart, markdown)


def _page(title: str, chart: str, markdown: str) -> str:
    """One self-contained HTML page: the SVG chart inline, then the Markdown as HTML."""
    title = html.escape(title)
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{title}</title>\n'
        f"<style>{_CSS}</style>\n</head>\n<body>\n"
        f"<figure>\n{chart}</figure>\n"
        f"{markdown_to_html(markdown)}\n"
        "</body>\n</html>\n"
    )
