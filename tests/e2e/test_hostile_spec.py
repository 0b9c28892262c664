"""A hostile run author's specs, tried on the test bed: each is refused or harmless, and no
Secret value or foreign answer comes back through the controller (issue 24).

Every key of every Secret of the namespace holds a unique marker, and so does every answer of
a planted HTTP service (testbed/planted_http.py) that the PD URLs point at. After every case
has ended, the runs, schedules, Events, ConfigMaps, Jobs, pods, pod logs and the controller's
log (at debug verbosity) are searched for the markers, whole, base64 and JSON-escaped
(testbed/leaks.py): none may be found. Each case also names the reason it ended with.

The controller runs on the host, as in the other e2e suites, so it reaches the planted
service and the silent port on 127.0.0.1 as a controller in a cluster reaches any address of
its network.
"""

from __future__ import annotations

import json
import secrets
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.conftest import Controller
from testbed import leaks
from testbed.cluster import Testbed
from testbed.planted_http import planted_http, silent_port
from testbed.runs import GROUP, VERSION, create_run, get_run, jobs_of, run_manifest, wait_run

pytestmark = pytest.mark.e2e

TAG = secrets.token_hex(4)


def marker(what: str) -> str:
    """A value found nowhere by chance: letters, digits and `-` (a valid MySQL user, too)."""
    return f"mk-{what}-{TAG}-{secrets.token_hex(6)}"


FAKE_PEM = (
    "-----BEGIN PRIVATE KEY-----\n"
    + "\n".join(marker(f"pem{i}") + "AAAAAAAAAAAAAAAA" for i in range(3))
    + "\n-----END PRIVATE KEY-----\n"
)
#: Enforce with a short timeout: a failing check fails the run within seconds.
FAST_ENFORCE = {"policy": "Enforce", "timeoutSeconds": 2}
FAST = {"threads": [1], "durationSeconds": 1, "reportIntervalSeconds": 1}


@dataclass
class Battery:
    ns: str
    ctl: Controller
    http_marker: str
    #: case → the run at its end, or the API server's refusal text.
    ended: dict[str, dict[str, Any]] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    schedule_runs: dict[str, list[str]] = field(default_factory=dict)


def _apply_refused(api: client.ApiClient, ns: str, body: dict[str, Any]) -> str:
    try:
        create_run(api, ns, body)
    except ApiException as exc:
        assert exc.status == 422, exc
        return str(exc.body)
    raise AssertionError(f"{body['metadata']['name']} was accepted by the API server")


def _schedule(name: str, template: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "BenchmarkSchedule",
        "metadata": {"name": name},
        "spec": {"schedule": "* * * * *", "concurrencyPolicy": "Allow", "template": template},
    }


#: Two 60-character schedule names sharing their first 54 characters.
SCHEDULES = ("s" * 54 + "-one-a", "s" * 54 + "-two-b")


