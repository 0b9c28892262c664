"""Pure readings of the Jobs and pods the controller created (plain camelCase dicts in).

What the reconciler needs to know about a Job or pod — finished or not, placed or not, what
its runner reported, why it failed — answered from the objects alone, so each rule has one
home and a direct test.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from tidb_bench_operator.domain.api.runner_message import Report, RunnerFailure, read_report
from tidb_bench_operator.domain.manifests import (
    LABEL_CLIENT,
    LABEL_ROLE,
    LABEL_ROUND,
    LABEL_RUN,
    LABEL_STEP,
    RunRef,
    label_value,
)
from tidb_bench_operator.domain.objects import JSONView

#: The label the Job controller puts on a Job's pods (Kubernetes 1.20; later also
#: batch.kubernetes.io/controller-uid).
JOB_CONTROLLER_UID = "controller-uid"
#: The runner's container in every benchmark pod (domain.manifests.build_runner_job).
RUNNER_CONTAINER = "runner"


def run_selector(
    run: RunRef, role: str | None = None, step: int | None = None, round_: int | None = None
) -> str:
    """The label selector of a run's objects, optionally of one role, step and round."""
    terms = [f"{LABEL_RUN}={label_value(run.name)}"]
    if role is not None:
        terms.append(f"{LABEL_ROLE}={role}")
    if step is not None:
        terms.append(f"{LABEL_STEP}={step}")
    if round_ is not None:
        terms.append(f"{LABEL_ROUND}={round_}")
    return ",".join(terms)


def client_index(pod: JSONView) -> str:
    """Which client of its step a pod is (its tidbbench.io/client label; "0" when unset)."""
    return str((pod["metadata"].get("labels") or {}).get(LABEL_CLIENT, "0"))


def job_finished(job: JSONView) -> bool:
    """True once the Job succeeded or failed (by its counts or its conditions)."""
    s = job.get("status") or {}
    if s.get("succeeded") or s.get("failed"):
        return True
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in s.get("conditions") or []
    )


