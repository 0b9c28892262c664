"""BenchmarkRun orchestration, one module per task of a run's life (see reconciler.py).

reconciler  the entry point: status in, phase task, status patch out
context     RunContext (one reconcile's state and verbs) and RunKube (what it needs)
admission   Pending      preflight  Preflight     dataset  Preparing
steps       Running      finish     the end, and ttlSecondsAfterFinished
guard       watches each measured step for disturbances (docs/guard.md)
gate        observes PD, Kubernetes and the database for the preflight checks
"""

from tidb_bench_operator.reconcile.run.context import PreflightFn, RunKube
from tidb_bench_operator.reconcile.run.gate import PreflightOutcome
from tidb_bench_operator.reconcile.run.reconciler import Outcome, RunReconciler

__all__ = ["Outcome", "PreflightFn", "PreflightOutcome", "RunKube", "RunReconciler"]
