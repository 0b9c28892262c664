"""The stand-in TiDB Operator's pod template: placement and revision from a real-shaped spec."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from testbed.kube import TIDB_CRD_LOCAL
from testbed.standin_operator import component_labels, image_of, pod_template, revision_of

DATA = Path(__file__).resolve().parents[2] / "data" / "tidbcluster" / "field-story-variant.yaml"


def load() -> dict[str, Any]:
    return dict(yaml.safe_load(DATA.read_text()))


def unknown_keys(obj: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Keys of `obj` that the CRD's OpenAPI schema does not name."""
    out = []
    if isinstance(obj, dict):
        props = schema.get("properties")
        for k, v in obj.items():
            if props is not None:
                if k not in props:
                    out.append(f"{path}.{k}")
                    continue
                out += unknown_keys(v, props[k], f"{path}.{k}")
            elif "additionalProperties" in schema and isinstance(
                schema["additionalProperties"], dict
            ):
                out += unknown_keys(v, schema["additionalProperties"], f"{path}.{k}")
    elif isinstance(obj, list) and "items" in schema:
        for i, x in enumerate(obj):
            out += unknown_keys(x, schema["items"], f"{path}[{i}]")
    return out


def test_the_recorded_tidbcluster_uses_only_fields_of_tidb_operators_crd() -> None:
    crd = yaml.safe_load(TIDB_CRD_LOCAL.read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert unknown_keys(load()["spec"], schema["properties"]["spec"], "spec") == []


def test_a_tikv_pod_gets_the_components_spread_selector_and_tolerations_over_the_clusters() -> None:
    tpl = pod_template(load(), "tikv")
    spec = tpl["spec"]
    assert "nodeName" not in spec  # the scheduler decides
    assert spec["topologySpreadConstraints"] == [
        {
            "maxSkew": 2,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": component_labels("basic", "tikv")},
        }
    ]
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux", "disktype": "nvme"}
    assert [t["key"] for t in spec["tolerations"]] == ["node-role.kubernetes.io/control-plane"]
    assert spec["containers"][0]["image"] == "pingcap/tikv:v8.1.0"
    assert tpl["metadata"]["labels"]["app.kubernetes.io/component"] == "tikv"
    assert tpl["metadata"]["annotations"] == {"prometheus.io/scrape": "true"}


def test_without_its_own_constraints_a_component_takes_the_clusters_with_maxskew_1() -> None:
    spec = pod_template(load(), "pd")["spec"]
    assert spec["topologySpreadConstraints"][0]["maxSkew"] == 1
    assert spec["topologySpreadConstraints"][0]["labelSelector"]["matchLabels"] == (
        component_labels("basic", "pd")
    )
    assert [t["key"] for t in spec["tolerations"]] == ["dedicated"]
    assert "affinity" not in spec


def test_a_constraints_matchlabels_replace_the_generated_selector() -> None:
    tpl = pod_template(load(), "tidb")
    tsc = tpl["spec"]["topologySpreadConstraints"][0]
    assert tsc["labelSelector"] == {"matchLabels": {"app.kubernetes.io/instance": "basic"}}
    assert tpl["spec"]["affinity"]["podAntiAffinity"]
    assert image_of(load()["spec"], "tidb") == "pingcap/tidb:v8.1.1"
    assert tpl["metadata"]["annotations"]["testbed.tidbbench.io/cpu-of"] == "mariadb"


def test_config_version_annotations_and_tolerations_change_the_revision_replicas_do_not() -> None:
    base = load()

    def rev(tc: dict[str, Any]) -> str:
        return revision_of(pod_template(tc, "tikv"), tc["spec"]["tikv"].get("config"))

    changes = {
        "config": lambda s: s["tikv"]["config"].update({"raftstore": {"apply-pool-size": 4}}),
        "version": lambda s: s.update(version="v8.1.2"),
        "annotations": lambda s: s["tikv"].update(annotations={"restartedAt": "now"}),
        "tolerations": lambda s: s["tikv"].update(tolerations=[]),
    }
    for what, change in changes.items():
        tc = copy.deepcopy(base)
        change(tc["spec"])
        assert rev(tc) != rev(base), what
    scaled = copy.deepcopy(base)
    scaled["spec"]["tikv"]["replicas"] = 5
    assert rev(scaled) == rev(base)
