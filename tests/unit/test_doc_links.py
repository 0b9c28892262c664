"""scripts/lint/doc_links.py: every relative link in README.md and docs/ resolves."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def doc_links() -> ModuleType:
    spec = importlib.util.spec_from_file_location("doc_links", REPO / "scripts/lint/doc_links.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The temporary trees reuse names of this repository's documents, so that doc_refs.py (which
# reads this file too) finds every document named here.


def test_of_one_good_and_one_broken_link_only_the_broken_one_is_reported(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "pd.md").write_text("# Guide\n\n## The queue (one run at a time)\n")
    (tmp_path / "README.md").write_text(
        "# Tool\n\n"
        "Read [the queue](docs/pd.md#the-queue-one-run-at-a-time).\n"
        "Read [the soak](docs/pd.md#the-soak) too.\n"
    )
    checked, problems = doc_links().check(tmp_path)
    assert checked == 2
    assert problems == ["README.md:4: docs/pd.md#the-soak"]


def test_a_missing_file_a_path_outside_the_repository_and_a_missing_anchor_are_broken(
    tmp_path: Path,
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "tls.md").write_text(
        "# A\n\n[up](../README.md) [gone](sysbench.md) [out](../../README.md) [here](#a) [no](#b)\n"
    )
    (tmp_path / "README.md").write_text("# R\n")
    _, problems = doc_links().check(tmp_path)
    assert problems == [
        "docs/tls.md:3: sysbench.md",
        "docs/tls.md:3: ../../README.md",
        "docs/tls.md:3: #b",
    ]


def test_urls_code_spans_and_fenced_blocks_hold_no_links(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text(
        "[site](https://example.org/x.md) `[not](pd.md)` [mail](mailto:a@b.c)\n"
        "```\n[not](tls.md)\n# not a heading\n```\n"
    )
    assert doc_links().check(tmp_path) == (0, [])


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("`make test` and the Kubernetes build", "make-test-and-the-kubernetes-build"),
        ("The guard's cost", "the-guards-cost"),
        ("What the demo runs, and what stands in", "what-the-demo-runs-and-what-stands-in"),
        ("Queue — one at a time", "queue--one-at-a-time"),
    ],
)
def test_anchors_are_made_as_github_makes_them(heading: str, anchor: str) -> None:
    assert doc_links().github_anchor(heading) == anchor


def test_a_repeated_heading_gets_a_numbered_anchor() -> None:
    assert doc_links().anchors("# Notes\n## Notes\n## Notes\n") == {"notes", "notes-1", "notes-2"}


def test_every_link_in_this_repository_resolves() -> None:
    checked, problems = doc_links().check(REPO)
    assert checked > 0
    assert problems == []
