"""The fixed top-level layout of the repository (README's "Layout") holds."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_source_root_has_no_init_py_so_it_cannot_shadow_the_operator_module() -> None:
    assert not (ROOT / "operator" / "__init__.py").exists()
    import operator

    # The standard library module still wins the import.
    assert hasattr(operator, "itemgetter")


def test_every_fixed_top_level_entry_exists() -> None:
    for name in ("pyproject.toml", "operator", "crds", "deploy", "tests", "Dockerfile",
                 "examples", "README.md", "Makefile", ".ci/run"):  # fmt: skip
        assert (ROOT / name).exists(), name


def test_ci_runs_exactly_the_readme_test_command() -> None:
    run = (ROOT / ".ci" / "run").read_text()
    assert "make test" in run
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make demo" in readme


def test_every_package_module_has_a_docstring() -> None:
    import ast

    for path in (ROOT / "operator" / "tidb_bench_operator").rglob("*.py"):
        tree = ast.parse(path.read_text())
        assert ast.get_docstring(tree), f"{path.relative_to(ROOT)} has no module docstring"
