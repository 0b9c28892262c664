"""PD adapter: a narrow, read-only PD client over the HTTP API or pd-ctl exec'd in a PD pod.

Why over 500 lines: it is one client with two transports that must fail alike (the same
PDError kinds, the same answers to parse), the judging of pd-ctl's text that makes the
second transport as trustworthy as the first, and the choice between them
(spec.preflight.pdTransport). Split apart, each half would need the other's error rules.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, Literal, Protocol, TypeVar

from tidb_bench_operator.adapters.tls import explain, ssl_cause
from tidb_bench_operator.domain.cluster.tls import pd_ctl_tls_flags, pd_tls_dir
from tidb_bench_operator.domain.cluster.view import V1_KIND, database_pod_selector
from tidb_bench_operator.domain.manifests import Endpoint
from tidb_bench_operator.domain.pd import Operator, Store, parse_operators, parse_stores
from tidb_bench_operator.errors import (
    ParseError,
    PDError,
    PDExecError,
    PDResponseError,
    PDUnreachableError,
)

API = "/pd/api/v1"
STORES_PATH = f"{API}/stores"
OPERATORS_PATH = f"{API}/operators"
LEADER_PATH = f"{API}/leader"
HEALTH_PATH = f"{API}/health"

# In a TiDB Operator PD pod the binary is /pd-ctl and PD listens on 127.0.0.1:2379, which is
# also pd-ctl's default -u; we pass it explicitly so a PD_ADDR in the pod's env cannot
# redirect us (https://github.com/tikv/pd/blob/v8.1.1/tools/pd-ctl/pdctl/ctl.go).
PD_CTL = "/pd-ctl"
LOCAL_PD_URL = "http://127.0.0.1:2379"
LOCAL_PD_TLS_URL = "https://127.0.0.1:2379"
PD_CONTAINER = "pd"

TransportMode = Literal["Auto", "HTTP", "Exec"]
Transport = Callable[[str, float], tuple[int, bytes]]
"""GET a URL within a timeout: (status, body) for any HTTP answer; OSError when none came."""
ExecFn = Callable[[str, str, str, Sequence[str], float], str]
"""Run argv in (namespace, pod, container) within a timeout; return stdout then stderr."""

_EXEC_ADVICE = "set spec.preflight.pdTransport: Exec to go through the PD pod"
_T = TypeVar("_T")


# ---------------------------------------------------------------------------
# Exceptions: every PD failure is a PDError; the subclasses say which kind, for either transport.


# ---------------------------------------------------------------------------
# The interface


class PDClient(Protocol):
    """What the preflight gate needs from PD, modelled on TiDB Operator's pkg/pdapi."""

    def stores(self) -> list[Store]:
        """Up and Offline stores (TiKV and TiFlash; Tombstone hidden, as PD does by default)."""
        ...

    def operators(self) -> list[Operator]:
        """The operators PD holds right now (GET /operators, pd-ctl `operator show`)."""
        ...

    def describe(self) -> str:
        """Where PD is read from, for messages: 'PD HTTP http://…' or 'pd-ctl in pod ns/name'."""
        ...


# ---------------------------------------------------------------------------
# HTTP


def urllib_transport(
    url: str, timeout: float, context: ssl.SSLContext | None = None
) -> tuple[int, bytes]:
    """GET `url` with urllib: (status, body) for any HTTP answer; OSError when there is none.

    `context`: TLS with a client certificate, the server verified (adapters.tls).
    """
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            return int(response.status), bytes(response.read())
    except urllib.error.HTTPError as exc:
        # A non-200 is an answer, not a transport failure: PD puts its error text in the
        # body as a JSON string (e.g. GetStore in https://github.com/tikv/pd/blob/v8.1.1/server/api/store.go).
        try:
            return exc.code, bytes(exc.read())
        finally:
            exc.close()
    except http.client.HTTPException as exc:
        # e.g. plain HTTP against a TLS-only PD: something answered, but not HTTP.
        raise ConnectionError(f"not an HTTP answer ({type(exc).__name__}: {exc})") from exc


