"""Every kopf registration, kept thin: the watch stream goes to the Driver and the metrics.

What kopf knows stays here: its settings, its `status.kopf` key (taken out before a
reconciler sees a body), the index of runs by cluster (the queue's in-memory form, filled
from the watch stream before any other handler runs) and its memo. The Driver, the
reconcilers and the metrics are built once at startup and kept in kopf's memo
(`memo.controller`). There are no kopf timers or daemons: the Driver decides when each
object is looked at (driver.py), so kopf puts no finalizer on runs or schedules.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass
from typing import Any

import kopf

from tidb_bench_operator.adapters.metrics import Metrics
from tidb_bench_operator.config import Settings
from tidb_bench_operator.controller.driver import Driver
from tidb_bench_operator.controller.ghosts import has_patterns, watches
from tidb_bench_operator.controller.wiring import build, wait_for_crds
from tidb_bench_operator.domain.api.common import GROUP, VERSION
from tidb_bench_operator.domain.queue import QueueEntry, queue_entry
from tidb_bench_operator.errors import CrdsNotServed


@dataclass(frozen=True)
class Controller:
    """What the handlers work with, built once at startup."""

    driver: Driver
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
async def on_startup_configure(
    settings: kopf.OperatorSettings, memo: kopf.Memo, logger: Any, **_: Any
) -> None:
    """Keep kopf's bookkeeping in annotations (our status schema is ours alone), build the
    controller and start the Driver's loop."""
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="tidbbench.io")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="tidbbench.io", key="last-handled-configuration"
    )
    settings.watching.server_timeout = 60
    settings.posting.level = logging.WARNING
    cfg = Settings.from_env()
    wired = build(cfg)
    # Startup handlers finish before kopf scans API discovery: make sure it will find us.
    try:
        await asyncio.to_thread(wait_for_crds, wired, cfg, logger.info)
    except CrdsNotServed as exc:
        logger.error("%s", exc)
        raise kopf.PermanentError(str(exc)) from exc
    logging.getLogger("kopf.objects").addFilter(_QuietMetricsEvents())
    metrics = Metrics()
    driver = Driver(
        runs=wired.runs, schedules=wired.schedules, kube=wired.kube,
        namespaces=WATCHED or None, experiments=wired.experiments,
    )  # fmt: skip
    memo["controller"] = Controller(driver=driver, metrics=metrics)
    memo["driver_task"] = asyncio.create_task(driver.run(), name="driver")
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


class _QuietMetricsEvents(logging.Filter):
    """Drop kopf's 'Handler 'metrics-...' succeeded.' line: it comes with every watch event."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return not (text.startswith("Handler 'metrics-") and text.endswith("succeeded."))


@kopf.on.cleanup(id="stop-driver")
async def on_cleanup_driver(memo: kopf.Memo, **_: Any) -> None:
    task = memo.get("driver_task")
    if isinstance(task, asyncio.Task):
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@kopf.index(GROUP, VERSION, "benchmarkruns", id="run_queue")
def run_queue(body: Any, **_: Any) -> dict[str, QueueEntry]:
    """Every run by its queue key (domain/queue.py): the one-run-per-cluster queue in memory.

    kopf fills the index from the initial listing before it calls any other handler, so
    after a restart no run is admitted before all runs on its cluster are known.
    """
    found = queue_entry(_ours(body)) if served(body) else None
    return {} if found is None else {found[0]: found[1]}


# Async so that they run on the event loop, where the Driver lives (kopf runs sync handlers
# in threads). Metrics follow the watch stream rather than the reconcile calls: every status
# patch comes back as an event, finished runs (no longer reconciled) are listed again after
# a restart, and a deletion is an event too, so no series outlives its object.
@kopf.on.event(GROUP, VERSION, "benchmarkruns", id="metrics-run")
async def on_event_benchmarkrun(
    body: Any, memo: kopf.Memo, type: str | None = None, **kw: Any
) -> None:
    """Keep the run's metric series equal to its status; tell the Driver (it wakes runs)."""
    controller = _controller(memo)
    if controller is None or not served(body):
        return
    metrics = controller.metrics
    plain = _ours(body)
    if type == "DELETED":
        metrics.forget_run(plain)
    else:
        metrics.observe_run(plain)
    index: kopf.Index[str, QueueEntry] = kw["run_queue"]  # kopf passes indexes by their id
    controller.driver.run_event(type, plain, index)


@kopf.on.event(GROUP, VERSION, "benchmarkschedules", id="metrics-schedule")
async def on_event_benchmarkschedule(
    body: Any, memo: kopf.Memo, type: str | None = None, **_: Any
) -> None:
    """Keep the schedule's metric series equal to its status; tell the Driver."""
    controller = _controller(memo)
    if controller is None or not served(body):
        return
    metrics = controller.metrics
    plain = _ours(body)
    if type == "DELETED":
        metrics.forget_schedule(plain)
    else:
        metrics.observe_schedule(plain)
    controller.driver.schedule_event(type, plain)


@kopf.on.event(GROUP, VERSION, "benchmarkexperiments", id="experiment")
async def on_event_benchmarkexperiment(
    body: Any, memo: kopf.Memo, type: str | None = None, **_: Any
) -> None:
    """Tell the Driver; it looks at the experiment (and holds its cluster's queue)."""
    controller = _controller(memo)
    if controller is None or not served(body):
        return
    controller.driver.experiment_event(type, _ours(body))


@kopf.on.probe(id="reconciles")
def on_probe_reconciles(memo: kopf.Memo, **_: Any) -> dict[str, str]:
    """/healthz: red (HTTP 500) while a run's reconciles have kept failing for 2 minutes.

    kopf answers 500 when a probe raises; the message names the runs and their last error.
    """
    controller = _controller(memo)
    failing = controller.driver.health() if controller is not None else {}
    if failing:
        raise kopf.PermanentError(f"runs whose reconciles keep failing: {failing}")
    return {"failingRuns": "none"}


#: The namespaces `tidb-bench operator --namespace` watches (empty: the whole cluster); the
#: Driver looks for a previous controller's ghosts there (controller/ghosts.py).
WATCHED: list[str] = []


def run_operator(namespaces: list[str] | None = None) -> None:
    """Run the controller until interrupted (what `tidb-bench operator` does).

    Given plain namespace names, kopf watches each; given patterns, kopf watches the cluster
    and the handlers keep the namespaces the patterns match (`served`). kopf's own pattern
    support (1.45.2) starts a watcher per matching namespace and holds the handlers of every
    newly seen object until each watcher of an indexed resource has listed once; a watcher
    stopped before its first listing (its namespace gone, e.g. one still terminating when
    the controller started) never releases that hold, and no run of a namespace made after
    it was ever reconciled (tests/e2e/test_namespace_churn.py).
    """
    WATCHED[:] = namespaces or []
    cfg = Settings.from_env()
    kopf.configure(verbose=cfg.debug)
    patterns = has_patterns(WATCHED)
    kopf.run(
        standalone=True,
        clusterwide=not namespaces or patterns,
        namespaces=[] if patterns else (namespaces or []),
        liveness_endpoint=cfg.liveness_endpoint,
    )


def served(body: Any) -> bool:
    """Whether this controller serves the object's namespace: always, unless `--namespace`
    has patterns (kopf then watches the whole cluster for it)."""
    if not has_patterns(WATCHED):
        return True
    namespace = str((body.get("metadata") or {}).get("namespace") or "")
    return watches(WATCHED, namespace)
