"""Pending: what the schema cannot check (Secret, bench node), and one run per cluster.

Driven through an in-memory Kubernetes and a fake clock (support.Bed).
"""

from __future__ import annotations

import pytest

from unit.reconcile.run.support import (
    BENCH_LABEL,
    CLUSTER_NS,
    JSON,
    NS,
    PASSWORD,
    SECRET,
    Bed,
    everything_written,
    run_body,
    run_spec,
)


def test_an_invalid_spec_fails_the_run_with_the_field_path_and_creates_no_job() -> None:
    bed = Bed(run_spec(threads=[8, 8]))
    bed.reconcile()
    st = bed.status
    assert st["phase"] == "Failed"
    assert st["message"].startswith("spec.threads[1]: 8 is listed twice")
    assert bed.condition("Failed")["reason"] == "InvalidSpec"
    assert bed.kube.create_job_calls == []
    assert bed.kube.event_reasons() == ["InvalidSpec"]
    assert bed.kube.events[0]["type"] == "Warning"


def test_an_unknown_spec_field_is_named_in_the_failure() -> None:
    bed = Bed(run_spec(placement={"nodeSelectr": BENCH_LABEL}))
    bed.reconcile()
    assert bed.status["phase"] == "Failed"
    assert bed.status["message"].startswith("spec.placement.nodeSelectr: ")
    assert bed.kube.create_job_calls == []


def test_a_missing_secret_fails_with_the_command_that_creates_it() -> None:
    bed = Bed(with_secret=False)
    bed.reconcile()
    bed.failed_with("SecretNotFound")
    assert bed.status["message"] == (
        "spec.credentials.secretRef.name: Secret 'bench-creds' not found in namespace 'bench'; "
        "create it: kubectl -n bench create secret generic bench-creds "
        "--from-literal=user=<user> --from-literal=password=<password>"
    )
    assert bed.kube.create_job_calls == []
    assert bed.preflight.calls == []


def test_a_secret_without_the_password_key_fails_naming_the_key_and_the_keys_it_has() -> None:
    bed = Bed(with_secret=False)
    bed.kube.add_secret(NS, SECRET, {"user": "bench", "pass": PASSWORD})
    bed.reconcile()
    bed.failed_with("SecretKeyMissing")
    assert bed.status["message"] == (
        "spec.credentials.passwordKey: Secret bench/bench-creds has no key 'password' "
        "(it has: pass, user); add the key or set spec.credentials.passwordKey to one of those"
    )
    assert PASSWORD not in everything_written(bed)


def test_custom_secret_keys_are_the_ones_looked_for() -> None:
    spec = run_spec(credentials={"secretRef": {"name": SECRET}, "userKey": "u", "passwordKey": "p"})
    bed = Bed(spec, with_secret=False)
    bed.kube.add_secret(NS, SECRET, {"user": "bench", "password": PASSWORD})
    bed.reconcile()
    assert bed.status["message"].startswith(
        "spec.credentials.userKey: Secret bench/bench-creds has no key 'u'"
    )


def test_a_node_selector_matching_no_node_fails_with_no_bench_node() -> None:
    bed = Bed(run_spec(placement={"nodeSelector": {"tidbbench.io/bench-node": "yes"}}))
    bed.reconcile()
    bed.failed_with("NoBenchNode")
    assert bed.status["message"] == (
        "spec.placement.nodeSelector {tidbbench.io/bench-node=yes} matches no node; label the "
        "dedicated benchmark node: kubectl label node <node> tidbbench.io/bench-node=yes"
    )
    assert bed.kube.create_job_calls == []


@pytest.mark.parametrize("policy", ["Enforce", "Warn", "Off"])
def test_more_clients_than_eligible_bench_nodes_fails_at_pending_under_every_policy(
    policy: str,
) -> None:
    bed = Bed(run_spec(clients=5, preflight={"policy": policy, "timeoutSeconds": 60}))
    bed.reconcile()
    bed.failed_with("TooFewBenchNodes")
    assert bed.status["message"].startswith(
        "spec.clients: 5 clients, 2 eligible benchmark node(s) (bench-1, bench-2) (others: "
        "db-1: labels do not match"
    ), bed.status["message"]
    assert "lower spec.clients" in bed.status["message"]
    assert bed.kube.create_job_calls == []


