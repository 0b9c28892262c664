"""`tidb-bench runner step|prepare|cleanup`: the benchmark pod's entry point (runner.py runs).

The arguments are the Job's (domain/manifests.py builds them; no credentials); the result
is the termination message. A prepare or cleanup Job also runs each custom workload's own
prepare or cleanup (docs/workloads.md).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from tidb_bench_operator.adapters import mysql
from tidb_bench_operator.config import Credentials, credentials_from_env
from tidb_bench_operator.domain.api.runner_message import (
    DatasetReport,
    RunnerFailure,
    StepReport,
    series_line,
    termination_text,
)
from tidb_bench_operator.domain.manifests import NO_BUILTIN
from tidb_bench_operator.domain.sysbench import (
    Command,
    build_sysbench_argv,
    diagnose_failure,
    parse_sysbench_output,
)
from tidb_bench_operator.domain.sysbench.custom import (
    CustomScript,
    custom_failure,
    not_implemented,
)
from tidb_bench_operator.errors import DatabaseError, SysbenchError, TidbBenchError
from tidb_bench_operator.runner import (
    PREPARE_THREADS,
    STOP,
    TERMINATION_LOG,
    StepPlan,
    analyze_and_warm,
    cleanup_dataset,
    connection_args,
    exec_plan,
    failure_report,
    prepare_dataset,
    run_step,
)


def custom_dataset(
    plan: StepPlan,
    creds: Credentials,
    scripts: Sequence[CustomScript],
    command: Command,
    policy: str = "IfMissing",
    out: TextIO | None = sys.stdout,
) -> list[str]:
    """Run each custom workload's own `prepare` (Always: `cleanup` first) or `cleanup`.

    Whether its tables exist cannot be judged from outside the script, so a custom workload
    is prepared whenever dataset.prepare is not Never (docs/workloads.md). A script that
    does not define the command is passed over. Returns the names of those that ran it.
    """
    done: list[str] = []
    if command == "prepare" and policy == "Never":
        return done
    if command == "prepare" and plan.workload == NO_BUILTIN:
        # No built-in test made the database (prepare_dataset does): the script needs it.
        with mysql.connect(plan.dsn(creds)) as conn:
            mysql.query(conn, f"CREATE DATABASE IF NOT EXISTS `{plan.db}`")
    for script in scripts:
        own = replace(plan, custom=script)
        ran = False
        always = command == "prepare" and policy == "Always"
        steps: list[Command] = ["cleanup", "prepare"] if always else [command]
        for step in steps:
            # A parallel prepare (sysbench-tpcc's) loads with as many threads as the
            # built-in tests' prepare at most; a plain one runs once whatever the threads.
            argv = build_sysbench_argv(
                command=step,
                extra_args=script.args,
                threads=PREPARE_THREADS,
                **connection_args(own, creds),
            )
            ex = exec_plan(own, argv, creds, out)
            if ex.exit_code != 0 and not_implemented(ex.output, step):
                if out is not None:
                    out.write(f"tidb-bench: {script.name} defines no {step}: passed over\n")
                continue
            if ex.exit_code != 0:
                found = diagnose_failure(parse_sysbench_output(ex.output, workload=script.name))
                raise custom_failure(
                    script,
                    found or SysbenchError("fatal", f"sysbench {step} exited {ex.exit_code}"),
                )
            ran = True
        if ran:
            done.append(script.name)
    return done


def add_runner_arguments(sub: Any) -> None:
    """Register `tidb-bench runner step|prepare|cleanup` on an argparse subparsers object."""
    import argparse

    runner = sub.add_parser("runner", help="inside a benchmark pod: run one step")
    actions = runner.add_subparsers(dest="action", required=True)
    for action in ("step", "prepare", "cleanup"):
        p = actions.add_parser(action)
        p.add_argument("--workload", required=True)
        p.add_argument("--host", required=True)
        p.add_argument("--port", type=int, required=True)
        p.add_argument("--db", default="sbtest")
        p.add_argument("--tables", type=int, default=1)
        p.add_argument("--table-size", type=int, default=10000)
        p.add_argument("--auto-inc", choices=["on", "off"], default="on")
        p.add_argument("--sysbench-arg", action="append", default=[], dest="extra_args")
        p.add_argument("--termination-log", default=TERMINATION_LOG)
        p.add_argument("--tls-dir", help="the mounted MySQL client certificate Secret")
        p.add_argument("--custom", action="append", default=[], help="a custom workload (JSON)")
        if action == "step":
            p.add_argument("--threads", type=int, required=True)
            p.add_argument("--duration", type=int, required=True)
            p.add_argument("--warmup", type=int, default=0)
            p.add_argument("--report-interval", type=int, default=10)
            p.add_argument("--percentile", type=int, default=95)
            p.add_argument("--rand-type")
            p.add_argument("--ignore-errors")
            p.add_argument("--start-at", type=datetime.fromisoformat)
            p.add_argument("--max-start-skew", type=float, default=3.0)
            p.add_argument("--rate", type=int, help="sysbench --rate: this client's target")
            p.add_argument("--events", type=int, help="sysbench --events: the step's bound")
        if action == "prepare":
            p.add_argument(
                "--policy", choices=["IfMissing", "Always", "Never"], default="IfMissing"
            )
            p.add_argument("--analyze", choices=["on", "off"], default="off")
            p.add_argument("--warm-up", choices=["on", "off"], default="off")
    _ = argparse


def plan_from_args(args: Any) -> StepPlan:
    return StepPlan(
        workload=args.workload,
        threads=getattr(args, "threads", 1),
        duration=getattr(args, "duration", 1),
        host=args.host,
        port=args.port,
        db=args.db,
        tables=args.tables,
        table_size=args.table_size,
        warmup=getattr(args, "warmup", 0),
        report_interval=getattr(args, "report_interval", 10),
        percentile=getattr(args, "percentile", 95),
        rand_type=getattr(args, "rand_type", None),
        ignore_errors=getattr(args, "ignore_errors", None),
        auto_inc=args.auto_inc == "on",
        extra_args=list(args.extra_args),
        start_at=getattr(args, "start_at", None),
        max_start_skew=getattr(args, "max_start_skew", 3.0),
        tls_dir=getattr(args, "tls_dir", None),
        rate=getattr(args, "rate", None),
        events=getattr(args, "events", None),
        custom=next(iter(custom_scripts(args)), None) if args.action == "step" else None,
    )


def custom_scripts(args: Any) -> list[CustomScript]:
    """The `--custom=` workloads, checked as the spec was (TidbBenchError when not valid)."""
    return [CustomScript.from_arg(text) for text in getattr(args, "custom", None) or []]


def main_runner(args: Any) -> int:
    """`tidb-bench runner ...`: do the action, write the termination message, exit 0/1."""
    STOP.install()
    plan = plan_from_args(args)
    creds = credentials_from_env()
    report: StepReport | DatasetReport | RunnerFailure
    try:
        if args.action == "step":
            report = run_step(plan, creds)
            print(series_line(report.series))
        elif args.action == "prepare":
            report = DatasetReport(action="prepared", tables=0)
            if plan.workload != NO_BUILTIN:
                report = analyze_and_warm(
                    plan,
                    creds,
                    prepare_dataset(plan, creds, args.policy),
                    analyze=args.analyze == "on",
                    warm_up=args.warm_up == "on",
                )
            scripts = custom_dataset(plan, creds, custom_scripts(args), "prepare", args.policy)
            report = report.model_copy(update={"scripts": scripts or None})
        else:
            report = DatasetReport(action="cleaned", tables=0)
            if plan.workload != NO_BUILTIN:
                report = cleanup_dataset(plan, creds)
            scripts = custom_dataset(plan, creds, custom_scripts(args), "cleanup")
            report = report.model_copy(update={"scripts": scripts or None})
        code = 0
    except (TidbBenchError, DatabaseError) as exc:
        report = failure_report(exc)
        print(f"tidb-bench: FAILED: {exc}", file=sys.stderr)
        code = 143 if STOP.requested.is_set() else 1
    text = termination_text(report)
    try:
        Path(args.termination_log).write_text(text)
    except OSError as exc:  # outside a pod (no /dev/termination-log): stdout has it all
        print(f"tidb-bench: cannot write {args.termination_log}: {exc}", file=sys.stderr)
    print("tidb-bench: result " + text)
    return code
