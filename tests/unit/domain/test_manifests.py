"""The pure manifest builders, compared with golden YAML in tests/data/golden/.

A builder change shows up as a reviewable diff of the golden file. To accept one on purpose:
    UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/domain/test_manifests.py
then read the diff and commit the files.
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tidb_bench_operator.domain.api.resources import parse_run_spec
from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
from tidb_bench_operator.domain.manifests import (
    PASSWORD_ENV,
    USER_ENV,
    Endpoint,
    RunRef,
    build_dataset_runner_args,
    build_event,
    build_results_configmap,
    build_runner_job,
    build_step_runner_args,
    compute_endpoint,
    label_value,
    object_name,
    step_job_name,
)

GOLDEN = Path(__file__).resolve().parents[2] / "data" / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
RUN = RunRef("point-select-sweep", "bench", "2f1c7d4e-8a61-4c3b-9d7e-5b0a6c1e9f30")
START = datetime(2024, 6, 1, 2, 0, 8, tzinfo=UTC)
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def assert_golden(name: str, manifest: dict[str, Any]) -> None:
    """`manifest` as YAML equals tests/data/golden/<name> (rewritten when UPDATE_GOLDEN=1)."""
    # Through JSON first: what the API server receives, and no YAML anchors for shared dicts.
    plain = json.loads(json.dumps(manifest))
    text = yaml.safe_dump(plain, sort_keys=False, default_flow_style=False, width=100)
    path = GOLDEN / name
    if UPDATE:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} is missing: run with UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(), f"{name} differs from its golden file (UPDATE_GOLDEN=1)"


def spec(**overrides: Any) -> BenchmarkRunSpec:
    data: dict[str, Any] = {
        "cluster": {"name": "basic", "namespace": "tidb-cluster"},
        "credentials": {"secretRef": {"name": "tidb-bench-credentials"}},
        "dataset": {"tables": 4, "tableSize": 10000},
        "threads": [64, 128],
        "durationSeconds": 60,
    }
    data.update(overrides)
    return parse_run_spec(data)


# --- Jobs ---------------------------------------------------------------------------------------


def step_job(s: BenchmarkRunSpec, *, step: int = 2, client: int = 1) -> dict[str, Any]:
    ep = compute_endpoint(s, RUN.namespace)
    args = build_step_runner_args(s, ep, workload="oltp_point_select", threads=128, start_at=START)
    return build_runner_job(
        RUN, s, ep, name=step_job_name(RUN.name, step, client), role="step", runner_args=args,
        step=step, client=client, active_deadline_seconds=668, queue="cluster/tidb/basic",
    )  # fmt: skip


def test_a_step_job_with_required_anti_affinity_tolerations_and_node_selector() -> None:
    s = spec(
        clients=2,
        warmupSeconds=10,
        randType="uniform",
        ignoreErrors="1062,2013",
        extraArgs=["--range-size=5"],
        placement={
            "nodeSelector": {"tidbbench.io/bench-node": "true"},
            "tolerations": [
                {"key": "tidbbench.io/bench", "operator": "Exists", "effect": "NoSchedule"}
            ],
            "antiAffinity": "Required",
        },
        resources={"requests": {"cpu": 4, "memory": "2Gi"}, "limits": {"memory": "4Gi"}},
    )
    assert_golden("runner-job-step-required.yaml", step_job(s))


def test_a_prepare_job_with_preferred_anti_affinity() -> None:
    s = spec(placement={"antiAffinity": "Preferred"}, image="registry.local/tidb-bench:dev")
    ep = compute_endpoint(s, RUN.namespace)
    args = build_dataset_runner_args(s, ep, action="prepare", workload="oltp_point_select")
    job = build_runner_job(
        RUN, s, ep, name=object_name(RUN.name, "prepare"), role="prepare", runner_args=args,
        active_deadline_seconds=21600, queue="cluster/tidb/basic",
    )  # fmt: skip
    assert_golden("runner-job-prepare-preferred.yaml", job)


def test_a_step_job_against_a_plain_target_with_anti_affinity_off() -> None:
    s = spec(
        cluster=None,
        target={"host": "tidb.example.internal", "port": 4001},
        placement={"antiAffinity": "Off"},
        dataset={"tables": 1, "tableSize": 1000, "autoInc": False},
    )
    job = step_job(s, step=0, client=0)
    assert_golden("runner-job-step-off-target.yaml", job)
    assert "affinity" not in job["spec"]["template"]["spec"]


def test_required_anti_affinity_keeps_clients_off_database_pods_and_off_each_other() -> None:
    job = step_job(spec(clients=2))
    terms = job["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    db, peers = terms
    assert db["labelSelector"]["matchLabels"] == {"app.kubernetes.io/instance": "basic"}
    assert db["labelSelector"]["matchExpressions"][0]["values"] == ["pd", "tikv", "tidb"]
    assert db["namespaces"] == ["tidb-cluster"]
    assert peers["labelSelector"]["matchLabels"] == {
        "tidbbench.io/run": RUN.name,
        "tidbbench.io/step": "2",
    }
    assert {t["topologyKey"] for t in terms} == {"kubernetes.io/hostname"}


def test_a_job_carries_no_password_only_secret_key_references() -> None:
    password = "hunter2-the-real-one"
    s = spec(credentials={"secretRef": {"name": "creds"}, "userKey": "u", "passwordKey": "p"})
    job = step_job(s)
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["env"] == [
        {"name": USER_ENV, "valueFrom": {"secretKeyRef": {"name": "creds", "key": "u"}}},
        {"name": PASSWORD_ENV, "valueFrom": {"secretKeyRef": {"name": "creds", "key": "p"}}},
    ]
    assert all("value" not in e for e in container["env"])
    assert not any("password" in a.lower() for a in container["args"] + container["command"])
    assert password not in json.dumps(job)


def test_a_job_is_owned_by_its_run_and_labelled_for_selection() -> None:
    job = step_job(spec())
    meta = job["metadata"]
    assert meta["ownerReferences"][0]["uid"] == RUN.uid
    assert meta["ownerReferences"][0]["controller"] is True
    assert meta["labels"]["tidbbench.io/run"] == RUN.name
    assert meta["labels"]["tidbbench.io/step"] == "2"
    assert meta["labels"]["tidbbench.io/client"] == "1"
    assert job["spec"]["template"]["metadata"]["labels"] == meta["labels"]
    assert job["spec"]["backoffLimit"] == 0


LABEL_VALUE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def all_label_values(obj: Any) -> list[str]:
    """Every label value and matchLabels value anywhere in a manifest."""
    found: list[str] = []
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key in ("labels", "matchLabels") and isinstance(value, dict):
                found.extend(str(v) for v in value.values())
            else:
                found.extend(all_label_values(value))
    elif isinstance(obj, list):
        for item in obj:
            found.extend(all_label_values(item))
    return found


def test_a_run_name_longer_than_63_characters_still_gives_valid_labels() -> None:
    # The API server accepts names of 253 characters; label values stop at 63.
    long = RunRef("nightly-" + "point-select." * 19 + "sweep", "bench", RUN.uid)
    assert len(long.name) > 250
    s = spec(clients=2)
    ep = compute_endpoint(s, long.namespace)
    args = build_step_runner_args(s, ep, workload="oltp_point_select", threads=8, start_at=START)
    job = build_runner_job(
        long, s, ep, name=step_job_name(long.name, 0, 1), role="step", runner_args=args,
        step=0, client=1, active_deadline_seconds=100, queue="cluster/tidb/basic",
    )  # fmt: skip
    cm = build_results_configmap(long, object_name(long.name, "results"), {})
    values = all_label_values(job) + all_label_values(cm)
    assert label_value(long.name) in values
    for value in values:
        assert len(value) <= 63 and LABEL_VALUE.match(value), value
    # Selection is exact: the label names this run, and a run sharing its first 54
    # characters gets another value.
    twin = long.name[:-1] + "x"
    assert label_value(twin) != label_value(long.name)
    assert label_value(RUN.name) == RUN.name  # short names are left as they are
    assert job["metadata"]["ownerReferences"][0]["name"] == long.name


# --- ConfigMap and Event -----------------------------------------------------------------------


def test_the_results_configmap() -> None:
    steps = [{"index": 0, "workload": "oltp_point_select", "threads": 64, "qps": 50300.94}]
    data = {"format": "2", "steps.json": json.dumps(steps)}
    cm = build_results_configmap(RUN, object_name(RUN.name, "results"), data)
    assert_golden("results-configmap.yaml", cm)
    assert cm["data"] == data


def test_an_event_about_a_run() -> None:
    event = build_event(
        RUN, reason="StepSucceeded", message="step 1/2: oltp_point_select at 64 threads: 50,301 QPS",
        type_="Normal", now=START, name_suffix="stepsucceeded-5f1a2b3c4d5e6",
    )  # fmt: skip
    assert_golden("event.yaml", event)


def test_an_event_message_is_capped_at_1_kib() -> None:
    event = build_event(
        RUN, reason="StepFailed", message="x" * 5000, type_="Warning", now=START, name_suffix="a"
    )
    assert len(event["message"]) == 1024


# --- endpoints and names -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cluster", "target", "expected"),
    [
        (
            {"name": "basic", "namespace": "tidb-cluster"},
            None,
            Endpoint("basic-tidb.tidb-cluster", 4000, "http://basic-pd.tidb-cluster:2379", "basic", "tidb-cluster"),
        ),
        (
            {"name": "basic"},
            None,
            Endpoint("basic-tidb.bench", 4000, "http://basic-pd.bench:2379", "basic", "bench"),
        ),
        (
            {"name": "basic", "namespace": "tidb-cluster"},
            {"host": "10.0.0.7", "port": 4001},
            Endpoint("10.0.0.7", 4001, "http://basic-pd.tidb-cluster:2379", "basic", "tidb-cluster"),
        ),
        (
            {"name": "basic", "namespace": "tidb-cluster"},
            {"pdURL": "http://pd.example:2379"},
            Endpoint("basic-tidb.tidb-cluster", 4000, "http://pd.example:2379", "basic", "tidb-cluster"),
        ),
        (
            None,
            {"host": "127.0.0.1", "port": 4000},
            Endpoint("127.0.0.1", 4000, None, None, "bench"),
        ),
    ],
    ids=[
        "cluster only: the operator's Service names",
        "cluster without a namespace: the run's namespace",
        "target host and port override the derived TiDB address",
        "target pdURL overrides the derived PD address",
        "target only: no PD unless given",
    ],
)  # fmt: skip
def test_compute_endpoint(cluster: Any, target: Any, expected: Endpoint) -> None:
    s = spec(cluster=cluster, target=target)
    assert compute_endpoint(s, "bench") == expected


def test_a_short_object_name_is_the_parts_joined() -> None:
    assert object_name("sweep", "s0", "c1") == "sweep-s0-c1"
    assert step_job_name("sweep", 3, 0) == "sweep-s3-c0"


def test_a_long_object_name_is_cut_to_63_with_a_stable_hash_suffix() -> None:
    run = "nightly-point-select-sweep-against-the-production-like-staging-cluster"
    a, b = step_job_name(run, 10, 0), step_job_name(run, 10, 1)
    assert len(a) == len(b) == 63
    assert a != b, "names that differ only past the cut still differ"
    assert a == step_job_name(run, 10, 0), "deterministic: a restart finds the same Job"
    assert re.fullmatch(r"nightly-point-select-sweep-against-the-production-like-[0-9a-f]{8}", a)
    assert DNS_LABEL.match(a) and DNS_LABEL.match(b)


def test_a_cut_that_ends_on_a_dash_still_gives_a_dns_label() -> None:
    name = object_name("a" * 53 + "-" + "b" * 20)
    assert DNS_LABEL.match(name)
    assert len(name) <= 63


def test_a_single_client_step_has_no_rendezvous_so_it_cannot_start_late() -> None:
    s = spec(clients=1)
    ep = compute_endpoint(s, RUN.namespace)
    alone = build_step_runner_args(s, ep, workload="oltp_point_select", threads=8, start_at=None)
    assert not any(a.startswith(("--start-at=", "--max-start-skew=")) for a in alone)
    together = build_step_runner_args(
        s, ep, workload="oltp_point_select", threads=8, start_at=START
    )
    assert f"--start-at={START.isoformat()}" in together