def test_a_bench_node_with_an_untolerated_taint_is_not_eligible_for_a_client() -> None:
    bed = Bed(run_spec(clients=2))
    bed.kube.node_list[-1]["spec"] = {
        "taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]
    }
    bed.reconcile()
    bed.failed_with("TooFewBenchNodes")
    assert "2 clients, 1 eligible benchmark node(s) (bench-1)" in bed.status["message"]
    assert "bench-2: untolerated taint dedicated=db:NoSchedule" in bed.status["message"]


def test_as_many_clients_as_eligible_bench_nodes_are_admitted() -> None:
    bed = Bed(run_spec(clients=2))
    bed.reconcile()
    assert bed.status["phase"] != "Failed", bed.status


def test_without_a_node_selector_any_node_will_do() -> None:
    bed = Bed(run_spec(placement={}))
    bed.reconcile()
    assert bed.status["phase"] == "Preparing"
    assert "Preflight" in bed.kube.event_reasons(), "the inputs passed: the run went on"


def test_an_older_pending_run_on_the_same_cluster_makes_a_newer_one_wait() -> None:
    bed = Bed()
    bed.kube.add_run(run_body("older", created="2024-06-01T00:00:00Z"))
    out = bed.reconcile()
    st = bed.status
    assert st["phase"] == "Pending"
    assert st["waitingFor"] == "bench/older"
    waiting = bed.condition("Waiting")
    assert (waiting["status"], waiting["reason"]) == ("True", "ClusterBusy")
    assert "bench/older" in waiting["message"]
    assert out.parked and out.requeue_seconds is None, "waits for the queue, not for a timer"
    assert bed.preflight.calls == []
    assert bed.kube.create_job_calls == []
    bed.reconcile()
    assert bed.kube.event_reasons().count("Waiting") == 1, "one Waiting event, not one per look"


def test_an_active_run_on_the_same_cluster_blocks_even_when_it_is_newer() -> None:
    bed = Bed()
    bed.kube.add_run(
        run_body(
            "newer", namespace="other", created="2024-06-01T05:00:00Z", status={"phase": "Running"}
        )
    )
    bed.reconcile()
    assert bed.status["waitingFor"] == "other/newer"


def test_a_newer_pending_run_does_not_block_an_older_one() -> None:
    bed = Bed()
    bed.kube.add_run(run_body("newer", created="2024-06-01T05:00:00Z"))
    bed.reconcile()
    assert bed.status["phase"] == "Preparing"
    assert "waitingFor" not in bed.status
    assert "Waiting" not in bed.kube.event_reasons()


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(
            run_body("elsewhere", spec=run_spec(cluster={"name": "other-tc", "namespace": CLUSTER_NS}),
                     created="2024-06-01T00:00:00Z", status={"phase": "Running"}),
            id="another TidbCluster",
        ),
        pytest.param(
            run_body("same-name-other-ns", spec=run_spec(cluster={"name": "basic", "namespace": "staging"}),
                     created="2024-06-01T00:00:00Z", status={"phase": "Running"}),
            id="a TidbCluster of the same name in another namespace",
        ),
        pytest.param(
            run_body("done", created="2024-06-01T00:00:00Z", status={"phase": "Succeeded"}),
            id="a finished run on the same cluster",
        ),
        pytest.param(
            run_body("broken", spec={"cluster": {"name": "basic"}, "threads": "many"},
                     created="2024-06-01T00:00:00Z"),
            id="an invalid run that will never measure",
        ),
    ],
)  # fmt: skip
def test_runs_that_cannot_interfere_do_not_block(other: JSON) -> None:
    bed = Bed()
    bed.kube.add_run(other)
    bed.reconcile()
    assert bed.status["phase"] == "Preparing"
    assert "waitingFor" not in bed.status


def test_explicit_targets_block_each_other_by_host_and_port() -> None:
    target = {"target": {"host": "10.0.0.5", "port": 4000}, "cluster": None}
    bed = Bed(run_spec(**target))
    bed.kube.add_run(run_body("same-host", run_spec(**target), status={"phase": "Preparing"}))
    bed.kube.add_run(
        run_body("other-port", run_spec(target={"host": "10.0.0.5", "port": 4001}, cluster=None),
                 status={"phase": "Running"})
    )  # fmt: skip
    bed.reconcile()
    assert bed.status["waitingFor"] == "bench/same-host"


