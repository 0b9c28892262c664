"""A team's own sysbench Lua workload from a ConfigMap: its options' allow-list and its argv.

A custom workload is a Lua script (and the files it `require`s) that the runner pod mounts
read-only from a ConfigMap, one directory per workload (`WORKLOADS_DIR/<name>/<key>`).
sysbench 1.0.20 finds `require "x"` through Lua's package.path, which starts with
`./?.lua` (the working directory, where the runner keeps its private files) and takes
LUA_PATH first: the runner sets `LUA_PATH=<dir>/?.lua;;` (lua_path), so the script's
siblings are found wherever it runs (checked with the test bed's sysbench 1.0.20).

Its own options are passed only through the allow-list the spec declares (`options`, name
to kind), checked like extraArgs: `--name=value` with a plain value of that kind. Options
sysbench or the driver own (threads, time, the connection, the password, ...) cannot be
declared: the controller sets them as for the built-in tests. docs/workloads.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from tidb_bench_operator.domain.sysbench.options import (
    EXTRA_ARG_KINDS,
    LUA_WORKLOADS,
    OWNED_OPTIONS,
    check_extra_value,
    split_arg,
)
from tidb_bench_operator.errors import SpecError, SysbenchError

#: Where the runner pod mounts each custom workload's ConfigMap (a directory per workload).
WORKLOADS_DIR = "/var/run/tidb-bench/workloads"

#: The kinds of value a custom option may take (as EXTRA_ARG_KINDS spells them).
OptionKind = Literal["int", "number", "bool", "word", "size"]
OPTION_KINDS: tuple[str, ...] = get_args(OptionKind)

#: Options of sysbench itself (not of the script) a custom workload may be given in its args:
#: the RNG, the prepared-statement mode and --rate, as for the built-in tests.
_CORE = (
    "db-ps-mode", "rand-spec-iter", "rand-spec-pct", "rand-spec-res", "rand-pareto-h",
    "rand-seed", "mysql-compression", "rate", "thread-stack-size",
)  # fmt: skip
CORE_ARG_KINDS: dict[str, str] = {name: EXTRA_ARG_KINDS[name] for name in _CORE}

#: sysbench options a script may not declare as its own: those the controller sets (the
#: built-in tests' `tables`, `table-size` and `auto-inc` are oltp_common's, not sysbench's,
#: so a script may declare them, as sysbench-tpcc does `tables`), and those that read local
#: files, change what runs or what the output means.
_SCRIPT_OPTIONS_OWNED = {
    name: where
    for name, where in OWNED_OPTIONS.items()
    if name not in ("tables", "table-size", "auto-inc")
}
_NOT_DECLARABLE = frozenset(
    {
        "config-file",
        "luajit-cmd",
        "mysql-socket",
        "mysql-dry-run",
        "verbosity",
        "forced-shutdown",
        "debug",
        "validate",
        "help",
        "version",
        "db-debug",
        *CORE_ARG_KINDS,
    }
)
_OPTION_NAME_RE = re.compile(r"[a-z][a-z0-9_-]{0,62}")
SCRIPT_KEY_RE = re.compile(r"[A-Za-z0-9_][-._A-Za-z0-9]{0,250}\.lua")
NAME_RE = re.compile(r"[a-z][a-z0-9-]{0,38}[a-z0-9]|[a-z]")


def normal(name: str) -> str:
    """An option name as sysbench compares them: dashes and underscores are the same."""
    return name.replace("_", "-")


def check_option_names(options: Mapping[str, str], field_: str) -> None:
    """Raise SpecError for a declared option the script may not own."""
    for name in options:
        where = f"{field_}.{name}"
        if not _OPTION_NAME_RE.fullmatch(name):
            raise SpecError(
                where, "is not an option name", "lowercase letters, digits, - and _, e.g. scale"
            )
        key = normal(name)
        if key in _SCRIPT_OPTIONS_OWNED:
            raise SpecError(
                where,
                f"--{key} is set by the controller",
                f"use spec.{_SCRIPT_OPTIONS_OWNED[key]} instead, and remove it from options",
            )
        if key in _NOT_DECLARABLE:
            raise SpecError(
                where,
                f"--{key} is an option of sysbench itself, not of the script",
                "remove it from options"
                + (" (it may be given in args as it is)" if key in CORE_ARG_KINDS else ""),
            )


def validate_custom_args(
    args: Sequence[str], options: Mapping[str, str], *, field_: str = "args"
) -> list[str]:
    """Check a custom workload's args against its declared options (and CORE_ARG_KINDS).

    Same rules as extraArgs: `--name=value` (a bare `--name` for booleans), a plain value of
    the option's kind; return the args unchanged or raise SpecError naming the item.
    """
    kinds = {**CORE_ARG_KINDS, **{normal(k): v for k, v in options.items()}}
    allowed = ", ".join(f"--{name}" for name in sorted(kinds))
    for i, arg in enumerate(args):
        where = f"{field_}[{i}]"
        name, value = split_arg(arg, where, allowed)
        kind = kinds.get(name)
        if kind is None:
            why = (
                f"--{name} is set by the controller"
                if name in OWNED_OPTIONS and name not in ("tables", "table-size", "auto-inc")
                else f"--{name} is not in this workload's options"
            )
            raise SpecError(where, why, f"declare it in options, or use one of: {allowed}")
        problem = check_extra_value(name, kind, value)
        if problem is not None:
            raise SpecError(where, problem)
    return list(args)


@dataclass(frozen=True)
class CustomScript:
    """What the runner needs to run a custom workload: no credentials, safe in Job args."""

    name: str
    #: The script's path in the runner pod (WORKLOADS_DIR/<name>/<key>).
    path: str
    #: The ConfigMap it comes from, as `namespace/name`, and the script's key.
    configmap: str
    key: str
    options: dict[str, str] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)

    @property
    def directory(self) -> str:
        return self.path.rsplit("/", 1)[0]

    @property
    def source(self) -> str:
        """Where the script comes from, for error messages."""
        return f"ConfigMap {self.configmap} key {self.key!r}"

    def lua_path(self) -> str:
        """LUA_PATH for sysbench: the script's directory first, then the default path (`;;`)."""
        return f"{self.directory}/?.lua;;"

    def to_arg(self) -> str:
        """The runner's `--custom=` argument (JSON)."""
        return json.dumps(
            {
                "name": self.name,
                "path": self.path,
                "configmap": self.configmap,
                "key": self.key,
                "options": self.options,
                "args": self.args,
            },
            separators=(",", ":"),
            sort_keys=True,
        )

    @classmethod
    def from_arg(cls, text: str) -> CustomScript:
        """Read a `--custom=` argument back, checking it as the spec was checked."""
        try:
            data: Any = json.loads(text)
            script = cls(
                name=str(data["name"]),
                path=str(data["path"]),
                configmap=str(data["configmap"]),
                key=str(data["key"]),
                options={str(k): str(v) for k, v in dict(data.get("options") or {}).items()},
                args=[str(a) for a in data.get("args") or []],
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise SpecError("customWorkloads", f"unreadable --custom argument ({exc})") from exc
        script.check()
        return script

    def check(self) -> None:
        """Raise SpecError when a field could not have come from a valid spec."""
        if not NAME_RE.fullmatch(self.name) or self.name in LUA_WORKLOADS:
            raise SpecError("customWorkloads.name", f"invalid custom workload name {self.name!r}")
        if not SCRIPT_KEY_RE.fullmatch(self.key) or self.path != script_path(self.name, self.key):
            raise SpecError("customWorkloads.script", f"invalid script {self.path!r}")
        for kind in self.options.values():
            if kind not in OPTION_KINDS:
                raise SpecError("customWorkloads.options", f"unknown option kind {kind!r}")
        check_option_names(self.options, "customWorkloads.options")
        validate_custom_args(self.args, self.options, field_="customWorkloads.args")


def script_path(name: str, key: str) -> str:
    """Where the runner finds a custom workload's script."""
    return f"{WORKLOADS_DIR}/{name}/{key}"


_MOUNTED_FILE_RE = re.compile(re.escape(WORKLOADS_DIR) + r"/[a-z0-9-]+/([-._A-Za-z0-9]+\.lua)")


def name_files(text: str, script: CustomScript) -> str:
    """sysbench's messages with the mounted paths replaced by the ConfigMap's keys:
    `/var/run/.../orders/order_common.lua:12:` becomes `key order_common.lua:12:`."""
    return _MOUNTED_FILE_RE.sub(lambda m: f"key {m.group(1)}", text)


def not_implemented(output: str, command: str) -> bool:
    """True when sysbench said the script has no such command (1.0.20 exits 1 then)."""
    return f"test does not implement the '{command}' command" in output


_MODULE_RE = re.compile(r"module '(?P<module>[A-Za-z0-9_.]+)' not found")


def custom_failure(
    script: CustomScript, exc: Exception, *, exit_code: int | None = None
) -> SysbenchError:
    """The failure of a custom workload's sysbench, naming its ConfigMap and key.

    A script that printed no end-of-run report although sysbench exited 0 replaced
    sysbench's report hook: that is the script's doing, so it is not retried like a client
    that was killed (kind `no-report`, not `no-summary`).
    """
    kind = exc.kind if isinstance(exc, SysbenchError) else "no-report"
    text = name_files(str(exc), script)
    if exit_code == 0 and kind in ("no-summary", "no-report"):
        kind = "no-report"
        text = (
            "sysbench exited 0 but printed no end-of-run report (SQL statistics, latency): "
            "the script prints no summary (it replaces sysbench.hooks.report_cumulative?); "
            "keep sysbench's default report"
        )
    module = _MODULE_RE.search(text)
    if module is not None:
        text += (
            f" (add {module.group('module').replace('.', '/')}.lua to ConfigMap "
            f"{script.configmap}: every key of it is on the script's Lua path)"
        )
    return SysbenchError(kind, f"custom workload {script.name!r} ({script.source}): {text}")
