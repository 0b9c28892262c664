"""`tidb-bench report`: Markdown tables, the SVG chart and its panels, trend, HTML, references."""
