"""TLS: detection from v1/v2 cluster objects, the Secrets a run uses, and the messages."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tidb_bench_operator.domain.api.resources import parse_run_spec
from tidb_bench_operator.domain.cluster.readers import read_tidb_cluster, read_v2_cluster
from tidb_bench_operator.domain.cluster.tls import (
    MYSQL_TLS_DIR,
    describe_tls_failure,
    pd_ctl_tls_flags,
    pd_tls_dir,
    pd_url_with_tls,
    plain_refused_hint,
    resolve_tls,
    secret_keys_missing,
    secret_not_found,
)
from tidb_bench_operator.domain.manifests import (
    RunRef,
    build_dataset_runner_args,
    build_runner_job,
    build_step_runner_args,
    compute_endpoint,
)
from tidb_bench_operator.errors import SpecError

NS = "tidb-cluster"
V2 = Path(__file__).resolve().parents[3] / "data" / "vendor" / "tidb-operator-v2.0.1"


def tidb_cluster(*, cluster_tls: bool = False, mysql_tls: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "version": "v8.1.0",
        "pd": {"replicas": 3},
        "tikv": {"replicas": 3},
        "tidb": {"replicas": 2, "service": {"type": "ClusterIP"}},
    }
    if cluster_tls:
        spec["tlsCluster"] = {"enabled": True}
    if mysql_tls:
        spec["tidb"]["tlsClient"] = {"enabled": True}
    return {"kind": "TidbCluster", "metadata": {"name": "basic", "namespace": NS}, "spec": spec}


def v2_example(
    *, cluster_tls: bool = False, mysql_tls: bool = False
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    docs = [yaml.safe_load(p.read_text()) for p in sorted((V2 / "examples/basic").glob("*.yaml"))]
    for d in docs:
        d["metadata"]["namespace"] = NS
    cluster, groups = docs[0], docs[1:]
    if cluster_tls:
        cluster.setdefault("spec", {})["tlsCluster"] = {"enabled": True}
    if mysql_tls:
        tidb = next(g for g in groups if g["kind"] == "TiDBGroup")
        tidb["spec"]["template"]["spec"]["security"] = {"tls": {"mysql": {"enabled": True}}}
    return cluster, groups


def run_spec(**overrides: Any) -> Any:
    data: dict[str, Any] = {
        "cluster": {"name": "basic"},
        "credentials": {"secretRef": {"name": "db"}},
    }
    data.update(overrides)
    return parse_run_spec(data)


# ---------------------------------------------------------------------- detection


def test_a_tidbcluster_without_tls_is_plain_and_pd_stays_http() -> None:
    view = read_tidb_cluster(tidb_cluster())
    assert (view.tls.cluster, view.tls.mysql) == (False, False)
    assert view.pd_url == f"http://basic-pd.{NS}:2379"
    assert resolve_tls(run_spec(), view).pd is None
    assert resolve_tls(run_spec(), view).mysql is None


def test_a_tidbcluster_with_tls_names_tidb_operators_client_secrets_and_pd_is_https() -> None:
    view = read_tidb_cluster(tidb_cluster(cluster_tls=True, mysql_tls=True))
    assert (view.tls.cluster, view.tls.mysql) == (True, True)
    assert view.pd_url == f"https://basic-pd.{NS}:2379"
    secrets = resolve_tls(run_spec(), view)
    assert (secrets.pd, secrets.mysql) == (
        "basic-cluster-client-secret",
        "basic-tidb-client-secret",
    )
    assert secrets.notes == ()


def test_v1_mysql_tls_alone_uses_only_the_tidb_client_secret() -> None:
    view = read_tidb_cluster(tidb_cluster(mysql_tls=True))
    secrets = resolve_tls(run_spec(), view)
    assert (secrets.pd, secrets.mysql) == (None, "basic-tidb-client-secret")


def test_a_v2_cluster_reads_tls_cluster_and_the_tidb_groups_mysql_tls() -> None:
    cluster, groups = v2_example(cluster_tls=True, mysql_tls=True)
    view = read_v2_cluster(cluster, groups)
    assert (view.tls.cluster, view.tls.mysql) == (True, True)
    assert view.pd_url == f"https://pd-pd.{NS}:2379"
    secrets = resolve_tls(run_spec(), view)
    # v2: the cluster client Secret by cluster name, the MySQL one by TiDBGroup name.
    assert (secrets.pd, secrets.mysql) == ("basic-cluster-client-secret", "tidb-tidb-client-secret")


def test_v2_mysql_tls_is_the_chosen_tidb_groups_own_setting() -> None:
    cluster, groups = v2_example(mysql_tls=True)
    other = copy.deepcopy(next(g for g in groups if g["kind"] == "TiDBGroup"))
    other["metadata"]["name"] = "analytics"
    other["spec"]["template"]["spec"].pop("security")
    view = read_v2_cluster(cluster, [*groups, other], tidb_group="analytics")
    assert (
        view.tls.mysql is False and view.tls.mysql_client_secret == "analytics-tidb-client-secret"
    )
    view = read_v2_cluster(cluster, [*groups, other], tidb_group="tidb")
    assert view.tls.mysql is True and view.tls.mysql_client_secret == "tidb-tidb-client-secret"


# ---------------------------------------------------------------------- the spec


def test_explicit_secret_refs_win_over_tidb_operators_names() -> None:
    view = read_tidb_cluster(tidb_cluster(cluster_tls=True, mysql_tls=True))
    spec = run_spec(
        tls={
            "cluster": {"secretRef": {"name": "pd-certs"}},
            "mysql": {"secretRef": {"name": "sql"}},
        }
    )
    secrets = resolve_tls(spec, view)
    assert (secrets.pd, secrets.mysql) == ("pd-certs", "sql")


def test_the_spec_can_turn_tls_on_for_a_cluster_that_does_not_say_so() -> None:
    view = read_tidb_cluster(tidb_cluster())
    secrets = resolve_tls(run_spec(tls={"mysql": {"enabled": True}}), view)
    assert (secrets.pd, secrets.mysql) == (None, "basic-tidb-client-secret")


def test_turning_tls_off_against_a_tls_cluster_is_obeyed_with_a_warning_note() -> None:
    view = read_tidb_cluster(tidb_cluster(cluster_tls=True, mysql_tls=True))
    secrets = resolve_tls(run_spec(tls={"mysql": {"enabled": False}}), view)
    assert secrets.mysql is None and secrets.pd == "basic-cluster-client-secret"
    assert secrets.notes == (
        f"TidbCluster {NS}/basic turns TLS on (mysql) but spec.tls.mysql.enabled is false: "
        "connections will be plain and a server that requires TLS refuses them",
    )


def test_a_target_only_run_needs_a_secret_ref_to_use_tls() -> None:
    spec = run_spec(cluster=None, target={"host": "tidb.example"}, tls={"mysql": {"enabled": True}})
    with pytest.raises(SpecError) as err:
        resolve_tls(spec, None)
    assert str(err.value).startswith("spec.tls.mysql.secretRef: TLS is on for the MySQL client")
    assert "set spec.tls.mysql.secretRef.name to a Secret with keys ca.crt, tls.crt, tls.key" in (
        str(err.value)
    )
    spec = run_spec(
        cluster=None,
        target={"host": "tidb.example"},
        tls={"mysql": {"enabled": True, "secretRef": {"name": "sql"}}},
    )
    assert resolve_tls(spec, None).mysql == "sql"
    # Unset `enabled` with only a target: plain, as before.
    assert resolve_tls(run_spec(cluster=None, target={"host": "h"}), None).mysql is None


def test_pd_url_turns_https_only_when_the_client_certificate_is_used() -> None:
    assert pd_url_with_tls("http://basic-pd.ns:2379", True) == "https://basic-pd.ns:2379"
    assert pd_url_with_tls("http://basic-pd.ns:2379", False) == "http://basic-pd.ns:2379"
    assert pd_url_with_tls("https://pd:2379", True) == "https://pd:2379"
    assert pd_url_with_tls(None, True) is None


# ---------------------------------------------------------------------- messages


def test_a_missing_secret_names_it_and_gives_the_kubectl_line() -> None:
    text = secret_not_found("mysql", run_spec(), "bench", "basic-tidb-client-secret", "bench")
    assert text == (
        "spec.tls.mysql.secretRef.name (unset: TiDB Operator's name): Secret "
        "'basic-tidb-client-secret' with the MySQL client certificate (TLS to TiDB) not found in "
        "namespace 'bench'; create it from the client certificate, its key and the CA: "
        "kubectl -n bench create secret generic basic-tidb-client-secret "
        "--from-file=ca.crt=<ca.crt> --from-file=tls.crt=<tls.crt> --from-file=tls.key=<tls.key>"
    )


def test_a_secret_of_a_cluster_in_another_namespace_says_to_copy_it() -> None:
    spec = run_spec(tls={"cluster": {"secretRef": {"name": "pd-certs"}}})
    text = secret_not_found("cluster", spec, "bench", "pd-certs", "tidb-cluster")
    assert text.startswith("spec.tls.cluster.secretRef.name: Secret 'pd-certs' with PD's client")
    assert "the cluster is in namespace 'tidb-cluster', but benchmark pods can mount only " in text
    assert "copy it into 'bench'" in text


def test_a_secret_without_tls_key_names_the_missing_key() -> None:
    text = secret_keys_missing("cluster", run_spec(), "bench", "c", {"ca.crt", "tls.crt"})
    assert text is not None
    assert "Secret bench/c has no key 'tls.key' (it has: ca.crt, tls.crt)" in text
    assert "kubectl -n bench create secret generic c --from-file=ca.crt=" in text
    assert (
        secret_keys_missing("cluster", run_spec(), "b", "c", {"ca.crt", "tls.crt", "tls.key"})
        is None
    )


def test_handshake_failures_are_named() -> None:
    verify = describe_tls_failure(
        peer="PD 10.0.0.1:2379",
        source="Secret ns/c",
        reason="CERTIFICATE_VERIFY_FAILED",
        verify_message="certificate has expired",
    )
    assert verify.startswith(
        "TLS to PD 10.0.0.1:2379: the server's certificate failed verification against ca.crt "
        "of Secret ns/c: certificate has expired"
    )
    expired = describe_tls_failure(
        peer="db:4000", source="Secret ns/m", reason="SSLV3_ALERT_CERTIFICATE_EXPIRED",
        verify_message=None,
    )  # fmt: skip
    assert "the server says our client certificate has expired" in expired
    unknown = describe_tls_failure(
        peer="db:4000", source=None, reason="TLSV1_ALERT_UNKNOWN_CA", verify_message=None
    )
    assert "the server does not trust the CA that signed our client certificate" in unknown
    closed = describe_tls_failure(
        peer="db:4000", source="Secret ns/m", verify_message=None,
        reason="EOF occurred in violation of protocol (_ssl.c:2427)",
    )  # fmt: skip
    assert "most often because it refused our client certificate" in closed
    mismatch = describe_tls_failure(
        peer="", source="Secret ns/m", reason="KEY_VALUES_MISMATCH", verify_message=None
    )
    assert mismatch == (
        "Secret ns/m: tls.key is not the key of tls.crt (KEY_VALUES_MISMATCH); put the matching "
        "pair in it"
    )


def test_a_server_requiring_tls_while_the_run_is_plain_says_what_to_set() -> None:
    text = (
        "Connections using insecure transport are prohibited while --require_secure_transport=ON."
    )
    hint = plain_refused_hint(3159, text, tls_used=False)
    assert hint is not None and hint.startswith("the server requires TLS but this run connects")
    assert "spec.tls.mysql.enabled: true" in hint
    assert plain_refused_hint(3159, text, tls_used=True) is None
    denied = plain_refused_hint(1045, "Access denied", tls_used=False)
    assert denied is not None and "REQUIRE X509" in denied
    assert plain_refused_hint(1146, "no such table", tls_used=False) is None


# ---------------------------------------------------------------------- pd-ctl in the PD pod


def pd_pod(*mounts: tuple[str, str, str]) -> dict[str, Any]:
    """A PD pod with (volume, secret, mount path) Secret mounts on its `pd` container."""
    return {
        "metadata": {"name": "basic-pd-0"},
        "spec": {
            "volumes": [{"name": v, "secret": {"secretName": s}} for v, s, _ in mounts]
            + [{"name": "data", "emptyDir": {}}],
            "containers": [
                {
                    "name": "pd",
                    "volumeMounts": [{"name": v, "mountPath": p} for v, _, p in mounts]
                    + [{"name": "data", "mountPath": "/var/lib/pd"}],
                }
            ],
        },
    }


def test_pd_ctl_uses_the_mounted_cluster_client_secret_else_pds_own() -> None:
    both = pd_pod(
        ("pd-tls", "basic-pd-cluster-secret", "/var/lib/pd-tls"),
        ("cluster-client-tls", "basic-cluster-client-secret", "/var/lib/cluster-client-tls"),
    )
    assert pd_tls_dir(both, "basic-cluster-client-secret", "pd") == "/var/lib/cluster-client-tls"
    server_only = pd_pod(("pd-tls", "basic-pd-cluster-secret", "/var/lib/pd-tls"))
    assert pd_tls_dir(server_only, "basic-cluster-client-secret", "pd") == "/var/lib/pd-tls"
    assert pd_tls_dir(pd_pod(), "basic-cluster-client-secret", "pd") is None
    assert pd_ctl_tls_flags("/var/lib/pd-tls/") == [
        "--cacert=/var/lib/pd-tls/ca.crt",
        "--cert=/var/lib/pd-tls/tls.crt",
        "--key=/var/lib/pd-tls/tls.key",
    ]


# ---------------------------------------------------------------------- the benchmark pods

RUN = RunRef("sweep", "bench", "uid-1")


def test_benchmark_pods_mount_the_mysql_secret_read_only_and_pass_only_its_path() -> None:
    spec = run_spec()
    plain = compute_endpoint(spec, "bench")
    secured = plain.__class__(**{**plain.__dict__, "mysql_tls_secret": "basic-tidb-client-secret"})
    args = build_step_runner_args(
        spec, secured, workload="oltp_point_select", threads=4, start_at=None
    )
    assert f"--tls-dir={MYSQL_TLS_DIR}" in args
    prepare = build_dataset_runner_args(
        spec, secured, action="prepare", workload="oltp_point_select"
    )
    assert f"--tls-dir={MYSQL_TLS_DIR}" in prepare
    job = build_runner_job(
        RUN, spec, secured, name="sweep-s0-c0", role="step", runner_args=args,
        active_deadline_seconds=100, queue="cluster/tidb/basic",
    )  # fmt: skip
    pod = job["spec"]["template"]["spec"]
    assert {"name": "mysql-tls", "secret": {"secretName": "basic-tidb-client-secret",
            "defaultMode": 0o440}} in pod["volumes"]  # fmt: skip
    container = pod["containers"][0]
    assert {"name": "mysql-tls", "mountPath": MYSQL_TLS_DIR, "readOnly": True} in container[
        "volumeMounts"
    ]
    assert pod["securityContext"]["fsGroup"] == 65532
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["automountServiceAccountToken"] is False
    # Without TLS nothing of it.
    plain_args = build_step_runner_args(
        spec, plain, workload="oltp_point_select", threads=4, start_at=None
    )
    plain_job = build_runner_job(
        RUN, spec, plain, name="sweep-s0-c0", role="step", runner_args=plain_args,
        active_deadline_seconds=100, queue="cluster/tidb/basic",
    )  # fmt: skip
    assert not any(a.startswith("--tls-dir") for a in plain_args)
    assert [v["name"] for v in plain_job["spec"]["template"]["spec"]["volumes"]] == ["tmp"]


def test_the_tls_example_parses_and_names_the_operators_secret() -> None:
    doc = yaml.safe_load((V2.parents[3] / "examples" / "tls-cluster-sweep.yaml").read_text())
    spec = parse_run_spec(doc["spec"])
    view = read_tidb_cluster(tidb_cluster(cluster_tls=True, mysql_tls=True))
    secrets = resolve_tls(spec, view)
    assert (secrets.pd, secrets.mysql) == (
        "basic-cluster-client-secret",
        "basic-tidb-client-secret",
    )


def test_mysql_ssl_in_extra_args_points_to_spec_tls() -> None:
    with pytest.raises(SpecError) as err:
        run_spec(extraArgs=["--mysql-ssl=on"]).validate_semantics()
    assert str(err.value).startswith("spec.extraArgs[0]: --mysql-ssl is set by the controller")
    assert "tls.mysql" in str(err.value)
