"""The project's exception tree: every error a user can act on says what, where and what to do.

Everything this package raises on purpose derives from TidbBenchError; adapters convert
their clients' exceptions (kubernetes, urllib3, pymysql, sockets) into these at their
boundary, so no caller needs to know a client library. Every exception class of the
package is defined here, once; the second column says who raises it. The tree (a unit test
keeps this drawing equal to the classes):

    TidbBenchError
    ├── SpecError             domain, cli       a spec or run file is invalid (names the field)
    ├── ParseError            domain, adapters  tool output could not be understood
    ├── SysbenchError         domain, runner    sysbench ran and failed (`kind`)
    ├── PDError               adapters.pd       PD unreachable or answering an error
    │   ├── PDUnreachableError  adapters.pd     no answer at all
    │   ├── PDResponseError     adapters.pd     a non-200 answer
    │   └── PDExecError         adapters.pd     pd-ctl could not run in the PD pod
    ├── DatabaseError         adapters.mysql    the database refused or could not be reached
    ├── TLSConfigError        adapters.tls      a client certificate Secret cannot be used
    ├── KubeError             adapters.k8s      an API call failed
    │   └── KubeForbidden       adapters.k8s    403: a RoleBinding is missing
    └── CrdsNotServed         controller        the CRDs are not served at start

StoreError (domain.results_store) is a ValueError of the stored results' own format, not
in the tree: it is raised and caught inside the package.
"""


class TidbBenchError(Exception):
    """Base of every error this package raises on purpose."""


class SpecError(TidbBenchError):
    """A BenchmarkRun spec (or run file) is invalid; the message names the field."""

    def __init__(self, field: str, problem: str, hint: str = "") -> None:
        self.field = field
        self.problem = problem
        self.hint = hint
        text = f"spec.{field}: {problem}" if field else problem
        if hint:
            text += f" ({hint})"
        super().__init__(text)


class ParseError(TidbBenchError):
    """Tool output (sysbench, pd-ctl, PD API) could not be understood."""


class SysbenchError(TidbBenchError):
    """sysbench ran but failed; `kind` is a short machine-readable cause."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


class PDError(TidbBenchError):
    """PD could not be reached or answered with an error."""


class PDUnreachableError(PDError):
    """No answer from PD at all: connection refused, timeout, DNS or TLS failure."""

    def __init__(self, message: str, *, url: str, reason: str) -> None:
        super().__init__(message)
        self.url = url
        self.reason = reason


class PDResponseError(PDError):
    """PD answered with a non-200 status; `body` is PD's message (its JSON string decoded)."""

    def __init__(self, message: str, *, url: str, status: int, body: str) -> None:
        super().__init__(message)
        self.url = url
        self.status = status
        self.body = body


class PDExecError(PDError):
    """pd-ctl could not be run in the PD pod, or printed something that is not PD's answer."""


class DatabaseError(TidbBenchError):
    """The database could not be reached or refused a query; `errno` is MySQL's code."""

    def __init__(self, errno: int | None, message: str) -> None:
        self.errno = errno
        super().__init__(message)


class TLSConfigError(TidbBenchError):
    """A client certificate Secret (or directory) cannot be used: a key missing, bad PEM."""


class KubeError(TidbBenchError):
    """An API call failed for a reason other than 'not found' or 'already exists'.

    Every Kube method raises this (or KubeForbidden) instead of the client's exceptions, so
    callers never need to know the Kubernetes client.
    """


class KubeForbidden(KubeError):
    """HTTP 403: the controller's ServiceAccount may not do this (a RoleBinding is missing)."""


class CrdsNotServed(TidbBenchError):
    """The API server does not serve our resources: the CRDs are missing or not ready."""


class StoreError(ValueError):
    """The stored results cannot be put back together; the message says what is missing."""
