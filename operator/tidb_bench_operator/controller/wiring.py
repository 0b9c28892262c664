"""Build the controller from settings: one Kubernetes client, the real adapters, composed.

Composition only: what each dependency does lives in reconcile/run/connections.py (the run's
database, PD and fingerprint), controller/startup.py (the CRD wait) and the adapters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from tidb_bench_operator.adapters.k8s import Kube, load_api_client
from tidb_bench_operator.config import Settings
from tidb_bench_operator.controller.startup import wait_until_served
from tidb_bench_operator.reconcile.experiment.reconciler import ExperimentReconciler
from tidb_bench_operator.reconcile.run import RunReconciler
from tidb_bench_operator.reconcile.run.connections import (
    build_pd_look,
    build_preflight,
    build_server_facts,
    build_usage,
)
from tidb_bench_operator.reconcile.schedule.reconciler import ScheduleReconciler


@dataclass(frozen=True)
class Wired:
    """The controller's parts, all on one Kubernetes client."""

    kube: Kube
    runs: RunReconciler
    schedules: ScheduleReconciler
    experiments: ExperimentReconciler


def build(cfg: Settings) -> Wired:
    """The reconcilers and the Kubernetes adapter for the cluster in `cfg`."""
    api = load_api_client(cfg.kubeconfig)
    kube = Kube(api)
    runs = RunReconciler(
        kube,
        preflight=build_preflight(kube, api),
        image=cfg.runner_image,
        scheduling_timeout=timedelta(seconds=cfg.scheduling_timeout_seconds),
        server_facts=build_server_facts(kube),
        results_budget=cfg.results_object_bytes,
        pd_look=build_pd_look(kube, api),
        usage=build_usage(kube, api, cfg.prometheus_url),
        reach=cfg.reach,
    )
    return Wired(
        kube=kube,
        runs=runs,
        schedules=ScheduleReconciler(kube),
        experiments=ExperimentReconciler(kube),
    )


def wait_for_crds(wired: Wired, cfg: Settings, log: Callable[[str], None]) -> None:
    """Wait until the cluster in `cfg` serves our resources (controller/startup.py)."""
    wait_until_served(wired.kube, timeout=cfg.crd_wait_seconds, log=log)