@pytest.fixture(scope="module")
def battery(
    testbed: Testbed,
    api: client.ApiClient,
    core: client.CoreV1Api,
    mariadb: dict[str, Any],
    crds: None,
) -> Iterator[Battery]:
    ns = f"hostile-{secrets.token_hex(3)}"
    core.create_namespace({"metadata": {"name": ns}})
    user, password = str(mariadb["user"]), str(mariadb["password"])
    for name, data in (
        # The run's own Secret holds more than its user and password: a planted token, a key.
        ("db", {"user": user, "password": password, "token": marker("token"), "pem": FAKE_PEM}),
        ("other", {"apikey": marker("apikey"), "config": f'{{"secret": "{marker("json")}"}}'}),
        ("newline", {"user": user, "password": f"first line\n{marker('nl')}"}),
    ):
        core.create_namespaced_secret(ns, {"metadata": {"name": name}, "stringData": data})
    ctl = Controller(
        testbed,
        testbed.kubeconfig,
        testbed.logs / f"controller-{ns}.log",
        {"TIDB_BENCH_LIVENESS": "", "TIDB_BENCH_DEBUG": "1", "TIDB_BENCH_METRICS_PORT": "0"},
        namespaces=(ns,),
    )
    http_marker = marker("http")
    custom = client.CustomObjectsApi(api)
    with planted_http(http_marker) as planted, silent_port() as silent:
        ctl.start()
        bat = Battery(ns, ctl, http_marker)
        try:
            # The schedules first: they fire at the next minute while the runs go on.
            template = run_manifest("t", mariadb, credentials={"secretRef": {"name": "none"}})
            for name in SCHEDULES:
                custom.create_namespaced_custom_object(
                    GROUP, VERSION, ns, "benchmarkschedules", _schedule(name, template["spec"])
                )
            bad_urls = {
                "pd-userinfo": f"http://admin:{marker('userinfo')}@127.0.0.1:1/",
                "pd-query": f"{planted}/json/latest?x=",
                "pd-fragment": f"{planted}/json#",
            }
            for case, url in bad_urls.items():
                bat.refused[case] = _apply_refused(api, ns, run_manifest(case, mariadb, pd_url=url))
            bat.refused["ttl-1e14"] = _apply_refused(
                api, ns, run_manifest("ttl-1e14", mariadb, ttlSecondsAfterFinished=10**14)
            )
            runs: dict[str, dict[str, Any]] = {
                # Warn: past the gate into a Job, so the runner's log is searched too.
                "user-key-token": dict(
                    credentials={"secretRef": {"name": "db"}, "userKey": "token"},
                    preflight={"policy": "Warn"},
                ),
                "password-key-elsewhere": dict(
                    credentials={"secretRef": {"name": "db"}, "passwordKey": "token"},
                    preflight=FAST_ENFORCE,
                ),
                "password-newline": dict(credentials={"secretRef": {"name": "newline"}}),
                # The run's own Secret holds planted keys beside its user and password: it
                # Succeeds, and its Jobs, pods and logs stay to be searched.
                "harmless": dict(preflight={"policy": "Warn"}),
                "pd-redirect": dict(pd_url=f"{planted}/redirect", preflight=FAST_ENFORCE),
                "pd-planted-json": dict(pd_url=f"{planted}/json", preflight=FAST_ENFORCE),
                "pd-planted-error": dict(pd_url=f"{planted}/error", preflight=FAST_ENFORCE),
                "pd-silent": dict(pd_url=f"http://127.0.0.1:{silent}", preflight=FAST_ENFORCE),
            }
            for case, spec in runs.items():
                create_run(api, ns, run_manifest(case, mariadb, **FAST, **spec))
            for case in runs:
                bat.ended[case] = wait_run(api, ns, case, timeout=240)
            deadline = time.monotonic() + 150
            while time.monotonic() < deadline:
                listed = custom.list_namespaced_custom_object(GROUP, VERSION, ns, "benchmarkruns")
                owned = {
                    s: [
                        r["metadata"]["name"]
                        for r in listed["items"]
                        if any(o.get("name") == s for o in r["metadata"].get("ownerReferences", []))
                    ]
                    for s in SCHEDULES
                }
                if all(owned.values()):
                    bat.schedule_runs = owned
                    break
                time.sleep(1)
            for name in SCHEDULES:  # no more runs while the search goes on
                custom.patch_namespaced_custom_object(
                    GROUP, VERSION, ns, "benchmarkschedules", name, {"spec": {"suspend": True}}
                )
            for names in bat.schedule_runs.values():
                for run in names:
                    wait_run(api, ns, run, timeout=60)
            yield bat
        finally:
            ctl.stop()
            core.delete_namespace(ns)


def _why(run: dict[str, Any]) -> str:
    st = run["status"]
    checks = " | ".join(c.get("message", "") for c in (st.get("preflight") or {}).get("checks", []))
    return f"{st.get('phase')} {st.get('reason', '')} {st.get('message', '')} {checks}"


REFUSED_AT_THE_API_SERVER = {
    "pd-userinfo": "spec.target.pdURL in body should match",
    "pd-query": "spec.target.pdURL in body should match",
    "pd-fragment": "spec.target.pdURL in body should match",
    "ttl-1e14": "spec.ttlSecondsAfterFinished in body should be less than or equal to 315360000",
}


@pytest.mark.parametrize("case", sorted(REFUSED_AT_THE_API_SERVER))
def test_a_hostile_spec_is_refused_at_the_api_server_naming_the_field(
    battery: Battery, case: str
) -> None:
    assert REFUSED_AT_THE_API_SERVER[case] in battery.refused[case], battery.refused[case]


