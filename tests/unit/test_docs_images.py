"""The report charts in the README are what the code draws now (`make docs-images`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidb_bench_operator.cli import main

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
REFERENCE = REPO / "examples" / "reference" / "published-sysbench.yaml"
# The same arguments as the Makefile's docs-images target.
IMAGES = {
    "report-sweep": [
        "docs/report/read-write-sweep.yaml",
        "--results",
        "docs/report/read-write-sweep-results.yaml",
    ],
    "report-compare": [
        "docs/report/point-select-tikv3.yaml",
        "--compare",
        "docs/report/point-select-tikv4.yaml",
        "--compare",
        str(REFERENCE.relative_to(REPO)),
    ],
    "report-failed-invalid": ["docs/report/failed-and-invalid.yaml"],
    "report-resources": ["docs/report/point-select-resources.yaml"],
    "experiment-compare": ["examples/experiment/what-if-tikv-3-vs-4.yaml"],
    "experiment-window": ["tests/data/experiment-window.json"],
}


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_the_committed_chart_is_what_the_report_draws(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(REPO)
    out = tmp_path / f"{name}.svg"
    assert main(["report", *IMAGES[name], "--svg", str(out)]) == 0
    capsys.readouterr()
    committed = DOCS / f"{name}.svg"
    assert out.read_text() == committed.read_text(), f"run `make docs-images` ({committed})"
    png = DOCS / f"{name}.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"docs/{name}.png" in (REPO / "README.md").read_text()
