"""`tidb-bench report`: a run's (or a schedule's) status parsed once into a report model
(model.py), rendered as Markdown (markdown.py), an SVG chart (chart.py, one panel per
workload in panel.py, published numbers in references.py, drawing helpers in svg.py) and one
HTML page of both (html.py); every renderer takes the model. format.py writes the numbers,
stats.py the trials and the schedule's verdict, trend.py a schedule's history, reference.py
reads the published-numbers files."""
