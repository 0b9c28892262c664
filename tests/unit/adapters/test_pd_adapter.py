"""The PD adapter over real HTTP (FakePD), fake transports, and pd-ctl output judging."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from testbed.fake_kube import FakeKube
from testbed.fake_pd import DATA_DIR, FakePD, pd_error
from testbed.planted_http import planted_http
from tidb_bench_operator.adapters.pd import (
    LOCAL_PD_URL,
    ExecPDClient,
    HTTPPDClient,
    UnavailablePDClient,
    choose_pd_pod,
    judge_pd_ctl_output,
    make_pd_client,
)
from tidb_bench_operator.domain.manifests import Endpoint
from tidb_bench_operator.domain.pd import parse_stores
from tidb_bench_operator.errors import (
    ParseError,
    PDError,
    PDExecError,
    PDResponseError,
    PDUnreachableError,
)

EMULATOR = Path(__file__).resolve().parents[2] / "testbed" / "pd_ctl_emulator.py"
STORES_TEXT = (DATA_DIR / "pd-api-v1-stores_v8.1.0_tidb-operator-testdata.json").read_text()
OPERATOR = (
    "balance-leader {transfer leader: store 2 to 1} (kind:leader, region:28977(365, 35), "
    "createAt:2024-07-09 16:25:23.105733052 +0800 CST m=+1209042.707881308, startAt:0001-01-01 "
    "00:00:00 +0000 UTC, currentStep:0, size:95, steps:[0:{transfer leader from store 2 to store "
    "1}], timeout:[1m0s])"
)
# The Go client error pd-ctl prints when nothing listens on its -u address
# (https://github.com/tikv/pd/blob/v8.1.1/tools/pd-ctl/pdctl/command/global.go).
REFUSED = (
    'Failed to get store: Get "http://127.0.0.1:2379/pd/api/v1/stores": '
    "dial tcp 127.0.0.1:2379: connect: connection refused"
)
WHERE = "pd-ctl in pod tidb-cluster/basic-pd-0"


@pytest.fixture
def closed_port() -> int:
    """A port nothing listens on: bound once to get a free number, then closed."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def silent_server() -> Iterator[str]:
    """Accepts TCP connections (kernel backlog) but never answers: a hung PD."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


# --- HTTP against a real server ----------------------------------------------------------------


def test_stores_and_operators_are_read_from_a_real_fake_pd_over_http(fake_pd: FakePD) -> None:
    fake_pd.set_body("/pd/api/v1/operators", [OPERATOR])
    client = HTTPPDClient(fake_pd.url)
    assert [s.id for s in client.stores()] == [s.id for s in parse_stores(STORES_TEXT)]
    [operator] = client.operators()
    assert operator.desc == "balance-leader"
    assert client.describe() == f"PD HTTP {fake_pd.url}"
    assert "GET /pd/api/v1/stores" in fake_pd.requests


def test_a_500_becomes_a_response_error_with_status_type_and_size_never_the_body(
    fake_pd: FakePD,
) -> None:
    fake_pd.set_response(
        "/pd/api/v1/stores", pd_error(500, "[PD:server:ErrServerNotStarted]no leader")
    )
    with pytest.raises(PDResponseError) as info:
        HTTPPDClient(fake_pd.url).stores()
    assert info.value.status == 500
    assert "ErrServerNotStarted" not in str(info.value) + info.value.body
    assert re.match(
        rf"PD at {re.escape(fake_pd.url)} answered HTTP 500 to GET /pd/api/v1/stores "
        r"\(application/json, \d+ bytes, not quoted; PD is unhealthy",
        str(info.value),
    )


def test_a_plain_text_404_asks_whether_the_url_is_a_pd_at_all(fake_pd: FakePD) -> None:
    fake_pd.remove("/pd/api/v1/operators")
    with pytest.raises(
        PDResponseError, match=r"answered HTTP 404 .*not quoted; is this a PD"
    ) as info:
        HTTPPDClient(fake_pd.url).operators()
    assert "page not found" not in str(info.value)


def test_connection_refused_names_the_url_what_happened_and_what_to_do(closed_port: int) -> None:
    url = f"http://127.0.0.1:{closed_port}"
    with pytest.raises(PDUnreachableError) as info:
        HTTPPDClient(url).stores()
    message = str(info.value)
    assert message.startswith(f"PD at {url} is unreachable from the controller: connection refused")
    assert "(GET /pd/api/v1/stores)" in message
    assert "set spec.preflight.pdTransport: Exec to go through the PD pod" in message
    assert info.value.url == f"{url}/pd/api/v1/stores"


def test_a_server_that_never_answers_times_out_within_the_clients_timeout(
    silent_server: str,
) -> None:
    with pytest.raises(PDUnreachableError, match=r"no answer within 0.3 s \(timed out\)"):
        HTTPPDClient(silent_server, timeout=0.3).stores()


def test_an_unresolvable_host_says_it_cannot_resolve_the_name() -> None:
    def no_dns(url: str, timeout: float) -> tuple[int, bytes, str]:
        raise socket.gaierror(-2, "Name or service not known")

    with pytest.raises(PDUnreachableError, match=r"cannot resolve host 'basic-pd.tidb' \(Name or"):
        HTTPPDClient("http://basic-pd.tidb:2379", transport=no_dns).stores()


def test_a_200_that_is_not_store_json_is_a_parse_error_naming_the_source() -> None:
    def html(url: str, timeout: float) -> tuple[int, bytes, str]:
        return 200, b"<html>hello</html>", "text/html; charset=utf-8"

    with pytest.raises(ParseError) as info:
        HTTPPDClient("http://x:2379", transport=html).stores()
    assert str(info.value) == (
        "PD HTTP http://x:2379: GET /pd/api/v1/stores answered (text/html, 18 bytes, not "
        "quoted), which is not PD's stores: the answer is not JSON"
    )


@pytest.mark.parametrize(
    ("body", "missing"),
    [
        (b'{"latest": {"token": "MARKER"}}', "the answer has no field 'stores'"),
        (b'{"stores": [{"status": {}}]}', "stores[0] has no object 'store'"),
        (b'{"stores": [{"store": {"id": 1}}]}', "stores[0].store has no field 'address'"),
        (b'"MARKER"', "the answer is a JSON string (PD's form of an error), not PD's stores"),
        (b'["MARKER"]', "[0] is a string, not a {'store', 'status'} object"),
    ],
)
def test_an_answer_that_is_not_pds_names_the_missing_field_never_the_answer(
    body: bytes, missing: str
) -> None:
    def answer(url: str, timeout: float) -> tuple[int, bytes, str]:
        return 200, body, "application/json"

    with pytest.raises((ParseError, PDError)) as info:
        HTTPPDClient("http://x:2379", transport=answer).stores()
    assert str(info.value).endswith(missing)
    assert "MARKER" not in str(info.value)


def test_the_fake_transport_receives_the_full_url_and_the_timeout() -> None:
    calls: list[tuple[str, float]] = []

    def transport(url: str, timeout: float) -> tuple[int, bytes, str]:
        calls.append((url, timeout))
        return 200, b"[]", "application/json"

    assert HTTPPDClient("http://pd:2379/", timeout=1.5, transport=transport).operators() == []
    assert calls == [("http://pd:2379/pd/api/v1/operators", 1.5)]


# --- pd-ctl output judging ------------------------------------------------------------------------


def test_normal_pd_ctl_store_json_is_passed_through_unchanged() -> None:
    assert judge_pd_ctl_output(STORES_TEXT, command="store", where=WHERE) == STORES_TEXT.strip()


def test_an_empty_operator_list_is_a_valid_answer() -> None:
    assert judge_pd_ctl_output("[]\n", command="operator show", where=WHERE) == "[]"


def test_a_dial_error_is_unreachable_and_says_it_was_read_from_the_output() -> None:
    with pytest.raises(PDUnreachableError) as info:
        judge_pd_ctl_output(REFUSED + "\n", command="store", where=WHERE)
    message = str(info.value)
    assert message.startswith(
        f"{WHERE}: `pd-ctl store` could not reach PD at http://127.0.0.1:2379: connection refused"
    )
    assert "exits 0 on failure" in message
    assert info.value.url == "http://127.0.0.1:2379/pd/api/v1/stores"


def test_a_500_printed_by_pd_ctl_becomes_a_response_error_without_its_body() -> None:
    with pytest.raises(PDResponseError) as info:
        judge_pd_ctl_output(
            'Failed to get store: [500] "[PD:server:ErrServerNotStarted]no leader"',
            command="store",
            where=WHERE,
        )
    assert info.value.status == 500
    assert "ErrServerNotStarted" not in str(info.value) + info.value.body


def test_a_bare_404_from_operator_show_is_a_response_error() -> None:
    with pytest.raises(PDResponseError, match=r"`pd-ctl operator show`: PD answered HTTP 404"):
        judge_pd_ctl_output("[404] 404 page not found", command="operator show", where=WHERE)


def test_the_last_error_after_trying_all_endpoints_is_the_one_reported() -> None:
    text = (
        "after trying all endpoints, no endpoint is available, the last error we met: "
        'Get "http://127.0.0.1:2379/pd/api/v1/operators": context deadline exceeded'
    )
    with pytest.raises(PDUnreachableError, match=r"timed out \(context deadline exceeded\)"):
        judge_pd_ctl_output(text, command="operator show", where=WHERE)


def test_a_cobra_error_says_pd_ctl_rejected_the_command() -> None:
    with pytest.raises(PDExecError, match=r"pd-ctl rejected `store`: unknown command"):
        judge_pd_ctl_output(
            'Error: unknown command "stor" for "pd-ctl"', command="store", where=WHERE
        )


def test_no_output_at_all_is_an_exec_error() -> None:
    with pytest.raises(PDExecError, match=r"`pd-ctl store` printed nothing"):
        judge_pd_ctl_output("  \n", command="store", where=WHERE)


# --- ExecPDClient through the pd-ctl emulator ---------------------------------------------------


def emulator_exec(pd_url: str, log: list[tuple[str, str, str, list[str]]]) -> Any:
    """An exec_fn running the pd-ctl emulator locally, PD's 127.0.0.1:2379 mapped to `pd_url`."""

    def run(namespace: str, pod: str, container: str, argv: Sequence[str], timeout: float) -> str:
        log.append((namespace, pod, container, list(argv)))
        assert argv[0] == "/pd-ctl"
        args = [pd_url if a == LOCAL_PD_URL else a for a in argv[1:]]
        done = subprocess.run(
            [sys.executable, str(EMULATOR), *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return done.stdout + done.stderr

    return run


def test_exec_client_reads_stores_and_operators_through_pd_ctl(fake_pd: FakePD) -> None:
    fake_pd.set_body("/pd/api/v1/operators", [OPERATOR])
    log: list[tuple[str, str, str, list[str]]] = []
    client = ExecPDClient(
        None, "tidb-cluster", "basic-pd-0", exec_fn=emulator_exec(fake_pd.url, log)
    )
    assert [s.id for s in client.stores()] == [s.id for s in parse_stores(STORES_TEXT)]
    assert [op.region_id for op in client.operators()] == [28977]
    assert log == [
        ("tidb-cluster", "basic-pd-0", "pd", ["/pd-ctl", "-u", LOCAL_PD_URL, "store"]),
        ("tidb-cluster", "basic-pd-0", "pd", ["/pd-ctl", "-u", LOCAL_PD_URL, "operator", "show"]),
    ]
    assert client.describe() == "pd-ctl in pod tidb-cluster/basic-pd-0"


def test_exec_client_turns_pd_ctls_exit_0_connection_refused_into_a_pd_error(
    closed_port: int,
) -> None:
    client = ExecPDClient(
        None,
        "tidb-cluster",
        "basic-pd-0",
        exec_fn=emulator_exec(f"http://127.0.0.1:{closed_port}", []),
    )
    with pytest.raises(
        PDUnreachableError, match=r"^pd-ctl in pod tidb-cluster/basic-pd-0: `pd-ctl store`"
    ):
        client.stores()


def test_exec_client_reports_a_500_that_pd_ctl_printed_for_operator_show(fake_pd: FakePD) -> None:
    fake_pd.set_response("/pd/api/v1/operators", pd_error(500, "leader is nil"))
    client = ExecPDClient(None, "ns", "basic-pd-1", exec_fn=emulator_exec(fake_pd.url, []))
    with pytest.raises(PDResponseError, match=r"PD answered HTTP 500 \(") as info:
        client.operators()
    assert "leader is nil" not in str(info.value)


# --- choosing a client ---------------------------------------------------------------------------


def pod(
    name: str, *, phase: str = "Running", ready: bool = True, deleting: bool = False
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "tidb-cluster",
        "labels": {"app.kubernetes.io/instance": "basic", "app.kubernetes.io/component": "pd"},
    }
    if deleting:
        meta["deletionTimestamp"] = "2024-12-25T03:05:03Z"
    condition = {"type": "Ready", "status": "True" if ready else "False"}
    return {"metadata": meta, "status": {"phase": phase, "conditions": [condition]}}


def pods_only(pods: list[dict[str, Any]]) -> FakeKube:
    """The stand-in API server holding only these pods (it records the selectors asked for)."""
    kube = FakeKube()
    for p in pods:
        kube.add_pod(p)
    return kube


def endpoint(pd_url: str | None, cluster: str | None = "basic") -> Endpoint:
    return Endpoint("basic-tidb.tidb-cluster", 4000, pd_url, cluster, "tidb-cluster")


def test_choose_pd_pod_prefers_ready_running_pods_and_skips_terminating_ones() -> None:
    kube = pods_only(
        [
            pod("basic-pd-0", deleting=True),
            pod("basic-pd-1", ready=False),
            pod("basic-pd-2"),
            pod("basic-pd-3", phase="Pending"),
        ]
    )
    assert (choose_pd_pod(kube, "tidb-cluster", "basic") or {}).get("metadata", {}).get(
        "name"
    ) == "basic-pd-2"
    assert kube.asked == [
        "pods tidb-cluster app.kubernetes.io/instance=basic,app.kubernetes.io/component=pd"
    ]


def test_choose_pd_pod_returns_none_when_no_pd_pod_runs() -> None:
    assert (
        choose_pd_pod(pods_only([pod("basic-pd-0", phase="Pending")]), "tidb-cluster", "basic")
        is None
    )


def test_auto_uses_http_when_the_pd_url_answers(fake_pd: FakePD) -> None:
    client = make_pd_client("Auto", endpoint(fake_pd.url), pods_only([]), None)
    assert isinstance(client, HTTPPDClient)
    assert "GET /pd/api/v1/health" in fake_pd.requests


def test_auto_falls_back_to_exec_in_the_pd_pod_when_http_is_unreachable(closed_port: int) -> None:
    client = make_pd_client(
        "Auto",
        endpoint(f"http://127.0.0.1:{closed_port}"),
        pods_only([pod("basic-pd-0")]),
        None,
        exec_fn=emulator_exec("http://unused", []),
    )
    assert isinstance(client, ExecPDClient)
    assert client.describe() == "pd-ctl in pod tidb-cluster/basic-pd-0"


def test_auto_with_neither_http_nor_a_pd_pod_explains_both(closed_port: int) -> None:
    client = make_pd_client(
        "Auto", endpoint(f"http://127.0.0.1:{closed_port}"), pods_only([]), None
    )
    assert isinstance(client, UnavailablePDClient)
    with pytest.raises(PDError) as info:
        client.stores()
    assert "connection refused" in str(info.value)
    assert "no Running PD pod of TidbCluster tidb-cluster/basic" in str(info.value)


def test_exec_mode_without_a_cluster_says_exec_needs_spec_cluster() -> None:
    client = make_pd_client("Exec", endpoint("http://pd:2379", cluster=None), pods_only([]), None)
    assert isinstance(client, UnavailablePDClient)
    with pytest.raises(PDError, match=r"pdTransport Exec needs spec.cluster"):
        client.operators()


def test_http_mode_does_not_probe_and_no_address_means_no_client() -> None:
    def unreachable(url: str, timeout: float) -> tuple[int, bytes, str]:
        raise AssertionError("HTTP mode must not probe")

    client = make_pd_client(
        "HTTP", endpoint("http://pd:2379"), pods_only([]), None, http_transport=unreachable
    )
    assert isinstance(client, HTTPPDClient)
    assert make_pd_client("Auto", endpoint(None, cluster=None), pods_only([]), None) is None


def test_auto_keeps_http_when_pd_answers_with_an_error_status() -> None:
    def sick(url: str, timeout: float) -> tuple[int, bytes, str]:
        return 500, json.dumps("no leader").encode(), "application/json"

    client = make_pd_client(
        "Auto",
        endpoint("http://pd:2379"),
        pods_only([pod("basic-pd-0")]),
        None,
        http_transport=sick,
    )
    assert isinstance(client, HTTPPDClient)


# --- a planted endpoint: nothing of its answers is quoted -----------------------------------------

MARKER = "planted-7c1e5d"


def chain(exc: BaseException | None) -> str:
    """The texts of an exception and every cause or context a traceback would print."""
    texts = []
    while exc is not None:
        texts.append(repr(exc))
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return " | ".join(texts)


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("json", "which is not PD's stores: the answer has no field 'stores'"),
        ("html", "(text/html, 34 bytes, not quoted), which is not PD's stores: the answer is not"),
        ("error", "answered HTTP 500 to GET /json"),
        ("redirect", "answered HTTP 302 to GET /redirect"),
    ],
)
def test_a_planted_endpoint_is_described_never_quoted(prefix: str, expected: str) -> None:
    with planted_http(MARKER) as url:
        base = f"{url}/{prefix}" if prefix != "error" else f"{url}/error"
        with pytest.raises((PDError, ParseError)) as info:
            HTTPPDClient(base, timeout=2.0).stores()
    text = str(info.value)
    assert MARKER not in text
    assert MARKER not in chain(info.value), "not even in a traceback of the controller's log"
    if prefix == "error":
        assert "answered HTTP 500 to GET /pd/api/v1/stores" in text
    elif prefix == "redirect":
        assert "answered HTTP 302 to GET /pd/api/v1/stores" in text
        assert "a redirect, which is not followed" in text
    else:
        assert expected in text


def test_an_answer_that_trickles_is_cut_at_the_clients_timeout() -> None:
    with planted_http(MARKER) as url:
        start = time.monotonic()
        with pytest.raises(PDUnreachableError, match=r"no answer within 1\.5 s") as info:
            HTTPPDClient(f"{url}/trickle", timeout=1.5).stores()
    assert time.monotonic() - start < 4.0
    assert MARKER not in chain(info.value)


def test_something_that_is_not_http_is_named_by_its_kind_not_its_text() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)

        def answer() -> None:
            conn, _ = sock.accept()
            with conn:
                conn.recv(4096)
                conn.sendall(f"SSH-2.0-{MARKER}\r\n".encode())

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        with pytest.raises(PDUnreachableError) as info:
            HTTPPDClient(f"http://127.0.0.1:{sock.getsockname()[1]}", timeout=2.0).stores()
        thread.join(2.0)
    assert MARKER not in chain(info.value)
    assert "not an HTTP answer (BadStatusLine)" in str(info.value)
