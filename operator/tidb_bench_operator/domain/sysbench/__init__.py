"""sysbench 1.0.20 / 1.1: options and argv, output parsing, failure diagnosis, step results.

The facts about sysbench this package relies on (output formats, quirks, exit codes) are in
docs/sysbench.md with their upstream sources. Modules, by job:

- options: the workloads, the extraArgs allow-list and the argv builder;
- config_file: the --config-file line that carries the password, and what it cannot carry;
- model / parse: what one invocation printed, read line by line (streaming);
- quirks: the notes a reader needs about sysbench's known quirks;
- diagnose: why a run has no usable report, as one precise SysbenchError;
- steps: the fixed StepResult from a parsed run, and a step's clients combined.
"""

from tidb_bench_operator.domain.sysbench.diagnose import diagnose_failure
from tidb_bench_operator.domain.sysbench.model import Interval, RunSummary, SysbenchRun
from tidb_bench_operator.domain.sysbench.options import (
    EXTRA_ARG_KINDS,
    LUA_WORKLOADS,
    OWNED_OPTIONS,
    RAND_TYPES,
    Command,
    Workload,
    build_sysbench_argv,
    validate_extra_args,
    validate_workload,
)
from tidb_bench_operator.domain.sysbench.parse import parse_sysbench_lines, parse_sysbench_output
from tidb_bench_operator.domain.sysbench.steps import (
    combine_step_results,
    histogram_percentile,
    merge_histograms,
    to_step_result,
)

__all__ = [
    "EXTRA_ARG_KINDS",
    "LUA_WORKLOADS",
    "OWNED_OPTIONS",
    "RAND_TYPES",
    "Command",
    "Interval",
    "RunSummary",
    "SysbenchRun",
    "Workload",
    "build_sysbench_argv",
    "combine_step_results",
    "diagnose_failure",
    "histogram_percentile",
    "merge_histograms",
    "parse_sysbench_lines",
    "parse_sysbench_output",
    "to_step_result",
    "validate_extra_args",
    "validate_workload",
]
