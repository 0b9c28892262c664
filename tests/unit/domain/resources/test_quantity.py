"""Kubernetes quantities as the resource metrics API and pod specs write them."""

from __future__ import annotations

import pytest

from tidb_bench_operator.domain.resources.quantity import parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("250m", 0.25),
        ("1234567n", 0.001234567),
        ("2", 2.0),
        ("1.5", 1.5),
        ("500u", 0.0005),
        ("123Ki", 123 * 1024),
        ("4Gi", 4 * 1024**3),
        ("1k", 1000.0),
        ("1e3", 1000.0),
        ("0", 0.0),
    ],
)
def test_a_quantity_is_read_as_its_number(text: str, value: float) -> None:
    assert parse_quantity(text) == pytest.approx(value)


@pytest.mark.parametrize(
    "text", ["", "lots", "1x", "1 Ki", "Ki", "1e999", None, True, float("inf"), "9" * 70]
)
def test_anything_else_is_none_never_an_error(text: object) -> None:
    assert parse_quantity(text) is None