#: case → what the run's end says (phase, then words of its message or checks).
ENDED = {
    "user-key-token": ("Failed", "Access denied for user '<user>'@"),
    "password-key-elsewhere": ("Failed", "as the user in Secret {ns}/db key 'user'"),
    "password-newline": (
        "Failed",
        "spec.credentials.passwordKey: the password in Secret {ns}/newline key 'password' has "
        "a newline",
    ),
    "pd-redirect": ("Failed", "answered HTTP 302 to GET /pd/api/v1/"),
    "pd-planted-json": ("Failed", "which is not PD's stores: the answer has no field 'stores'"),
    "pd-planted-error": ("Failed", "answered HTTP 500 to GET /pd/api/v1/"),
    "pd-silent": ("Failed", "no answer within"),
    "harmless": ("Succeeded", ""),
}


@pytest.mark.parametrize("case", sorted(ENDED))
def test_a_hostile_run_ends_and_names_its_reason(battery: Battery, case: str) -> None:
    run = battery.ended[case]
    phase, words = ENDED[case]
    why = _why(run)
    assert run["status"]["phase"] == phase, why
    assert words.format(ns=battery.ns) in why, why


def test_a_password_that_cannot_be_carried_creates_no_job(
    battery: Battery, api: client.ApiClient
) -> None:
    run = battery.ended["password-newline"]
    assert run["status"].get("reason") == "PasswordNotCarried" or "PasswordNotCarried" in str(
        run["status"].get("conditions")
    )
    assert jobs_of(api, battery.ns, "password-newline") == []


def test_the_token_as_user_reached_the_runner_which_names_no_user(battery: Battery) -> None:
    """Warn let it past the gate: the runner in its Job connected with the token, was
    refused, and said so naming the environment variable, not the user (the run's Jobs are
    deleted when it fails; the harmless run's pods and logs are the ones searched)."""
    why = _why(battery.ended["user-key-token"])
    assert "dataset failed: cannot connect to" in why, why
    assert "as the user in TIDB_BENCH_USER (the run's credentials Secret)" in why, why


def test_two_schedules_sharing_54_characters_get_their_own_runs_on_the_same_minute(
    battery: Battery,
) -> None:
    runs = battery.schedule_runs
    assert set(runs) == set(SCHEDULES) and all(runs.values()), runs
    first, second = (set(runs[s]) for s in SCHEDULES)
    assert not first & second, runs
    assert all(len(n) <= 63 for n in first | second)


def test_no_marker_of_any_secret_or_the_planted_service_appears_anywhere(
    battery: Battery, api: client.ApiClient, core: client.CoreV1Api
) -> None:
    written = leaks.everything_written(api, battery.ns, battery.ctl.log)
    kinds = {k.split()[0] for k in written}
    assert {
        "BenchmarkRun",
        "BenchmarkSchedule",
        "Event",
        "Job",
        "Pod",
        "log",
        "controller",
    } <= kinds
    searched = leaks.secret_needles(core, battery.ns)
    assert {"db/token", "db/pem", "other/apikey", "other/config", "newline/password"} <= set(
        searched
    )
    searched["planted HTTP service"] = leaks.needles(battery.http_marker)
    assert leaks.found_secrets(written, searched) == []


def test_the_marker_search_would_have_found_a_leak(
    battery: Battery, api: client.ApiClient, core: client.CoreV1Api
) -> None:
    """A control: the markers are where they were planted, and the search finds them there."""
    raw = client.ApiClient.sanitize_for_serialization
    secret = json.dumps(raw(api, core.read_namespaced_secret("db", battery.ns)))
    hits = leaks.found_secrets({"Secret db": secret}, leaks.secret_needles(core, battery.ns))
    assert any(h.startswith("db/token in Secret db") for h in hits)
    assert any(h.startswith("db/pem in Secret db") for h in hits)
    with planted_http(battery.http_marker) as url, urllib.request.urlopen(f"{url}/json") as got:
        body = got.read().decode()
    assert leaks.found({"answer": body}, leaks.needles(battery.http_marker)) != []
    assert get_run(api, battery.ns, "pd-planted-json")["status"]["phase"] == "Failed"
