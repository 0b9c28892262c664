"""How far a run's author may reach through the controller: the platform team's settings.

The controller holds more reach than the people who create runs (it reads every
TidbCluster, runs Jobs in any image, sits on the cluster network), so a spec that asks the
controller to go beyond the run's own namespace, its own runner image and built-in tests,
or (when the platform team says so) the operator's own services is refused at Pending,
naming the setting that would allow it. Pure: config.py reads the settings,
reconcile/run/admission.py applies them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec

ALLOW_CROSS_NAMESPACE = "TIDB_BENCH_ALLOW_CROSS_NAMESPACE"
ALLOW_IMAGE_OVERRIDE = "TIDB_BENCH_ALLOW_IMAGE_OVERRIDE"
OPERATOR_TARGETS_ONLY = "TIDB_BENCH_OPERATOR_TARGETS_ONLY"
ALLOW_CUSTOM_WORKLOADS = "TIDB_BENCH_ALLOW_CUSTOM_WORKLOADS"
#: Where each setting is explained (relative to the repository root).
DOC = "docs/trust.md"
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class Reach:
    """What runs may ask of the controller beyond their own namespace and its runner image.

    The defaults are the safe ones: clusters in the run's own namespace only, the
    controller's runner image only, explicit `target` endpoints allowed.
    """

    #: Any run may name a cluster in any namespace.
    any_namespace: bool = False
    #: Namespaces whose clusters any run may name (besides its own).
    cluster_namespaces: frozenset[str] = field(default_factory=frozenset)
    #: spec.image may name an image other than the controller's runner image.
    image_override: bool = False
    #: Runs measure only clusters of TiDB Operator: no spec.target.host or pdURL, and no
    #: spec.metrics.prometheusURL (the controller would query it on the author's behalf).
    operator_targets_only: bool = False
    #: spec.customWorkloads may run a Lua script of the author's in the benchmark pods.
    custom_workloads: bool = False

    def allows_namespace(self, cluster_namespace: str, run_namespace: str) -> bool:
        return (
            cluster_namespace == run_namespace
            or self.any_namespace
            or cluster_namespace in self.cluster_namespaces
        )


def parse_namespaces(text: str | None) -> tuple[bool, frozenset[str]]:
    """TIDB_BENCH_ALLOW_CROSS_NAMESPACE: (any namespace, the namespaces listed).

    Unset, empty or `false`: none; `true` or `*`: any; else a comma-separated list of
    namespace names. Raises ValueError naming the variable for anything else.
    """
    value = (text or "").strip()
    if value.lower() in ("", "false"):
        return False, frozenset()
    if value.lower() in ("true", "*"):
        return True, frozenset()
    names = [n.strip() for n in value.split(",") if n.strip()]
    bad = [n for n in names if not _NAMESPACE.match(n)]
    if bad or not names:
        raise ValueError(
            f"{ALLOW_CROSS_NAMESPACE}={text!r}: {bad[0] if bad else 'no name'!r} is not a "
            "namespace name; use false (the default: the run's own namespace only), true (any "
            "namespace) or a comma-separated list of namespaces, e.g. tidb-shared,tidb-perf"
        )
    return False, frozenset(names)


def parse_flag(name: str, text: str | None) -> bool:
    """A true/false setting (unset or empty: false). Raises ValueError naming the variable."""
    value = (text or "").strip().lower()
    if value in ("", "false"):
        return False
    if value == "true":
        return True
    raise ValueError(f"{name}={text!r}: must be true or false (unset: false)")


def refusal(
    spec: BenchmarkRunSpec, run_namespace: str, reach: Reach, runner_image: str
) -> tuple[str, str] | None:
    """(reason, message) when the spec asks for more than `reach` allows, else None.

    Looks at the spec alone: nothing is read, so a refused run has reached nothing.
    """
    ask = "ask the platform team that installed the controller to set"
    if spec.cluster is not None and spec.cluster.namespace is not None:
        ns = spec.cluster.namespace
        if not reach.allows_namespace(ns, run_namespace):
            return (
                "CrossNamespaceNotAllowed",
                f"spec.cluster.namespace: {ns!r} is not this run's namespace "
                f"{run_namespace!r}, and this controller lets a run name only clusters in its "
                f"own namespace{_listed(reach.cluster_namespaces)}; create the run in namespace "
                f"{ns!r} (or remove spec.cluster.namespace), or {ask} {ALLOW_CROSS_NAMESPACE} "
                f"(true, or a comma-separated list of namespaces including {ns}) in the "
                f"controller Deployment's environment ({DOC})",
            )
    if spec.image is not None and spec.image != runner_image and not reach.image_override:
        return (
            "ImageOverrideNotAllowed",
            f"spec.image: this controller runs benchmark pods only in its own runner image "
            f"{runner_image!r}; remove spec.image (or set it to that image), or {ask} "
            f"{ALLOW_IMAGE_OVERRIDE}=true in the controller Deployment's environment ({DOC})",
        )
    if spec.custom_workloads and not reach.custom_workloads:
        names = ", ".join(w.name for w in spec.custom_workloads)
        return (
            "CustomWorkloadNotAllowed",
            f"spec.customWorkloads: this controller runs only sysbench's built-in tests, not "
            f"a Lua script of the run's author ({names}): a script runs in the benchmark pod "
            f"beside the run's database password, as an image of the author's choice would; "
            f"remove spec.customWorkloads (and their names from spec.workloads), or {ask} "
            f"{ALLOW_CUSTOM_WORKLOADS}=true in the controller Deployment's environment ({DOC})",
        )
    target = spec.target
    if reach.operator_targets_only and target is not None and (target.host or target.pd_url):
        where = "spec.target.host" if target.host else "spec.target.pdURL"
        return (
            "TargetNotAllowed",
            f"{where}: this controller measures only clusters of TiDB Operator "
            f"({OPERATOR_TARGETS_ONLY}=true), not explicit endpoints; remove spec.target.host "
            f"and spec.target.pdURL and name the cluster in spec.cluster, or {ask} "
            f"{OPERATOR_TARGETS_ONLY}=false in the controller Deployment's environment ({DOC})",
        )
    prometheus = spec.metrics.prometheus_url
    if reach.operator_targets_only and prometheus is not None:
        # The controller itself queries it: an address of the author's, as pdURL is.
        return (
            "TargetNotAllowed",
            f"spec.metrics.prometheusURL: this controller reads server metrics only from its "
            f"own Prometheus or the resource metrics API ({OPERATOR_TARGETS_ONLY}=true), not "
            f"from an address a run names; remove spec.metrics.prometheusURL, or {ask} "
            f"{OPERATOR_TARGETS_ONLY}=false in the controller Deployment's environment ({DOC})",
        )
    return None


def _listed(namespaces: Iterable[str]) -> str:
    names = sorted(namespaces)
    return f" or in {', '.join(names)}" if names else ""
