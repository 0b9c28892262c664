"""The project's exception tree: every error a user can act on says what, where and what to do.

Everything this package raises on purpose derives from TidbBenchError; adapters convert
their clients' exceptions (kubernetes, urllib3, pymysql, sockets) into these at their
boundary, so no caller needs to know a client library. The tree (a unit test keeps this
drawing equal to the classes):

    TidbBenchError
    ├── SpecError             errors            a spec or run file is invalid (names the field)
    ├── ParseError            errors            tool output could not be understood
    ├── SysbenchError         errors            sysbench ran and failed (`kind`)
    ├── PDError               errors            PD unreachable or answering an error
    │   ├── PDUnreachableError  adapters.pd     no answer at all
    │   ├── PDResponseError     adapters.pd     a non-200 answer
    │   └── PDExecError         adapters.pd     pd-ctl could not run in the PD pod
    ├── DatabaseError         adapters.mysql    the database refused or could not be reached
    ├── TLSConfigError        adapters.tls      a client certificate Secret cannot be used
    ├── KubeError             adapters.k8s      an API call failed
    │   └── KubeForbidden       adapters.k8s    403: a RoleBinding is missing
    └── CrdsNotServed         wiring            the CRDs are not served at start
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
