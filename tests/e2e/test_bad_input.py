"""Every bad input of docs/bad-input.md's tables, tried on the test bed: what the user sees,
and that nothing was created.

Schema errors come back from the real API server as 422 on apply. Semantic errors (what an
OpenAPI schema cannot say) fail the run at once with a Failed condition naming the field,
before any Job, ConfigMap or ServiceAccount exists. The controller runs as deploy/'s
ServiceAccount, as in production.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.conftest import Controller
from testbed.cluster import REPO_ROOT, Testbed
from testbed.deploy import (
    RUNNER_SA,
    delete_namespace,
    install,
    operator_kubeconfig,
    run_namespace,
    status_code,
    uninstall,
)
from testbed.runs import (
    GROUP,
    PLURAL,
    VERSION,
    create_run,
    jobs_of,
    run_events,
    run_manifest,
)

# On one xdist worker with the other files that install deploy/ (SHARED in conftest.py).
pytestmark = pytest.mark.e2e

DOC = REPO_ROOT / "docs" / "bad-input.md"

# (id, spec changes (None removes a field), what the API server's 422 message says)
SCHEMA_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("workload-not-a-name", {"workloads": ["oltp point select"]},
     "spec.workloads in body should match '^[a-z][a-z0-9_-]{0,62}$'"),
    ("threads-empty", {"threads": []}, "spec.threads in body should have at least 1 items"),
    ("threads-zero", {"threads": [0]}, "spec.threads in body should be greater than or equal to 1"),
    ("threads-absurd", {"threads": [100000]},
     "spec.threads in body should be less than or equal to 4096"),
    ("credentials-missing", {"credentials": None}, "spec.credentials: Required value"),
    ("plain-password", {"credentials": {"password": "hunter2"}},
     "spec.credentials.secretRef: Required value"),
    ("extra-arg-not-an-option", {"extraArgs": ["--config-file /etc/passwd"]},
     'spec.extraArgs in body should match \'^--[A-Za-z][A-Za-z0-9_-]*(=.*)?$\''),
    ("clients-zero", {"clients": 0}, "spec.clients in body should be greater than or equal to 1"),
    ("duration-zero", {"durationSeconds": 0},
     "spec.durationSeconds in body should be greater than or equal to 1"),
    ("percentile-101", {"percentile": 101},
     "spec.percentile in body should be less than or equal to 100"),
    ("policy-unknown", {"preflight": {"policy": "Sometimes"}},
     'spec.preflight.policy: Unsupported value: "Sometimes": supported values: "Enforce", '
     '"Warn", "Off"'),
    ("port-out-of-range", {"target": {"host": "tidb", "port": 70000}},
     "spec.target.port in body should be less than or equal to 65535"),
    ("database-injection", {"database": "sbtest; DROP DATABASE x"},
     "spec.database in body should match '^[A-Za-z_][A-Za-z0-9_]*$'"),
    ("secret-name-invalid", {"credentials": {"secretRef": {"name": "Bad_Name"}}},
     "spec.credentials.secretRef.name in body should match"),
    ("ignore-errors-injection", {"ignoreErrors": "1062; rm"},
     "spec.ignoreErrors in body should match '^(all|[0-9]+(,[0-9]+)*)$'"),
]  # fmt: skip

# (id, spec changes, Failed condition reason, what its message says)
SEMANTIC_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("no-cluster-no-target", {"target": None}, "InvalidSpec",
     "spec.cluster: neither cluster nor target.host is set, so there is nothing to benchmark "
     "(set cluster.name to a TidbCluster, or target.host to a TiDB address)"),
    ("target-without-host", {"target": {"port": 4000}}, "InvalidSpec",
     "spec.cluster: neither cluster nor target.host is set"),
    ("unknown-workload", {"workloads": ["oltp_pointselect"]}, "InvalidSpec",
     "spec.workloads[0]: unknown workload 'oltp_pointselect' (one of sysbench's tests "
     "(oltp_point_select, oltp_read_only, "),
    ("custom-arg-not-in-options",
     {"workloads": ["tpcc"], "customWorkloads": [
         {"name": "tpcc", "configMapRef": {"name": "tpcc"}, "script": "tpcc.lua",
          "options": {"tables": "int"}, "args": ["--scale=10"]}]},
     "InvalidSpec",
     "spec.customWorkloads[0].args[0]: --scale is not in this workload's options (declare it "
     "in options, or use one of: "),
    ("custom-option-owned",
     {"workloads": ["tpcc"], "customWorkloads": [
         {"name": "tpcc", "configMapRef": {"name": "tpcc"}, "script": "tpcc.lua",
          "options": {"mysql-host": "word"}}]},
     "InvalidSpec",
     "spec.customWorkloads[0].options.mysql-host: --mysql-host is set by the controller (use "
     "spec.target.host instead, and remove it from options)"),
    ("duplicate-threads", {"threads": [2, 4, 2]}, "InvalidSpec",
     "spec.threads[2]: 2 is listed twice (each value runs once; remove it)"),
    ("extra-arg-mysql-host", {"extraArgs": ["--mysql-host=evil"]}, "InvalidSpec",
     "spec.extraArgs[0]: --mysql-host is set by the controller (use spec.target.host instead)"),
    ("extra-arg-password", {"extraArgs": ["--mysql-password=x"]}, "InvalidSpec",
     "spec.extraArgs[0]: --mysql-password is set by the controller "
     "(use spec.credentials.passwordKey instead)"),
    ("extra-arg-config-file", {"extraArgs": ["--config-file=/etc/passwd"]}, "InvalidSpec",
     "spec.extraArgs[0]: --config-file is not allowed (allowed: --create-secondary"),
    ("extra-arg-shell", {"extraArgs": ["--range-size=1; rm -rf /"]}, "InvalidSpec",
     "spec.extraArgs[0]: value '1; rm -rf /' contains characters other than letters, digits "
     "and _.,:+/%-"),
    ("extra-arg-bad-number", {"extraArgs": ["--range-size=lots"]}, "InvalidSpec",
     "spec.extraArgs[0]: --range-size must be a non-negative integer, got 'lots'"),
    ("same-user-and-password-key",
     {"credentials": {"secretRef": {"name": "db"}, "userKey": "user", "passwordKey": "user"}},
     "InvalidSpec", "spec.credentials.passwordKey: same Secret key as userKey ('user')"),
    ("report-interval-over-duration", {"durationSeconds": 3, "reportIntervalSeconds": 10},
     "InvalidSpec", "spec.reportIntervalSeconds: 10s is longer than durationSeconds (3s)"),
    ("bulk-insert-mixed", {"workloads": ["bulk_insert", "oltp_point_select"]}, "InvalidSpec",
     "spec.workloads: bulk_insert cannot share a run with other workloads"),
    ("toleration-exists-with-value",
     {"placement": {"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}},
     "InvalidSpec",
     "spec.placement.tolerations[0].value: must be empty when operator is Exists"),
    ("secret-missing", {"credentials": {"secretRef": {"name": "nope"}}}, "SecretNotFound",
     "spec.credentials.secretRef.name: Secret 'nope' not found in namespace"),
    ("secret-key-missing",
     {"credentials": {"secretRef": {"name": "db"}, "passwordKey": "pass"}}, "SecretKeyMissing",
     "spec.credentials.passwordKey: Secret {ns}/db has no key 'pass' (it has: password, user)"),
    ("bench-node-selector-matches-nothing",
     {"placement": {"nodeSelector": {"tidbbench.io/bench-node": "nowhere"}}}, "NoBenchNode",
     "spec.placement.nodeSelector {tidbbench.io/bench-node=nowhere} matches no node; label the "
     "dedicated benchmark node: kubectl label node <node> tidbbench.io/bench-node=nowhere"),
    ("too-few-bench-nodes", {"clients": 5}, "TooFewBenchNodes",
     "spec.clients: 5 clients, 1 eligible benchmark node(s) (node1)"),
]  # fmt: skip


def bad_run(name: str, mariadb: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    body = run_manifest(name, mariadb)
    for key, value in copy.deepcopy(changes).items():
        if value is None:
            body["spec"].pop(key, None)
        else:
            body["spec"][key] = value
    return body


@pytest.fixture(scope="module")
def bad_ns(
    testbed: Testbed,
    core: client.CoreV1Api,
    mariadb: dict[str, Any],
    crds: None,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    """An enabled namespace with Secret `db`, watched by the controller as deploy/'s SA."""
    uninstall(testbed)
    install(testbed)
    ns = run_namespace(testbed, "tbbad", mariadb)
    kubeconfig = operator_kubeconfig(testbed, tmp_path_factory.mktemp("sa") / "kubeconfig")
    ctl = Controller(
        testbed, kubeconfig, testbed.logs / f"controller-deploy-{ns}.log",
        {"TIDB_BENCH_LIVENESS": ""}, namespaces=(ns,),
    )  # fmt: skip
    ctl.start()
    yield ns
    ctl.stop()
    delete_namespace(testbed, ns)
    uninstall(testbed)