def unschedulable_reason(pods: Sequence[JSONView]) -> str:
    """The scheduler's reason for the first pod it cannot place, or ''."""
    for pod in pods:
        if (pod.get("status") or {}).get("phase") != "Pending" or pod["spec"].get("nodeName"):
            continue
        for c in (pod.get("status") or {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False":
                return f"pod {pod['metadata']['name']}: {c.get('message') or c.get('reason')}"
    return ""


def pods_of(job: JSONView, pods: Sequence[JSONView]) -> list[JSONView]:
    """The pods the Job controller created for `job`."""
    uid = job["metadata"]["uid"]
    return [p for p in pods if (p["metadata"].get("labels") or {}).get(JOB_CONTROLLER_UID) == uid]


@dataclass(frozen=True)
class Termination:
    """A terminated container's message (the runner's result) and exit code."""

    message: str
    exit_code: int | None


def termination_of(job: JSONView, pods: Sequence[JSONView]) -> Termination | None:
    """The first non-empty termination message of the Job's pods, or None.

    The runner's result comes from here, not from the log: pod status is always readable,
    while logs need the node (and may be gone).
    """
    for pod in pods_of(job, pods):
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            term = (cs.get("state") or {}).get("terminated") or {}
            if term.get("message"):
                code = term.get("exitCode")
                return Termination(str(term["message"]), None if code is None else int(code))
    return None


def runner_report(
    job: JSONView, pods: Sequence[JSONView], expected: type[Report]
) -> Report | RunnerFailure | None:
    """The runner's report from the Job's termination message; None when it left none."""
    term = termination_of(job, pods)
    if term is None:
        return None
    return read_report(term.message, expected, exit_code=term.exit_code)


def job_failure_text(job: JSONView, pods: Sequence[JSONView]) -> str:
    """Why a Job failed when its runner left no result: the Job's condition or the exit code."""
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Failed" and c.get("status") == "True":
            return f"{c.get('reason')}: {c.get('message')}"
    for pod in pods_of(job, pods):
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            term = (cs.get("state") or {}).get("terminated") or {}
            if term:
                return f"runner exited {term.get('exitCode')} ({term.get('reason')})"
    return "the Job failed without a result"


def start_at_of(jobs: Sequence[JSONView]) -> datetime | None:
    """The agreed start time in the runner args of already created step Jobs, if any."""
    for job in jobs:
        for c in job["spec"]["template"]["spec"]["containers"]:
            for a in c.get("args") or []:
                if a.startswith("--start-at="):
                    return datetime.fromisoformat(a.split("=", 1)[1])
    return None


def node_names(pods: Sequence[JSONView]) -> list[str]:
    """The nodes the pods were bound to, sorted, without repeats."""
    return sorted({str(p["spec"]["nodeName"]) for p in pods if p["spec"].get("nodeName")})


#: Container waiting reasons that waiting longer does not cure (the kubelet's own words):
#: the run fails at once, naming the image and the reason.
HOPELESS_WAITING = ("ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
                    "CreateContainerConfigError", "CreateContainerError")  # fmt: skip
#: ... and one the kubelet may still overcome: it fails the run once the pod is this old.
PULL_GRACE_SECONDS = 30.0


def start_failure(pods: Sequence[JSONView], now: datetime) -> str:
    """Why a pod's container can never start (image pull, container config), or ''."""
    for pod in pods:
        created = _time((pod.get("metadata") or {}).get("creationTimestamp"))
        age = (now - created).total_seconds() if created else 0.0
        images = {c["name"]: c.get("image") for c in pod["spec"].get("containers") or []}
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            reason = str(waiting.get("reason") or "")
            if reason in HOPELESS_WAITING or (
                reason == "ErrImagePull" and age >= PULL_GRACE_SECONDS
            ):
                image = cs.get("image") or images.get(cs.get("name"))
                return (
                    f"pod {pod['metadata']['name']}: image {image}: {reason}: "
                    f"{waiting.get('message') or 'no message'}"
                )
    return ""


def _time(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def loss_cause(job: JSONView, pods: Sequence[JSONView]) -> str:
    """Why a Job's runner ended without a result: OOM-killed, evicted, node lost, deleted...

    Read from the pod (its status reason and the container's termination reason), else the
    Job's Failed condition; a Job without pods had them deleted.
    """
    name = job["metadata"]["name"]
    mine = pods_of(job, pods)
    for pod in mine:
        ps = pod.get("status") or {}
        pod_name = pod["metadata"]["name"]
        if ps.get("reason") == "Evicted":
            return f"pod {pod_name} was evicted: {ps.get('message') or 'by its node'}"
        if (
            ps.get("reason") in ("NodeLost", "NodeShutdown", "Terminated")
            or ps.get("phase") == "Unknown"
        ):
            node = pod["spec"].get("nodeName")
            return f"pod {pod_name} was lost with its node {node}: {ps.get('message') or ''}"
        for cs in ps.get("containerStatuses") or []:
            term = (cs.get("state") or {}).get("terminated") or {}
            if term.get("reason") == "OOMKilled":
                limit = _memory_limit(pod, str(cs.get("name")))
                return (
                    f"pod {pod_name} was OOM-killed (memory limit {limit}): give the runner "
                    "more memory (spec.resources.limits.memory) or fewer threads"
                )
            if term:
                return (
                    f"pod {pod_name}: runner exited {term.get('exitCode')} "
                    f"({term.get('reason')}) without a result"
                )
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Failed" and c.get("status") == "True":
            return f"Job {name}: {c.get('reason')}: {c.get('message')}"
    if not mine:
        return f"the pods of Job {name} were deleted before the controller read their result"
    return f"Job {name} ended without a result"


def was_killed(job: JSONView, pods: Sequence[JSONView]) -> bool:
    """True when the Job's pod was killed from outside (evicted, OOM, node lost, a signal).

    Its termination message may then be a log tail (FallbackToLogsOnError), not a result.
    """
    for pod in pods_of(job, pods):
        ps = pod.get("status") or {}
        if ps.get("reason") in ("Evicted", "NodeLost", "NodeShutdown", "Terminated"):
            return True
        for cs in ps.get("containerStatuses") or []:
            term = (cs.get("state") or {}).get("terminated") or {}
            if term.get("reason") == "OOMKilled" or term.get("exitCode") in (137, 143):
                return True
    return False


def _memory_limit(pod: JSONView, container: str) -> str:
    for c in pod["spec"].get("containers") or []:
        if c.get("name") == container:
            return str(((c.get("resources") or {}).get("limits") or {}).get("memory", "none"))
    return "none"
