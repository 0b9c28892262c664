"""Every kopf registration, kept thin: handlers hand plain dicts to the reconcilers.

What kopf knows stays here: its settings, its `status.kopf` key (taken out before a
reconciler sees a body), its timers and its memo. The reconcilers and the metrics are built
once at startup and kept in kopf's memo (`memo.controller`), which kopf copies into each
object's own memo; that per-object memo also holds when to look at the object again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import kopf

from tidb_bench_operator.adapters.metrics import Metrics
from tidb_bench_operator.config import Settings
from tidb_bench_operator.domain.models import GROUP, VERSION, is_terminal
from tidb_bench_operator.reconcile import RunReconciler
from tidb_bench_operator.schedule_reconciler import ScheduleReconciler
from tidb_bench_operator.wiring import (
    CrdsNotServed,
    build_run_reconciler,
    build_schedule_reconciler,
    wait_for_crds,
)

#: How often each active BenchmarkRun is looked at (unless it asked for a later look).
RUN_TICK_SECONDS = 1.0
# How often each BenchmarkSchedule is looked at: a run is created at most this long after its
# fire time. One list call per look, so cheap even for an every-minute schedule.
SCHEDULE_TICK_SECONDS = 2.0


@dataclass(frozen=True)
class Controller:
    """What the handlers work with, built once at startup."""

    runs: RunReconciler
    schedules: ScheduleReconciler
    metrics: Metrics


def _controller(memo: kopf.Memo) -> Controller | None:
    found = memo.get("controller")
    return found if isinstance(found, Controller) else None


def _plain(body: Any) -> dict[str, Any]:
    """kopf's Body is a live view; reconcilers get an independent plain dict."""
    return dict(json.loads(json.dumps(body, default=dict)))


def _ours(body: Any) -> dict[str, Any]:
    """The object as the reconcilers see it: .status without kopf's own key.

    kopf may keep its bookkeeping in `status.kopf` (older progress storage); reconcilers
    compute their status patch against what they wrote, so they never see (or remove) it.
    """
    plain = _plain(body)
    if isinstance(plain.get("status"), dict):
        plain["status"].pop("kopf", None)
    return plain


@kopf.on.startup(id="configure")
def on_startup_configure(
    settings: kopf.OperatorSettings, memo: kopf.Memo, logger: Any, **_: Any
) -> None:
    """Keep kopf's bookkeeping in annotations: our status schema is ours alone."""
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="tidbbench.io")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="tidbbench.io", key="last-handled-configuration"
    )
    settings.watching.server_timeout = 60
    settings.posting.level = logging.WARNING
    logging.getLogger("kopf.objects").addFilter(_QuietTimers())
    cfg = Settings.from_env()
    # Startup handlers finish before kopf scans API discovery: make sure it will find us.
    try:
        wait_for_crds(cfg, logger.info)
    except CrdsNotServed as exc:
        logger.error("%s", exc)
        raise kopf.PermanentError(str(exc)) from exc
    logging.getLogger("kopf.objects").addFilter(_QuietMetricsEvents())
    metrics = Metrics()
    memo["controller"] = Controller(
        runs=build_run_reconciler(cfg), schedules=build_schedule_reconciler(cfg), metrics=metrics
    )
    if cfg.metrics_port:
        try:
            metrics.serve(cfg.metrics_port)
            logger.info("metrics on :%d/metrics", cfg.metrics_port)
        except OSError as exc:
            # Benchmarks matter more than their metrics: keep running, but say so loudly.
            logger.error(
                "metrics endpoint disabled: cannot listen on port %d (%s); set "
                "TIDB_BENCH_METRICS_PORT to a free port, or to 0 to turn it off",
                cfg.metrics_port,
                exc.strerror or exc,
            )
    logger.info("tidb-bench-operator ready (runner image %s)", cfg.runner_image)


class _QuietTimers(logging.Filter):
    """Drop kopf's 'Timer ... succeeded.' line: it would be logged every second per run."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.getMessage().startswith("Timer ") and "succeeded" in record.getMessage())


class _QuietMetricsEvents(logging.Filter):
    """Drop kopf's 'Handler 'metrics-...' succeeded.' line: it comes with every watch event."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return not (text.startswith("Handler 'metrics-") and text.endswith("succeeded."))