@pytest.mark.parametrize(
    ("case", "changes", "message"), SCHEMA_CASES, ids=[c[0] for c in SCHEMA_CASES]
)
def test_a_schema_error_is_rejected_at_apply_with_422_and_the_api_servers_message(
    api: client.ApiClient,
    mariadb: dict[str, Any],
    bad_ns: str,
    case: str,
    changes: dict[str, Any],
    message: str,
) -> None:
    body = bad_run(case, mariadb, changes)
    with pytest.raises(ApiException) as err:
        create_run(api, bad_ns, body)
    assert err.value.status == 422
    text = json.loads(err.value.body)["message"]
    assert text.startswith(f'BenchmarkRun.tidbbench.io "{case}" is invalid: '), text
    assert message in text
    assert (
        status_code(
            lambda: client.CustomObjectsApi(api).get_namespaced_custom_object(
                GROUP, VERSION, bad_ns, PLURAL, case
            )
        )
        == 404
    )


def test_every_semantic_error_fails_the_run_with_a_precise_condition_and_creates_nothing(
    api: client.ApiClient,
    core: client.CoreV1Api,
    mariadb: dict[str, Any],
    bad_ns: str,
) -> None:
    for case, changes, _, _ in SEMANTIC_CASES:
        create_run(api, bad_ns, bad_run(case, mariadb, changes))
    seen: dict[str, tuple[str, str, str]] = {}
    for case, _, _, _ in SEMANTIC_CASES:
        run = _wait_failed(api, bad_ns, case)
        failed = next(c for c in run["status"]["conditions"] if c["type"] == "Failed")
        warning = [e for e in run_events(core, bad_ns, case) if e.type == "Warning"]
        seen[case] = (failed["reason"], failed["message"], warning[-1].reason if warning else "")
    for case, _, reason, message in SEMANTIC_CASES:
        got_reason, got_message, event_reason = seen[case]
        assert (got_reason, event_reason) == (reason, reason), (case, seen[case])
        assert message.replace("{ns}", bad_ns) in got_message, (case, got_message)
    # Nothing was created for any of them: no Job (so no sysbench argv at all), no results
    # ConfigMap, not even the runner ServiceAccount a good run would bring.
    assert client.BatchV1Api(api).list_namespaced_job(bad_ns).items == []
    cms = core.list_namespaced_config_map(bad_ns, label_selector="tidbbench.io/run").items
    assert cms == []
    assert status_code(lambda: core.read_namespaced_service_account(RUNNER_SA, bad_ns)) == 404
    for case, _, _, _ in SEMANTIC_CASES:
        assert jobs_of(api, bad_ns, case) == []


def _wait_failed(api: client.ApiClient, ns: str, name: str) -> dict[str, Any]:
    from testbed.runs import wait_run

    run = wait_run(
        api, ns, name, phases=("Failed", "Succeeded", "Preflight", "Running"), timeout=60
    )
    assert run["status"]["phase"] == "Failed", (name, run["status"])
    return run


def test_docs_bad_input_has_a_row_for_every_case_tested_here_and_in_test_deploy() -> None:
    doc = Path(DOC).read_text()
    rows = [line for line in doc.splitlines() if line.startswith("| ")]
    assert len(rows) >= 2 + 12
    for case, *_ in SCHEMA_CASES + SEMANTIC_CASES:
        assert f"`{case}`" in doc, f"docs/bad-input.md has no row for {case}"
    assert "`namespace-not-enabled`" in doc  # tests/e2e/test_deploy.py
