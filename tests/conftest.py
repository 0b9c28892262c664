"""Fixtures both suites use: a FakePD (unit tests reach it over HTTP, e2e runs from the controller)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testbed.fake_pd import FakePD


@pytest.fixture
def fake_pd() -> Iterator[FakePD]:
    """A FakePD serving recorded PD v8.1 bodies (three balanced TiKV stores, no operators)."""
    with FakePD() as pd:
        yield pd