def _needs_reconcile(status: Any, spec: Any, **_: Any) -> bool:
    phase = (status or {}).get("phase")
    if not is_terminal(phase):
        return True
    # Finished runs only matter while ttlSecondsAfterFinished may still delete their Jobs.
    return (spec or {}).get("ttlSecondsAfterFinished") is not None


@kopf.timer(
    GROUP, VERSION, "benchmarkruns", id="reconcile", interval=RUN_TICK_SECONDS,
    when=_needs_reconcile,
)  # fmt: skip
async def on_timer_benchmarkrun(body: Any, memo: kopf.Memo, **_: Any) -> None:
    """Advance the run one step; blocking client calls run in a worker thread.

    A run that asked to be looked at later than the next tick (it waits for preflight's
    next attempt, or for the scheduler) is skipped until then.
    """
    controller = _controller(memo)
    now = time.monotonic()
    if controller is None or now < memo.get("look_again_at", 0.0):
        return
    # tick() writes the status itself and never raises: kopf's own patch, failing past its
    # retries, would stop this timer for good (and a raise would only be logged).
    hint = await asyncio.to_thread(controller.runs.tick, _ours(body)) or 0.0
    # Half a tick early: the timer's next firing after that point is the wanted one.
    memo["look_again_at"] = now + hint - RUN_TICK_SECONDS / 2 if hint > RUN_TICK_SECONDS else 0.0


@kopf.timer(
    GROUP, VERSION, "benchmarkschedules", id="reconcile-schedule", interval=SCHEDULE_TICK_SECONDS
)
async def on_timer_benchmarkschedule(
    body: Any, patch: kopf.Patch, memo: kopf.Memo, **_: Any
) -> None:
    """Create due runs, record finished ones, flag regressions, trim; blocking calls in a thread."""
    controller = _controller(memo)
    if controller is None:
        return
    out = await asyncio.to_thread(controller.schedules.reconcile, _ours(body))
    if out.status:
        patch.status.update(out.status)


# Metrics follow the watch stream rather than the reconcile calls: every status patch comes
# back as an event, finished runs (no longer reconciled) are listed again after a restart,
# and a deletion is an event too, so no series outlives its object.
@kopf.on.event(GROUP, VERSION, "benchmarkruns", id="metrics-run")
def on_event_benchmarkrun(body: Any, memo: kopf.Memo, type: str | None = None, **_: Any) -> None:
    """Keep the run's metric series equal to its status."""
    controller = _controller(memo)
    if controller is None:
        return
    metrics = controller.metrics
    if type == "DELETED":
        metrics.forget_run(_plain(body))
        controller.runs.forget(str((body.get("metadata") or {}).get("uid")))
    else:
        metrics.observe_run(_plain(body))


@kopf.on.event(GROUP, VERSION, "benchmarkschedules", id="metrics-schedule")
def on_event_benchmarkschedule(
    body: Any, memo: kopf.Memo, type: str | None = None, **_: Any
) -> None:
    """Keep the schedule's metric series equal to its status."""
    controller = _controller(memo)
    if controller is None:
        return
    metrics = controller.metrics
    if type == "DELETED":
        metrics.forget_schedule(_plain(body))
    else:
        metrics.observe_schedule(_plain(body))


@kopf.on.probe(id="reconciles")
def on_probe_reconciles(memo: kopf.Memo, **_: Any) -> dict[str, str]:
    """/healthz: red (HTTP 500) while a run's reconciles have kept failing for 2 minutes.

    kopf answers 500 when a probe raises; the message names the runs and their last error.
    """
    controller = _controller(memo)
    failing = controller.runs.health() if controller is not None else {}
    if failing:
        raise kopf.PermanentError(f"runs whose reconciles keep failing: {failing}")
    return {"failingRuns": "none"}


def run_operator(namespaces: list[str] | None = None) -> None:
    """Run the controller until interrupted (what `tidb-bench operator` does)."""
    cfg = Settings.from_env()
    kopf.configure(verbose=cfg.debug)
    kopf.run(
        standalone=True,
        clusterwide=not namespaces,
        namespaces=namespaces or [],
        liveness_endpoint=cfg.liveness_endpoint,
    )
