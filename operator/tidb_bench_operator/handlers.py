"""Every kopf registration, kept thin: handlers hand plain dicts to the reconcilers."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from typing import Any

import kopf

from tidb_bench_operator.config import Settings
from tidb_bench_operator.domain.models import GROUP, VERSION
from tidb_bench_operator.wiring import build_run_reconciler

TERMINAL = ("Succeeded", "Failed", "Cancelled")
_state: dict[str, Any] = {}


def _plain(body: Any) -> dict[str, Any]:
    """kopf's Body is a live view; reconcilers get an independent plain dict."""
    return dict(json.loads(json.dumps(body, default=dict)))


@kopf.on.startup(id="configure")
def on_startup_configure(settings: kopf.OperatorSettings, logger: Any, **_: Any) -> None:
    """Keep kopf's bookkeeping in annotations: our status schema is ours alone."""
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="tidbbench.io")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="tidbbench.io", key="last-handled-configuration"
    )
    settings.watching.server_timeout = 60
    settings.posting.level = logging.WARNING
    logging.getLogger("kopf.objects").addFilter(_QuietTimers())
    cfg = Settings.from_env()
    _state["runs"] = build_run_reconciler(cfg)
    logger.info("tidb-bench-operator ready (runner image %s)", cfg.runner_image)


class _QuietTimers(logging.Filter):
    """Drop kopf's 'Timer ... succeeded.' line: it would be logged every second per run."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.getMessage().startswith("Timer ") and "succeeded" in record.getMessage())


def _needs_reconcile(status: Any, spec: Any, **_: Any) -> bool:
    phase = (status or {}).get("phase")
    if phase not in TERMINAL:
        return True
    # Finished runs only matter while ttlSecondsAfterFinished may still delete their Jobs.
    return (spec or {}).get("ttlSecondsAfterFinished") is not None


@kopf.timer(GROUP, VERSION, "benchmarkruns", id="reconcile", interval=1.0, when=_needs_reconcile)
async def on_timer_benchmarkrun(body: Any, patch: kopf.Patch, **_: Any) -> None:
    """Advance the run one step; blocking client calls run in a worker thread."""
    out = await asyncio.to_thread(_state["runs"].reconcile, _plain(body))
    if out.status:
        patch.status.update(out.status)


def run_operator(namespaces: list[str] | None = None) -> None:
    """Run the controller until interrupted (what `tidb-bench operator` does)."""
    kopf.configure(verbose=bool(os.environ.get("TIDB_BENCH_DEBUG")))
    kopf.run(
        standalone=True,
        clusterwide=not namespaces,
        namespaces=namespaces or [],
        liveness_endpoint=os.environ.get("TIDB_BENCH_LIVENESS", "http://0.0.0.0:8080/healthz"),
    )
