"""PD through pd-ctl exec'd in a PD pod, and judging pd-ctl's text (it exits 0 on failure)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any

from tidb_bench_operator.adapters.pd.client import (
    LOCAL_PD_TLS_URL,
    LOCAL_PD_URL,
    PD_CONTAINER,
    PD_CTL,
    ExecFn,
    answer_facts,
    parse_answer,
    status_hint,
)
from tidb_bench_operator.domain.cluster.tls import pd_ctl_tls_flags
from tidb_bench_operator.domain.pd import Operator, Store, parse_operators, parse_stores
from tidb_bench_operator.errors import (
    PDError,
    PDExecError,
    PDResponseError,
    PDUnreachableError,
)

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
    said = (
        f"pd-ctl printed an error line of {len(line)} characters, not quoted; it exits 0 on "
        "failure, so this was read from its output"
    )
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
        body = answer_facts(match.group("body"))
        return PDResponseError(
            f"{where}: `pd-ctl {command}`: PD answered HTTP {status} ({body}; "
            f"{status_hint(status)}; {said})",
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
        return parse_answer(
            self.describe(), parse_stores, self.run("store"), asked="pd-ctl `store`", kind="stores"
        )

    def operators(self) -> list[Operator]:
        """pd-ctl `operator show` (= GET /operators, body printed as is)."""
        return parse_answer(
            self.describe(),
            parse_operators,
            self.run("operator", "show"),
            asked="pd-ctl `operator show`",
            kind="operators",
        )


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