def _pd_message(body: bytes) -> str:
    """PD's error text: handlers answer a JSON string (see above); anything else is excerpted."""
    text = body.decode("utf-8", errors="replace").strip()
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, str):
        return value
    flat = " ".join(text.split())
    return flat if len(flat) <= 200 else flat[:197] + "..."


def _status_hint(status: int) -> str:
    if status == 404:
        return "is this a PD address? PD serves its API under /pd/api/v1"
    if status >= 500:
        return "PD is unhealthy (e.g. no leader elected): check the PD pods' logs"
    return "check the PD address and version"


def _unreachable_reason(
    exc: BaseException, url: str, timeout: float, tls_secret: str | None = None
) -> str:
    """A short, specific description of why no HTTP answer came."""
    cause: object = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or url
    source = f"Secret {tls_secret}" if tls_secret else None
    tls_problem = explain(exc, peer=f"PD {parts.netloc}", source=source)
    if tls_problem is not None:
        return tls_problem
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused (nothing listens on that host and port)"
    if isinstance(cause, TimeoutError):
        return f"no answer within {timeout:g} s (timed out)"
    if isinstance(cause, socket.gaierror):
        return f"cannot resolve host {host!r} ({cause.strerror or cause})"
    if isinstance(cause, ssl.SSLError):
        return f"TLS handshake failed ({cause})"
    if isinstance(cause, BaseException):
        return f"{type(cause).__name__}: {cause}"
    return str(cause)


