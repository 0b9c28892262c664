"""deploy/overlays/monitoring/prometheusrule.yaml: checked and unit-tested with promtool.

promtool comes with Debian's `prometheus` package (scripts/testbed/install-deps.sh, run by
`make test`). It reads plain rule files, so the PrometheusRule's spec is written out as one.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
RULE = REPO / "deploy" / "overlays" / "monitoring" / "prometheusrule.yaml"
CASES = REPO / "tests" / "data" / "prometheus" / "alerts-test.yaml"
ALERTS = {
    "TidbBenchRunRegressed",
    "TidbBenchScheduleEfficiencyRegressed",
    "TidbBenchNightlyRunFailed",
    "TidbBenchRunFailed",
    "TidbBenchScheduleNotSucceeding",
    "TidbBenchControllerDown",
}


def promtool() -> str:
    path = shutil.which("promtool")
    assert path, "promtool is not installed: run `make deps` (Debian package prometheus)"
    return path


@pytest.fixture
def rules_dir(tmp_path: Path) -> Path:
    doc = yaml.safe_load(RULE.read_text())
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(doc["spec"]))
    shutil.copy(CASES, tmp_path / "alerts-test.yaml")
    return tmp_path


def test_the_prometheusrule_has_the_four_kinds_of_alert_and_is_in_the_overlay() -> None:
    doc = yaml.safe_load(RULE.read_text())
    assert doc["kind"] == "PrometheusRule"
    names = {r["alert"] for g in doc["spec"]["groups"] for r in g["rules"]}
    assert names == ALERTS
    overlay = yaml.safe_load((RULE.parent / "kustomization.yaml").read_text())
    assert "prometheusrule.yaml" in overlay["resources"]


def test_promtool_check_rules_accepts_them(rules_dir: Path) -> None:
    done = subprocess.run(
        [promtool(), "check", "rules", "rules.yaml"],
        cwd=rules_dir,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in done.stdout


def test_promtool_test_rules_passes_every_case(rules_dir: Path) -> None:
    done = subprocess.run(
        [promtool(), "test", "rules", "alerts-test.yaml"],
        cwd=rules_dir,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    cases = yaml.safe_load(CASES.read_text())["tests"]
    tested = {t["alertname"] for case in cases for t in case["alert_rule_test"]}
    assert tested == ALERTS  # every alert has at least one case
