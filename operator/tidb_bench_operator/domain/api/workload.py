"""`spec.customWorkloads`: a team's own sysbench Lua workload from a ConfigMap (docs/workloads.md).

The pure checks are in domain/sysbench/custom.py (the options' allow-list, the argv); the
controller refuses custom workloads unless TIDB_BENCH_ALLOW_CUSTOM_WORKLOADS is true
(domain/trust/reach.py), and checks the ConfigMap and its script key at Pending.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from tidb_bench_operator.domain.api.common import DNS_SUBDOMAIN, SpecModel
from tidb_bench_operator.domain.api.load_shape import no_duplicates
from tidb_bench_operator.domain.sysbench import LUA_WORKLOADS
from tidb_bench_operator.domain.sysbench.custom import (
    NAME_RE,
    CustomScript,
    OptionKind,
    check_option_names,
    script_path,
    validate_custom_args,
)
from tidb_bench_operator.errors import SpecError

if TYPE_CHECKING:
    from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec

#: What spec.workloads items look like: a built-in test or a custom workload's name.
WORKLOAD_NAME = r"^[a-z][a-z0-9_-]{0,62}$"
MAX_OPTIONS = 64
WorkloadName = Annotated[str, Field(pattern=WORKLOAD_NAME, max_length=63)]


class ConfigMapRef(SpecModel):
    """A ConfigMap in the run's namespace."""

    name: str = Field(
        min_length=1, max_length=253, pattern=DNS_SUBDOMAIN, description="ConfigMap name."
    )


class CustomWorkload(SpecModel):
    """A sysbench Lua script of your own, with the files it requires, from a ConfigMap."""

    name: str = Field(
        min_length=1,
        max_length=40,
        pattern=r"^[a-z]([-a-z0-9]*[a-z0-9])?$",
        description="The name spec.workloads uses for it (lowercase letters, digits and -; "
        "built-in test names have underscores, so it never shadows one). Steps and results "
        "carry it as their workload.",
    )
    config_map_ref: ConfigMapRef = Field(
        description="The ConfigMap holding the script and every file it `require`s, one key "
        "per file (`kubectl create configmap NAME --from-file=a.lua --from-file=b.lua`). "
        "All its keys are mounted read-only as files in one directory, which is on the "
        'script\'s Lua path: `require "b"` finds key b.lua.',
    )
    script: str = Field(
        min_length=5,
        max_length=253,
        pattern=r"^[A-Za-z0-9_][-._A-Za-z0-9]*\.lua$",
        description="The key of the script sysbench runs (`sysbench <script> prepare|run|"
        "cleanup`); it must end in .lua. prepare and cleanup run only if the script "
        "defines them.",
    )
    options: dict[str, OptionKind] = Field(
        default_factory=dict,
        description="The allow-list of the script's own options (its sysbench.cmdline."
        "options), name to kind of value: int, number, bool, word (a name) or size (e.g. "
        "64K). Options sysbench or the controller own (threads, time, mysql-*, ...) cannot "
        "be listed.",
    )
    args: list[Annotated[str, Field(pattern=r"^--[A-Za-z][A-Za-z0-9_-]*(=.*)?$")]] = Field(
        default_factory=list,
        max_length=64,
        description="The script's options for every prepare, run and cleanup, as "
        "`--name=value`, each in `options` (or one of sysbench's --rate, --rand-seed, "
        "--db-ps-mode, --rand-spec-*, --rand-pareto-h, --mysql-compression, "
        "--thread-stack-size). spec.extraArgs and spec.dataset do not apply to it.",
    )

    def validate_semantics(self, field: str) -> None:
        """Raise SpecError for what the schema cannot say about this entry."""
        if self.name in LUA_WORKLOADS or not NAME_RE.fullmatch(self.name):
            raise SpecError(f"{field}.name", f"{self.name!r} is not a custom workload name")
        if len(self.options) > MAX_OPTIONS:
            raise SpecError(
                f"{field}.options", f"{len(self.options)} options; at most {MAX_OPTIONS}"
            )
        check_option_names(self.options, f"{field}.options")
        validate_custom_args(self.args, self.options, field_=f"{field}.args")

    def script_for(self, namespace: str) -> CustomScript:
        """What the runner needs, for a run in `namespace`."""
        return CustomScript(
            name=self.name,
            path=script_path(self.name, self.script),
            configmap=f"{namespace}/{self.config_map_ref.name}",
            key=self.script,
            options=dict(self.options),
            args=list(self.args),
        )


def check_custom_workloads(spec: BenchmarkRunSpec, prefix: str) -> None:
    """Every workload is built in or a customWorkloads entry; entries are used, unique."""
    custom = [w.name for w in spec.custom_workloads]
    no_duplicates(f"{prefix}customWorkloads", custom)
    for i, name in enumerate(spec.workloads):
        if name not in LUA_WORKLOADS and name not in custom:
            raise SpecError(
                f"{prefix}workloads[{i}]",
                f"unknown workload {name!r}",
                "one of sysbench's tests ("
                + ", ".join(LUA_WORKLOADS)
                + ") or the name of an entry of spec.customWorkloads",
            )
    for i, entry in enumerate(spec.custom_workloads):
        field = f"{prefix}customWorkloads[{i}]"
        entry.validate_semantics(field)
        if entry.name not in spec.workloads:
            raise SpecError(
                f"{field}.name",
                f"{entry.name!r} is not in spec.workloads",
                "add it to spec.workloads, or remove the entry",
            )
