"""Every recorded PD sample in tests/data/pd/ is either read for what it holds or refused.

The product reads two PD answers: stores and operators. Every other recorded PD or
TiDB Operator body is something a careless user could hand to `tidb-bench pd-check`; each
must be refused with a ParseError/PDError that names what was expected, never read as
stores or as an (empty) operator queue.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tidb_bench_operator.domain.pd import parse_operators, parse_stores
from tidb_bench_operator.errors import TidbBenchError

TESTS = Path(__file__).resolve().parents[2]
DATA = TESTS / "data" / "pd"

#: Samples that are neither stores nor operators, with a word the refusal must contain.
NOT_STORES_OR_OPERATORS = [
    "pd-api-v1-cluster_tidb-operator-testdata.json",
    "pd-api-v1-config_SIMPLIFIED_tidb-operator-testdata.json",
    "pd-api-v1-health_v8.1.0_tidb-operator-testdata.json",
    "pd-api-v1-leader_v8.1.0_tidb-operator-testdata.json",
    "pd-api-v1-members_v8.1.0_tidb-operator-testdata.json",
    "pd-api-v1-scheduler-config-evict-leader-scheduler-list_tidb-operator-testdata.json",
    "pd-api-v1-schedulers_default-v8_tidb-operator-testdata.json",
    "pd-api-v1-schedulers_with-evict-leader_tidb-operator-testdata.json",
    "pd-ctl-config-show-all_v6.5.1_tiup-ctl.txt",
    "pd-ctl-config-show_v6.1.0_tiup-ctl.txt",
    "pd-ctl-region_v6.1.0_tiup-ctl_piped-to-jq_ELIDED.txt",
    "tc-status-tiflash-tombstoneStores_docs-tidb-operator-release-1.6.yaml",
    "tc-status-tikv-store-entry_docs-tidb-operator-release-1.6.json",
]


@pytest.mark.parametrize("name", NOT_STORES_OR_OPERATORS)
def test_a_pd_body_that_is_not_stores_is_refused_as_stores(name: str) -> None:
    with pytest.raises(TidbBenchError, match="PD stores"):
        parse_stores((DATA / name).read_text())


@pytest.mark.parametrize("name", NOT_STORES_OR_OPERATORS)
def test_a_pd_body_that_is_not_operators_is_refused_as_operators(name: str) -> None:
    # In particular a scheduler list (a JSON array of names) is not an operator queue, and
    # no body yields "no pending operators".
    with pytest.raises(TidbBenchError, match="PD operators"):
        parse_operators((DATA / name).read_text())


def test_every_pd_sample_is_named_by_at_least_one_test_file() -> None:
    test_texts = [p.read_text() for p in TESTS.rglob("test_*.py")]
    samples = sorted(p.name for p in DATA.iterdir() if p.is_file())
    assert samples, f"no samples found in {DATA}"
    untested = [name for name in samples if not any(name in text for text in test_texts)]
    assert untested == [], (
        f"samples in {DATA} that no tests/**/test_*.py names (add a test that reads them): "
        f"{untested}"
    )