def test_waiting_for_is_removed_with_a_merge_patch_null_once_the_blocker_finishes() -> None:
    bed = Bed()
    blocker = run_body("older", created="2024-06-01T00:00:00Z", status={"phase": "Running"})
    bed.kube.add_run(blocker)
    bed.reconcile()
    assert bed.status["waitingFor"] == "bench/older"

    blocker["status"] = {"phase": "Succeeded"}
    bed.kube.add_run(blocker)
    bed.clock.advance(5)
    out = bed.reconcile()
    assert "waitingFor" in out.status and out.status["waitingFor"] is None
    assert "waitingFor" not in bed.status
    assert bed.status["phase"] == "Preparing", "once free, the run goes on without waiting"
    waiting = bed.condition("Waiting")
    assert (waiting["status"], waiting["reason"]) == ("False", "ClusterFree")
    assert waiting["lastTransitionTime"] == "2024-06-01T02:00:05Z"


@pytest.mark.parametrize(
    ("password", "kind"),
    [
        ("new\nline", "a newline"),
        ("both\"quote'kinds", "both a double quote and a single quote"),
        ("x" * 239, "239 bytes of UTF-8, more than the 238"),
    ],
)
def test_a_password_sysbench_cannot_carry_fails_at_pending_by_its_kind(
    password: str, kind: str
) -> None:
    bed = Bed(with_secret=False)
    bed.kube.add_secret(NS, SECRET, {"user": "bench", "password": password})
    bed.reconcile()
    bed.failed_with("PasswordNotCarried")
    assert bed.status["message"].startswith(
        f"spec.credentials.passwordKey: the password in Secret bench/bench-creds key "
        f"'password' has {kind}"
    )
    assert password not in everything_written(bed)
    assert bed.kube.create_job_calls == []


@pytest.mark.parametrize("password", [" spaced out ", 'a"b', "a'b", "\\#=;", "pässwörd", "x" * 80])
def test_any_password_sysbench_can_carry_is_admitted(password: str) -> None:
    bed = Bed(with_secret=False)
    bed.kube.add_secret(NS, SECRET, {"user": "bench", "password": password})
    bed.reconcile()
    assert bed.status["phase"] != "Failed", bed.status.get("message")


TOKEN = "eyJhbGciOiJSUzI1NiJ9.prometheus-reader"


@pytest.mark.parametrize(
    ("field", "create"),
    [("bearerToken", "--from-literal=token=<bearer token>"),
     ("ca", "--from-file=token=<PEM CA bundle>")],
)  # fmt: skip
def test_a_missing_metrics_secret_fails_naming_the_field_and_how_to_create_it(
    field: str, create: str
) -> None:
    bed = Bed(run_spec(metrics={field: {"name": "prom", "key": "token"}}))
    bed.reconcile()
    bed.failed_with("SecretNotFound")
    assert bed.status["message"] == (
        f"spec.metrics.{field}.name: Secret 'prom' not found in namespace 'bench'; create it: "
        f"kubectl -n bench create secret generic prom {create}"
    )
    assert bed.kube.create_job_calls == []


def test_a_metrics_secret_without_its_key_fails_naming_the_keys_it_has_never_a_value() -> None:
    bed = Bed(run_spec(metrics={"bearerToken": {"name": "prom", "key": "token"},
                                "ca": {"name": "prom-ca", "key": "ca.crt"}}))  # fmt: skip
    bed.kube.add_secret(NS, "prom", {"token": TOKEN})
    bed.kube.add_secret(NS, "prom-ca", {"ca.pem": "-----BEGIN CERTIFICATE-----"})
    bed.reconcile()
    bed.failed_with("SecretKeyMissing")
    assert bed.status["message"] == (
        "spec.metrics.ca.key: Secret bench/prom-ca has no key 'ca.crt' (it has: ca.pem); add "
        "the key or set spec.metrics.ca.key to one of those"
    )
    assert TOKEN not in everything_written(bed)


def test_metrics_secrets_with_their_keys_are_admitted() -> None:
    bed = Bed(run_spec(metrics={"bearerToken": {"name": "prom", "key": "token"}}))
    bed.kube.add_secret(NS, "prom", {"token": TOKEN})
    bed.reconcile()
    assert bed.status["phase"] != "Failed", bed.status.get("message")
    assert TOKEN not in everything_written(bed)