class HTTPPDClient:
    """PD through its HTTP API (GET /pd/api/v1/...), with a timeout on every request."""

    def __init__(
        self,
        url: str,
        timeout: float = 5.0,
        transport: Transport | None = None,
        *,
        tls: ssl.SSLContext | None = None,
        tls_secret: str | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.tls_secret = tls_secret
        self._transport: Transport = transport or partial(urllib_transport, context=tls)

    def describe(self) -> str:
        """'PD HTTP <url>'."""
        return f"PD HTTP {self.url}"

    def get(self, path: str, timeout: float | None = None) -> bytes:
        """The body of a 200 answer to GET `path`; PDUnreachableError or PDResponseError else."""
        url = f"{self.url}{path}"
        limit = self.timeout if timeout is None else timeout
        try:
            status, body = self._transport(url, limit)
        except OSError as exc:
            reason = _unreachable_reason(exc, url, limit, self.tls_secret)
            advice = (
                ""  # PD answered; the certificates disagree, which another way cannot mend
                if ssl_cause(exc) is not None
                else f" Is the PD Service reachable from the controller? If not, {_EXEC_ADVICE}"
            )
            raise PDUnreachableError(
                f"PD at {self.url} is unreachable from the controller: {reason} (GET {path})."
                + advice,
                url=url,
                reason=reason,
            ) from exc
        if status != 200:
            message = _pd_message(body)
            raise PDResponseError(
                f"PD at {self.url} answered {status} to GET {path}: {message} "
                f"({_status_hint(status)})",
                url=url,
                status=status,
                body=message,
            )
        return body

    def stores(self) -> list[Store]:
        """GET /pd/api/v1/stores."""
        return _parsed(self.describe(), parse_stores, self.get(STORES_PATH))

    def operators(self) -> list[Operator]:
        """GET /pd/api/v1/operators."""
        return _parsed(self.describe(), parse_operators, self.get(OPERATORS_PATH))

    def leader(self) -> str | None:
        """GET /pd/api/v1/leader: the leader member's `name` (None when the body has none)."""
        body = self.get(LEADER_PATH)
        try:
            doc = json.loads(body)
        except ValueError:
            return None
        name = doc.get("name") if isinstance(doc, dict) else None
        return name if isinstance(name, str) and name else None


def _parsed(where: str, parse: Callable[[Any], _T], body: str | bytes) -> _T:
    """Run a domain parser, naming the source in its error."""
    try:
        return parse(body)
    except PDError as exc:
        raise PDError(f"{where}: {exc}") from exc
    except ParseError as exc:
        raise ParseError(f"{where}: {exc}") from exc


# ---------------------------------------------------------------------------
# pd-ctl output judging (pure)

# pd-ctl exits 0 even when the command failed (tikv/pd#8762), so success is judged by the
# text: "Failed to get store: <err>", or a bare "<err>" for `operator show`, where <err> is
# "[<status>] <body>" for an HTTP answer or the Go client error, optionally wrapped in
# "after trying all endpoints, ..."; Cobra errors ("Error: unknown command ...") are the
# only ones that exit 1. Source: tikv/pd v8.1.1, tools/pd-ctl/pdctl/command/global.go and
# tools/pd-ctl/pdctl/ctl.go (https://github.com/tikv/pd/tree/v8.1.1/tools/pd-ctl/pdctl).
_FAILED_TO = re.compile(r"^Failed!? (?:to (?P<what>[^:]+): )?(?P<err>.*)$")
_ALL_ENDPOINTS = re.compile(
    r"^after trying all endpoints, no endpoint is available, the last error we met: (?P<err>.*)$"
)
_HTTP_STATUS = re.compile(r"^\[(?P<status>\d{3})\] ?(?P<body>.*)$")
_GO_REQUEST = re.compile(r'^(?P<method>Get|Post|Delete|Put|Patch) "(?P<url>[^"]*)": (?P<err>.*)$')
_COBRA = re.compile(r"^Error: (?P<err>.*)$")


def _go_reason(err: str) -> str:
    """Go's net/http client error → the same short reasons the HTTP client gives."""
    if "connection refused" in err:
        return "connection refused (nothing listens on that host and port)"
    if "no such host" in err or "server misbehaving" in err:
        return f"cannot resolve the host ({err})"
    if "deadline exceeded" in err or "i/o timeout" in err or "Client.Timeout" in err:
        return f"timed out ({err})"
    return err


def _classify(err: str, *, command: str, where: str, line: str) -> PDError | None:
    """The PDError a pd-ctl error text stands for, or None if `err` is not an error."""
    said = f"pd-ctl printed {line!r}; it exits 0 on failure, so this was read from its output"
    match = _FAILED_TO.match(err)
    if match:
        inner = _classify(match.group("err"), command=command, where=where, line=line)
        return inner or PDError(f"{where}: `pd-ctl {command}` failed ({said})")
    match = _ALL_ENDPOINTS.match(err)
    if match:
        return _classify(match.group("err"), command=command, where=where, line=line)
    match = _HTTP_STATUS.match(err)
    if match:
        status = int(match.group("status"))
        body = _pd_message(match.group("body").encode())
        return PDResponseError(
            f"{where}: `pd-ctl {command}`: PD answered {status}: {body} "
            f"({_status_hint(status)}; {said})",
            url=LOCAL_PD_URL,
            status=status,
            body=body,
        )
    match = _GO_REQUEST.match(err)
    if match:
        url, go_err = match.group("url"), match.group("err")
        base = urllib.parse.urlsplit(url)
        pd = f"PD at {base.scheme}://{base.netloc}"
        if "tls:" in go_err or "x509:" in go_err:
            why = go_err
            problem = (
                f"failed the TLS handshake with {pd}: {go_err}; the certificates pd-ctl was "
                "given are the PD pod's own mounted TLS Secret: check that Secret"
            )
        else:
            why = _go_reason(go_err)
            problem = (
                f"could not reach {pd}: {why}; the PD server in that pod is not answering "
                "on its client port: is it starting up or crash-looping?"
            )
        return PDUnreachableError(
            f"{where}: `pd-ctl {command}` {problem} ({said})", url=url, reason=why
        )
    match = _COBRA.match(err)
    if match:
        return PDExecError(
            f"{where}: pd-ctl rejected `{command}`: {match.group('err')} "
            "(is the PD image's pd-ctl too old for this command?)"
        )
    return None


def judge_pd_ctl_output(output: str, *, command: str, where: str) -> str:
    """pd-ctl's output if it holds PD's answer; PDError naming the failure if it does not."""
    text = output.strip()
    if not text:
        raise PDExecError(
            f"{where}: `pd-ctl {command}` printed nothing; is {PD_CTL} present in the "
            "PD image, and does the PD pod run a TiDB Operator PD image?"
        )
    try:
        json.loads(text)
    except ValueError:
        pass
    else:
        return text
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        error = _classify(line, command=command, where=where, line=line)
        if error is not None:
            raise error
    # No error line: e.g. a banner before the JSON; the domain parser finds embedded JSON
    # or says precisely what it got.
    return text


# ---------------------------------------------------------------------------
# pd-ctl through the Kubernetes exec API


def kubernetes_exec(api_client: Any) -> ExecFn:
    """An ExecFn over the Kubernetes exec API (pods/exec), using `api_client`'s configuration."""
    from kubernetes import client as k8s_client
    from kubernetes.client.exceptions import ApiException
    from kubernetes.stream import stream

    def run(namespace: str, pod: str, container: str, argv: Sequence[str], timeout: float) -> str:
        where = f"pod {namespace}/{pod} container {container}"
        # stream() swaps the ApiClient's call_api for a websocket one while it runs
        # (kubernetes/stream/stream.py), so a shared ApiClient used by other threads at the
        # same moment would send their requests over the websocket: use our own.
        with k8s_client.ApiClient(api_client.configuration) as own_client:
            core = k8s_client.CoreV1Api(own_client)
            try:
                ws = stream(
                    core.connect_get_namespaced_pod_exec,
                    pod,
                    namespace,
                    command=list(argv),
                    container=container,
                    # No stdin: pd-ctl reads a non-terminal stdin and appends its words to
                    # the command line (tikv/pd v8.1.1 tools/pd-ctl/main.go, ReadStdin).
                    stdin=False,
                    stdout=True,
                    stderr=True,
                    tty=False,
                    _preload_content=False,
                    _request_timeout=timeout,
                )
            except ApiException as exc:
                hint = ""
                if exc.status == 403 or "403" in str(exc.reason):
                    hint = "; the controller's ServiceAccount needs `create` on pods/exec"
                raise PDExecError(
                    f"cannot exec {argv[0]} in {where}: ({exc.status}) {exc.reason}{hint}"
                ) from exc
            try:
                # The websocket itself has no read deadline: bound the whole command here.
                ws.run_forever(timeout=timeout)
                if ws.is_open():
                    raise PDExecError(
                        f"{' '.join(argv)} in {where} did not finish within {timeout:g} s"
                    )
                out = str(ws.read_stdout(timeout=0) or "")
                err = str(ws.read_stderr(timeout=0) or "")
                if not (out + err).strip():
                    _raise_exec_status(str(ws.read_channel(_ERROR_CHANNEL, timeout=0) or ""), where)
            finally:
                ws.close()
                # websocket-client's close() does nothing once the server's close frame has
                # been read (answering it marked the connection closed), which leaves the TLS
                # socket open until garbage collection: one leaked socket per exec. Close it.
                ws.sock.shutdown()
        return out + err

    return run


# Exec's channel 3 carries a metav1.Status: Failure with a message when the runtime could not
# start the command (e.g. `/pd-ctl` missing in the image) (kubernetes/stream/ws_client.py).
_ERROR_CHANNEL = 3


def _raise_exec_status(status_text: str, where: str) -> None:
    """Raise PDExecError if the exec status channel reports a Failure."""
    try:
        status = json.loads(status_text) if status_text.strip() else {}
    except ValueError:
        return
    if isinstance(status, dict) and status.get("status") == "Failure":
        raise PDExecError(f"exec in {where} failed: {status.get('message', status_text)}")


class ExecPDClient:
    """PD through `pd-ctl` run in a PD pod (for controllers that cannot reach the PD Service)."""

    def __init__(
        self,
        kube_api_client: Any,
        namespace: str,
        pod: str,
        container: str = PD_CONTAINER,
        timeout: float = 10.0,
        *,
        exec_fn: ExecFn | None = None,
        tls_dir: str | None = None,
    ) -> None:
        if exec_fn is None:
            if kube_api_client is None:
                raise ValueError("ExecPDClient needs a kubernetes ApiClient or an exec_fn")
            exec_fn = kubernetes_exec(kube_api_client)
        self.namespace = namespace
        self.pod = pod
        self.container = container
        self.timeout = timeout
        self._exec = exec_fn
        #: The PD pod's mounted TLS Secret: pd-ctl then speaks HTTPS with its certificate.
        self.tls_dir = tls_dir

    def describe(self) -> str:
        """'pd-ctl in pod <ns>/<pod>'."""
        return f"pd-ctl in pod {self.namespace}/{self.pod}"

    def run(self, *args: str) -> str:
        """Run `/pd-ctl -u http://127.0.0.1:2379 <args>` and return its judged output.

        With TLS: `-u https://127.0.0.1:2379 --cacert=… --cert=… --key=…`, files of the pod.
        """
        if self.tls_dir is None:
            argv = [PD_CTL, "-u", LOCAL_PD_URL, *args]
        else:
            argv = [PD_CTL, "-u", LOCAL_PD_TLS_URL, *pd_ctl_tls_flags(self.tls_dir), *args]
        output = self._exec(self.namespace, self.pod, self.container, argv, self.timeout)
        return judge_pd_ctl_output(output, command=" ".join(args), where=self.describe())

    def stores(self) -> list[Store]:
        """pd-ctl `store` (= GET /stores, with `state` zeroed: state_name is what counts)."""
        return _parsed(self.describe(), parse_stores, self.run("store"))

    def operators(self) -> list[Operator]:
        """pd-ctl `operator show` (= GET /operators, body printed as is)."""
        return _parsed(self.describe(), parse_operators, self.run("operator", "show"))


class UnavailablePDClient:
    """Stands in when no way to PD was found: every read raises the reason, once per check."""

    def __init__(self, reason: str, description: str = "PD (unavailable)") -> None:
        self.reason = reason
        self.description = description

    def describe(self) -> str:
        """The description given."""
        return self.description

    def stores(self) -> list[Store]:
        """Raises PDError(reason)."""
        raise PDError(self.reason)

    def operators(self) -> list[Operator]:
        """Raises PDError(reason)."""
        raise PDError(self.reason)


# ---------------------------------------------------------------------------
# Choosing a client


class PodLister(Protocol):
    """The part of adapters.k8s.Kube that finding a PD pod needs."""

    def pods(self, namespace: str | None, selector: str) -> list[dict[str, Any]]:
        """Pods matching a label selector, as plain Kubernetes JSON dicts."""
        ...


def _pod_ready(pod: Mapping[str, Any]) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def choose_pd_pod(
    kube: PodLister, cluster_namespace: str, cluster_name: str, kind: str = V1_KIND
) -> dict[str, Any] | None:
    """A Running, not-terminating PD pod of the cluster (Ready ones first), as the API has it."""
    # TiDB Operator v1 labels PD pods app.kubernetes.io/instance=<tc>, component=pd; v2
    # pingcap.com/cluster=<cluster>, pingcap.com/component=pd (docs/tidb-operator-v2.md).
    selector = database_pod_selector(kind, cluster_name, "pd")
    candidates = []
    for pod in kube.pods(cluster_namespace, selector):
        meta = pod.get("metadata") or {}
        if (pod.get("status") or {}).get("phase") != "Running" or meta.get("deletionTimestamp"):
            continue
        candidates.append((not _pod_ready(pod), str(meta.get("name", "")), pod))
    if not candidates:
        return None
    return min(candidates, key=lambda c: (c[0], c[1]))[2]


def _http_failure(client: HTTPPDClient, timeout: float) -> str | None:
    """None if PD's URL gives any HTTP answer within `timeout`, else why not."""
    try:
        client.get(HEALTH_PATH, timeout=timeout)
    except PDUnreachableError as exc:
        return str(exc)
    except PDError:
        return None  # an HTTP error is still an answer: HTTP reaches PD
    return None


def make_pd_client(
    transport_mode: TransportMode,
    endpoint: Endpoint,
    kube: PodLister,
    api_client: Any,
    *,
    timeout: float = 5.0,
    probe_timeout: float = 2.0,
    http_transport: Transport | None = None,
    exec_fn: ExecFn | None = None,
    tls: ssl.SSLContext | None = None,
) -> PDClient | None:
    """The PD client spec.preflight.pdTransport asks for; None when there is no PD address.

    Auto: HTTP if the URL answers within `probe_timeout`, else pd-ctl in a PD pod if one
    runs. When the chosen way is impossible, an UnavailablePDClient carries the reason, so
    the PD checks fail with it instead of the controller raising. With `endpoint.pd_tls_secret`
    set, HTTP uses `tls` (the context of that Secret) and pd-ctl the PD pod's own mounted TLS
    Secret.
    """
    tls_secret = endpoint.pd_tls_secret
    cluster = endpoint.cluster_name
    ns = endpoint.cluster_namespace
    kind = endpoint.cluster_kind or V1_KIND

    def http() -> HTTPPDClient | None:
        if endpoint.pd_url is None:
            return None
        return HTTPPDClient(
            endpoint.pd_url,
            timeout=timeout,
            transport=http_transport,
            tls=tls,
            tls_secret=tls_secret,
        )

    def exec_client(why_not_http: str = "") -> PDClient:
        prefix = f"{why_not_http}; and " if why_not_http else ""
        if cluster is None:
            return UnavailablePDClient(
                f"{prefix}pdTransport Exec needs spec.cluster to find a PD pod "
                "(spec.target alone names no pods)"
            )
        try:
            pod = choose_pd_pod(kube, ns, cluster, kind)
        except Exception as exc:  # any API failure: report it rather than crash the gate
            return UnavailablePDClient(f"{prefix}listing PD pods in {ns} failed: {exc}")
        if pod is None:
            return UnavailablePDClient(
                f"{prefix}no Running PD pod of {kind} {ns}/{cluster} to exec pd-ctl in "
                f"(selector {database_pod_selector(kind, cluster, 'pd')})"
                "; is the cluster up and spec.cluster right?"
            )
        name = str(pod["metadata"]["name"])
        tls_dir = None
        if tls_secret is not None:
            tls_dir = pd_tls_dir(pod, tls_secret, PD_CONTAINER)
            if tls_dir is None:
                return UnavailablePDClient(
                    f"{prefix}PD pod {ns}/{name} mounts no TLS Secret in its {PD_CONTAINER!r} "
                    "container for pd-ctl (TiDB Operator mounts the PD server Secret at "
                    "/var/lib/pd-tls when spec.tlsCluster is on); use pdTransport: HTTP"
                )
        return ExecPDClient(
            api_client, ns, name, exec_fn=exec_fn, timeout=max(timeout, 10.0), tls_dir=tls_dir
        )

    if transport_mode == "HTTP":
        return http()
    if transport_mode == "Exec":
        return exec_client()
    client = http()
    if client is None:
        return exec_client() if cluster is not None else None
    failure = _http_failure(client, probe_timeout)
    if failure is None or cluster is None:
        return client  # without a cluster there is no pod to exec in: keep HTTP's own errors
    return exec_client(failure)
