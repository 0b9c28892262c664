"""The platform team's settings and what they refuse (domain/trust/reach.py, config.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tidb_bench_operator.config import Settings
from tidb_bench_operator.domain.api.resources import parse_run_spec
from tidb_bench_operator.domain.trust.reach import Reach, parse_flag, parse_namespaces, refusal

IMAGE = "registry.local/tidb-bench:1.2"


def spec(**fields: Any) -> Any:
    return parse_run_spec({"credentials": {"secretRef": {"name": "db"}}, **fields})


def test_the_defaults_are_same_namespace_own_image_and_targets_allowed() -> None:
    reach = Settings.from_env({}).reach
    assert reach == Reach()
    assert refusal(spec(cluster={"name": "basic"}), "team-a", reach, IMAGE) is None
    assert refusal(spec(cluster={"name": "basic", "namespace": "team-a"}), "team-a", reach,
                   IMAGE) is None  # fmt: skip
    assert refusal(spec(target={"host": "tidb.example", "pdURL": "http://pd:2379"}), "team-a",
                   reach, IMAGE) is None  # fmt: skip
    # Naming the controller's own image is no override.
    assert refusal(spec(cluster={"name": "basic"}, image=IMAGE), "team-a", reach, IMAGE) is None


def test_a_cluster_in_another_namespace_is_refused_naming_the_setting() -> None:
    reason, message = refusal(
        spec(cluster={"name": "basic", "namespace": "team-b"}), "team-a", Reach(), IMAGE
    ) or ("", "")
    assert reason == "CrossNamespaceNotAllowed"
    assert message.startswith(
        "spec.cluster.namespace: 'team-b' is not this run's namespace 'team-a', and this "
        "controller lets a run name only clusters in its own namespace; "
    ), message
    assert "TIDB_BENCH_ALLOW_CROSS_NAMESPACE" in message and "docs/trust.md" in message


def test_the_cross_namespace_setting_opens_every_namespace_or_the_listed_ones() -> None:
    other = spec(cluster={"name": "basic", "namespace": "team-b"})
    assert refusal(other, "team-a", Reach(any_namespace=True), IMAGE) is None
    listed = Reach(cluster_namespaces=frozenset({"team-b", "shared"}))
    assert refusal(other, "team-a", listed, IMAGE) is None
    third = spec(cluster={"name": "basic", "namespace": "team-c"})
    reason, message = refusal(third, "team-a", listed, IMAGE) or ("", "")
    assert reason == "CrossNamespaceNotAllowed"
    assert "only clusters in its own namespace or in shared, team-b;" in message


def test_an_image_override_is_refused_unless_the_setting_is_on() -> None:
    other = spec(cluster={"name": "basic"}, image="evil.example/steal:latest")
    reason, message = refusal(other, "team-a", Reach(), IMAGE) or ("", "")
    assert reason == "ImageOverrideNotAllowed"
    assert message.startswith(
        f"spec.image: this controller runs benchmark pods only in its own runner image "
        f"'{IMAGE}'; remove spec.image"
    ), message
    assert "TIDB_BENCH_ALLOW_IMAGE_OVERRIDE=true" in message
    assert refusal(other, "team-a", Reach(image_override=True), IMAGE) is None


@pytest.mark.parametrize(
    ("target", "field"),
    [({"host": "tidb.example"}, "spec.target.host"),
     ({"pdURL": "http://pd.example:2379"}, "spec.target.pdURL")],
)  # fmt: skip
def test_targets_only_refuses_an_explicit_host_or_pd_url(target: Any, field: str) -> None:
    asked = spec(cluster={"name": "basic"}, target=target)
    reach = Reach(operator_targets_only=True)
    reason, message = refusal(asked, "team-a", reach, IMAGE) or ("", "")
    assert reason == "TargetNotAllowed"
    assert message.startswith(f"{field}: this controller measures only clusters of TiDB "
                              "Operator (TIDB_BENCH_OPERATOR_TARGETS_ONLY=true)"), message  # fmt: skip
    # The cluster's own services, and a port on them, stay allowed.
    assert refusal(spec(cluster={"name": "basic"}, target={"port": 4001}), "team-a", reach,
                   IMAGE) is None  # fmt: skip


def test_targets_only_refuses_a_prometheus_url_the_run_names() -> None:
    asked = spec(cluster={"name": "basic"}, metrics={"prometheusURL": "http://prom.example:9090"})
    assert refusal(asked, "team-a", Reach(), IMAGE) is None
    reason, message = refusal(asked, "team-a", Reach(operator_targets_only=True), IMAGE) or ("", "")
    assert reason == "TargetNotAllowed"
    assert message.startswith(
        "spec.metrics.prometheusURL: this controller reads server metrics only from its own "
        "Prometheus or the resource metrics API (TIDB_BENCH_OPERATOR_TARGETS_ONLY=true)"
    ), message
    assert "docs/trust.md" in message
    # The other metrics settings reach nothing of the author's and stay allowed.
    other = spec(cluster={"name": "basic"}, metrics={"source": "metrics-server"})
    assert refusal(other, "team-a", Reach(operator_targets_only=True), IMAGE) is None


def test_the_settings_are_read_from_the_environment_strictly() -> None:
    env = {
        "TIDB_BENCH_ALLOW_CROSS_NAMESPACE": "shared, perf",
        "TIDB_BENCH_ALLOW_IMAGE_OVERRIDE": "True",
        "TIDB_BENCH_OPERATOR_TARGETS_ONLY": "true",
    }
    assert Settings.from_env(env).reach == Reach(
        cluster_namespaces=frozenset({"shared", "perf"}),
        image_override=True,
        operator_targets_only=True,
    )
    assert parse_namespaces("*") == (True, frozenset())
    assert parse_namespaces("TRUE") == (True, frozenset())
    assert parse_namespaces("false") == (False, frozenset())
    assert parse_namespaces(None) == (False, frozenset())
    with pytest.raises(ValueError, match="TIDB_BENCH_ALLOW_CROSS_NAMESPACE='Team_B': 'Team_B' "
                                         "is not a namespace name"):  # fmt: skip
        parse_namespaces("Team_B")
    with pytest.raises(ValueError, match="no name"):
        parse_namespaces(",")
    assert parse_flag("X", "") is False
    with pytest.raises(ValueError, match=r"TIDB_BENCH_ALLOW_IMAGE_OVERRIDE='yes': must be true "
                                         r"or false \(unset: false\)"):  # fmt: skip
        Settings.from_env({"TIDB_BENCH_ALLOW_IMAGE_OVERRIDE": "yes"})


def test_every_example_run_and_schedule_template_passes_the_default_settings() -> None:
    """`make demo` and the README's examples run under a controller installed as deploy/ is
    (those of custom workloads with the one setting they name)."""
    import yaml

    from tidb_bench_operator.domain.manifests import DEFAULT_IMAGE

    root = Path(__file__).resolve().parents[4] / "examples"
    seen = 0
    for path in sorted(root.rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not isinstance(doc, dict) or doc.get("kind") not in (
                "BenchmarkRun",
                "BenchmarkSchedule",
            ):
                continue
            data = doc["spec"] if doc["kind"] == "BenchmarkRun" else doc["spec"]["template"]
            ns = doc["metadata"].get("namespace", "default")
            # A custom workload needs its setting: its example says so at the top.
            custom = "customWorkloads" in data
            if custom:
                assert "TIDB_BENCH_ALLOW_CUSTOM_WORKLOADS=true" in path.read_text(), path
            reach = Reach(custom_workloads=custom)
            assert refusal(parse_run_spec(data), ns, reach, DEFAULT_IMAGE) is None, path
            seen += 1
    assert seen >= 6
