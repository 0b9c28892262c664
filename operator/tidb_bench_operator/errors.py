"""The project's exception tree: every error a user can act on says what, where and what to do."""


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
