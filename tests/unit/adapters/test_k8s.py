"""The Kubernetes adapter converts the client's exceptions at its boundary.

The client is replaced by objects raising what the real client raises (ApiException for an
answer, urllib3 and socket errors for a connection): a fake of an external library, since
the real API server's failures are tests/e2e's business (test_deploy's 403s).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import ProtocolError

from tidb_bench_operator.adapters import k8s
from tidb_bench_operator.adapters.k8s import Kube
from tidb_bench_operator.errors import KubeError, KubeForbidden, TidbBenchError


class Raising:
    """Any client call raises `exc`."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            raise self.exc

        return call


def kube_raising(exc: BaseException) -> Kube:
    kube = Kube(ApiClient())
    kube.core = kube.batch = kube.custom = kube.version_api = Raising(exc)
    return kube


def forbidden() -> ApiException:
    return ApiException(status=403, reason="Forbidden")


def test_a_403_on_a_list_is_kube_forbidden_naming_the_list() -> None:
    with pytest.raises(KubeForbidden, match=r"^listing Nodes: 403 Forbidden$"):
        kube_raising(forbidden()).nodes()
    with pytest.raises(KubeForbidden, match=r"listing pods a=b in namespace ns: 403"):
        kube_raising(forbidden()).pods("ns", "a=b")
    with pytest.raises(KubeForbidden, match=r"listing Jobs x=y in namespace ns: 403"):
        kube_raising(forbidden()).jobs("ns", "x=y")


def test_a_broken_connection_is_a_kube_error_and_so_one_of_ours() -> None:
    kube = kube_raising(ProtocolError("Connection aborted."))
    with pytest.raises(KubeError, match=r"listing Nodes: ProtocolError") as err:
        kube.nodes()
    assert isinstance(err.value, TidbBenchError)
    with pytest.raises(KubeError, match="reading Secret ns/db: ConnectionResetError"):
        kube_raising(ConnectionResetError(104, "reset")).secret_keys("ns", "db")


def test_a_refused_write_quotes_the_api_servers_message() -> None:
    exc = ApiException(status=422, reason="Unprocessable Entity")
    exc.body = '{"message": "Job.batch \\"x\\" is invalid: spec.template: Required value"}'
    body = {"metadata": {"namespace": "ns", "name": "x"}}
    with pytest.raises(KubeError, match=r'creating Job ns/x: 422 Job.batch "x" is invalid'):
        kube_raising(exc).create_job(body)


def test_not_found_is_an_answer_not_an_error() -> None:
    kube = kube_raising(ApiException(status=404, reason="Not Found"))
    assert kube.secret_keys("ns", "db") is None
    assert kube.tidb_cluster("ns", "basic") is None
    assert kube.served_resources("tidbbench.io", "v1alpha1") == set()


def test_best_effort_calls_swallow_every_client_error() -> None:
    kube = kube_raising(ProtocolError("Connection aborted."))
    assert kube.pod_log("ns", "p", "runner") is None
    kube.create_event({"metadata": {"namespace": "ns"}})


# ------------------------------------------------------------ retries, on a real socket
#: An empty pod list as the API server answers it, the connection kept alive.
EMPTY_LIST = b'{"kind":"PodList","apiVersion":"v1","items":[]}'
ANSWER = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    b"Content-Length: " + str(len(EMPTY_LIST)).encode() + b"\r\n\r\n" + EMPTY_LIST
)


@contextlib.contextmanager
def api_server(
    serve: Callable[[int, socket.socket], None], tmp_path: Path
) -> Iterator[tuple[Kube, list[socket.socket]]]:
    """A listening socket standing in for the API server: `serve(n, conn)` handles its n-th
    connection (from 0) on a thread; a Kube whose kubeconfig points at it."""
    accepted: list[socket.socket] = []
    threads: list[threading.Thread] = []
    done = threading.Event()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.settimeout(0.1)
        port = listener.getsockname()[1]
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
        }))  # fmt: skip

        def accept() -> None:
            while not done.is_set():
                with contextlib.suppress(TimeoutError):
                    conn = listener.accept()[0]
                    accepted.append(conn)
                    t = threading.Thread(target=serve, args=(len(accepted) - 1, conn))
                    t.start()
                    threads.append(t)

        acceptor = threading.Thread(target=accept)
        acceptor.start()
        try:
            yield Kube(k8s.load_api_client(str(kubeconfig))), accepted
        finally:
            done.set()
            acceptor.join()
            for conn in accepted:
                conn.close()
            for t in threads:
                t.join(5)


def read_request(conn: socket.socket) -> bytes:
    """One request's head (a GET has no body), or b"" when the client closed."""
    data = b""
    conn.settimeout(5)
    with contextlib.suppress(OSError):
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
    return data


def test_a_silent_api_server_holds_a_call_for_one_timeout_not_four(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # urllib3 retried a GET whose read timed out three times: 80 s for the 20-s timeout.
    monkeypatch.setattr(k8s, "TIMEOUT", 0.3)
    with (
        api_server(lambda n, conn: None, tmp_path) as (kube, accepted),
        pytest.raises(KubeError, match="timed out"),
    ):
        kube.pods("bench", "app=x")
    assert len(accepted) == 1, f"{len(accepted)} connections: the read was tried again"


def test_a_kept_alive_connection_the_server_closed_is_tried_again_on_a_new_one(
    tmp_path: Path,
) -> None:
    # The first connection answers one GET, then reads the next and closes without an
    # answer (an API server closing an idle connection as the request went out). urllib3
    # counts that as a read error: with read retries off, the GET failed at once.
    def serve(n: int, conn: socket.socket) -> None:
        read_request(conn)
        conn.sendall(ANSWER)
        if n == 0:
            read_request(conn)
            conn.shutdown(socket.SHUT_RDWR)

    with api_server(serve, tmp_path) as (kube, accepted):
        assert kube.pods("bench", "app=x") == []
        assert kube.pods("bench", "app=x") == []
    assert len(accepted) == 2
