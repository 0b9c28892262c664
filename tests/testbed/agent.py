"""The test bed's node agent: a tiny stand-in for the kubelet on the fake nodes.

What it does, as a kubelet would:
- pods that stand in for TiDB/TiKV/PD (TiDB Operator's component label, or the annotation
  `testbed.tidbbench.io/standin`) go Running and Ready with pod IP 127.0.0.1, created bound
  or, as testbed.standin_operator makes them, once the scheduler has bound them;
- every other pod bound to a node runs its containers' `command`+`args` as local processes,
  with the pod's env (value, secretKeyRef, configMapKeyRef, fieldRef, envFrom) and `$(VAR)`
  expansion; stdout/stderr become the container log; the termination message file is
  bind-mounted per container (a private mount namespace via `unshare -m`, like the kubelet's
  per-container mount) and copied into the container status (4096 bytes at most);
- a pod being deleted gets the kubelet's graceful stop: SIGTERM to the container's main
  process only (PID 1 in a real container), SIGKILL to everything left in its session after
  terminationGracePeriodSeconds, then it is removed (grace 0);
- fault injection for tests (fault functions below): an image on a registry under `.invalid`
  (RFC 2606: never resolves) cannot be pulled (ErrImagePull, then ImagePullBackOff); the pod
  annotation `testbed.tidbbench.io/fault: OOMKilled|Evicted` kills a running pod's
  processes and reports it as the kubelet would (terminated OOMKilled, exit 137; or the pod
  Failed with reason Evicted); `LogsUnavailable` makes the pod's log unservable (HTTP 503);
  `NodeUnreachable` plays a node that stopped answering: the pod's processes go on, no
  status is reported any more, and once deleted it stays listed, Terminating, until it is
  force-deleted (grace 0);
- a container without a `command` runs its image's entrypoint, mapped to the project's own
  installed command (IMAGE_ENTRYPOINTS: the Dockerfile's ENTRYPOINT found on the node's PATH,
  i.e. the venv's `tidb-bench`);
- secret, configMap and emptyDir volumes are written to a per-pod directory and bind-mounted
  at their mountPath inside the container's private mount namespace. Paths under /run
  (/var/run/secrets/kubernetes.io/serviceaccount: the ServiceAccount token, CA and namespace
  that the API server's ServiceAccount admission adds) are reached through an overlay of
  /run whose writes stay in the per-pod directory, so the host's /run is never changed;
- KUBERNETES_SERVICE_HOST/PORT point at the API server (the agent's own, on loopback: there
  is no kube-proxy for the `kubernetes` Service's ClusterIP), as the kubelet sets them;
- pods with restartPolicy Always (a Deployment's) are supervised: httpGet/tcpSocket
  liveness and readiness probes run on their schedule; readiness sets the container's and
  the pod's Ready; failureThreshold failed liveness probes kill the container, which is
  restarted (with back-off) like one that exited, counting restartCount and keeping
  lastState; a Warning Event `Unhealthy` is recorded as the kubelet does;
- `GET /containerLogs/<ns>/<pod>/<container>` on one HTTPS port serves logs to the apiserver
  (`kubectl logs`, the Python client's read_namespaced_pod_log);
- `/exec/<ns>/<pod>/<container>?command=...` on the same port speaks the kubelet's WebSocket
  exec protocol (`kubectl exec`, kubernetes.stream.stream): a pod annotated
  `testbed.tidbbench.io/exec: {"/pd-ctl": ["python", "-m", "..."]}` runs that local argv
  prefix plus the command's remaining words (e.g. a stand-in PD pod "has" /pd-ctl).
- `/metrics/cadvisor` on a plain http port (`--cadvisor-port`) serves each container's CPU
  seconds and working set from /proc, and those of stand-in pods bound to a real process
  or a CPU burner by annotation (testbed.cadvisor).

It is test code: the controller never knows it is there.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime as dt
import hashlib
import http.server
import json
import logging
import os
import re
import shlex
import shutil
import signal
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from testbed.cadvisor import Cadvisor
from testbed.cadvisor import serve as serve_cadvisor

log = logging.getLogger("testbed.agent")

STANDIN_COMPONENTS = {"pd", "tikv", "tidb", "tiflash", "ticdc", "tiproxy", "pump"}
STANDIN_ANNOTATION = "testbed.tidbbench.io/standin"
EXEC_ANNOTATION = "testbed.tidbbench.io/exec"
MAX_TERMINATION_MESSAGE = 4096
FAULT_ANNOTATION = "testbed.tidbbench.io/fault"
#: Server-side length of one pod watch; the agent lists all pods again after each.
WATCH_SECONDS = 30
#: Seconds (one try each) a pod status update is retried while the API server is away.
STATUS_RETRIES = 120
#: Images whose entrypoint the node "has": repository -> the Dockerfile's ENTRYPOINT, looked
#: up on the node's PATH (the venv's bin first). A unit test keeps it equal to the Dockerfile
#: and to deploy/'s image.
IMAGE_ENTRYPOINTS = {"ghcr.io/tidb-bench/tidb-bench-operator": ["tidb-bench"]}
#: Restart back-off of a crashed container: the kubelet's 10 s doubling to 5 min, scaled down.
RESTART_BACKOFF = (1.0, 2.0, 4.0, 8.0)


def image_repository(image: str) -> str:
    """ghcr.io/x/y:1.0 -> ghcr.io/x/y (tag and digest removed; a registry port is kept)."""
    image = image.split("@", 1)[0]
    last = image.rsplit("/", 1)[-1]
    return image[: len(image) - len(last)] + last.split(":", 1)[0]


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Agent:
    """Watches pods bound to nodes and plays kubelet for them."""

    def __init__(self, api: client.CoreV1Api, workdir: Path, path_prefix: str) -> None:
        self.api = api
        self.workdir = workdir
        self.path_prefix = path_prefix
        self.logs = workdir / "pod-logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.procs: dict[str, list[subprocess.Popen[bytes]]] = {}
        self.handled: set[str] = set()
        self.lock = threading.Lock()
        self.grace: dict[str, float] = {}
        #: Pods whose node "does not answer" (fault NodeUnreachable): never reported again.
        self.unreachable: set[str] = set()
        self.faults: dict[str, str] = {}
        #: Per-container CPU and memory of what this agent runs or binds (testbed.cadvisor).
        self.cadvisor = Cadvisor(
            workdir.parent, lambda: [n.metadata.name for n in api.list_node().items]
        )
        server = urllib.parse.urlparse(api.api_client.configuration.host)
        self.service_env = {
            "KUBERNETES_SERVICE_HOST": server.hostname or "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(server.port or 443),
            "KUBERNETES_SERVICE_PORT_HTTPS": str(server.port or 443),
            "KUBERNETES_PORT": f"tcp://{server.hostname}:{server.port}",
        }

    # ---- watch loop --------------------------------------------------------------------
    def run(self) -> None:
        rv = ""
        while True:
            try:
                if not rv:
                    pods = self.api.list_pod_for_all_namespaces()
                    for pod in pods.items:
                        self.handle(pod)
                    rv = pods.metadata.resource_version
                w = watch.Watch()
                for ev in w.stream(
                    self.api.list_pod_for_all_namespaces,
                    resource_version=rv,
                    timeout_seconds=WATCH_SECONDS,
                    allow_watch_bookmarks=False,
                    # A client-side bound too: an API server starved of etcd (504s) can
                    # leave a watch open and silent, and a node that waits on it never
                    # starts the pods bound to it.
                    _request_timeout=(10, WATCH_SECONDS + 15),
                ):
                    pod = ev["object"]
                    rv = pod.metadata.resource_version
                    if ev["type"] in ("ADDED", "MODIFIED"):
                        self.handle(pod)
                    elif ev["type"] == "DELETED":
                        self.kill(pod.metadata.uid)
                # Like the kubelet's periodic sync: list again after every watch, so a pod
                # an interrupted stream did not bring is started all the same.
                rv = ""
            except ApiException as exc:
                if exc.status == 410:  # resourceVersion too old: relist
                    rv = ""
                    continue
                log.warning("watch error: %s", exc)
                time.sleep(1)
            except Exception:  # keep the agent alive; the next relist repairs state
                log.exception("agent loop error")
                rv = ""
                time.sleep(1)

    def handle(self, pod: Any) -> None:
        uid = pod.metadata.uid
        if not pod.spec.node_name:
            return
        if (pod.metadata.annotations or {}).get(FAULT_ANNOTATION) == "NodeUnreachable":
            self.unreachable.add(uid)
        if uid in self.unreachable:
            # The node stopped answering: its processes go on, nothing is reported, and a
            # deleted pod stays listed (Terminating, phase unchanged) until force-deleted.
            return
        if pod.metadata.deletion_timestamp is not None:
            self.kill(uid)
            with contextlib.suppress(ApiException):
                self.api.delete_namespaced_pod(
                    pod.metadata.name,
                    pod.metadata.namespace,
                    grace_period_seconds=0,
                    body=client.V1DeleteOptions(
                        grace_period_seconds=0, preconditions=client.V1Preconditions(uid=uid)
                    ),
                )
            return
        if pod.status.phase in ("Succeeded", "Failed"):
            return
        if self.inject_fault(pod):
            return
        labels = pod.metadata.labels or {}
        annotations = pod.metadata.annotations or {}
        standin = (
            labels.get("app.kubernetes.io/component") in STANDIN_COMPONENTS
            or annotations.get(STANDIN_ANNOTATION) == "true"
        )
        if standin:
            # At every event, not only the first: a test changes a live pod's burner.
            self.cadvisor.sync_standin(pod)
        with self.lock:
            if uid in self.handled:
                return
            self.handled.add(uid)
        if standin:
            self.mark_standin_running(pod)
        elif pod.spec.restart_policy == "Always":
            threading.Thread(target=self.run_service_pod, args=(pod,), daemon=True).start()
        else:
            threading.Thread(target=self.run_pod, args=(pod,), daemon=True).start()

    def kill(self, uid: str) -> None:
        with self.lock:
            procs = self.procs.pop(uid, [])
            grace = self.grace.pop(uid, 30.0)
        threads = [threading.Thread(target=stop_gracefully, args=(p, grace)) for p in procs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.cadvisor.forget(uid)

    # ---- fault injection (tests) -----------------------------------------------------------
    def inject_fault(self, pod: Any) -> bool:
        """Play an OOM kill or an eviction asked for by the pod's fault annotation."""
        fault = (pod.metadata.annotations or {}).get(FAULT_ANNOTATION)
        uid = pod.metadata.uid
        if fault not in ("OOMKilled", "Evicted") or uid in self.faults:
            return False
        with self.lock:
            self.faults[uid] = fault
            procs = list(self.procs.get(uid, []))
        for p in procs:
            kill_session(p.pid, signal.SIGKILL)
        return True

    def faulted_status(self, pod: Any, st: dict[str, Any]) -> dict[str, Any]:
        """The final pod status of a pod killed by an injected fault."""
        fault = self.faults.get(pod.metadata.uid)
        if fault == "OOMKilled":
            for cs in st.get("containerStatuses") or []:
                term = cs["state"].get("terminated")
                if term:
                    term.update(exitCode=137, reason="OOMKilled")
                    term.pop("message", None)
        elif fault == "Evicted":
            st.update(
                phase="Failed", reason="Evicted",
                message="The node was low on resource: memory. Container runner was using "
                "700Mi, which exceeds its request of 0.",
            )  # fmt: skip
        return st

    def cannot_pull(self, pod: Any) -> bool:
        """An image on a `.invalid` registry: ErrImagePull, then ImagePullBackOff, for good."""
        bad = [c for c in pod.spec.containers if unpullable(c.image)]
        if not bad:
            return False
        for reason in ("ErrImagePull", "ImagePullBackOff"):
            st = self.base_status(pod, "Pending")
            st["conditions"] = self.conditions(False)
            st["containerStatuses"] = [
                {
                    "name": c.name, "image": c.image, "imageID": "", "ready": False,
                    "restartCount": 0, "started": False,
                    "state": {"waiting": {
                        "reason": reason,
                        "message": f'Back-off pulling image "{c.image}"'
                        if reason == "ImagePullBackOff"
                        else f'rpc error: code = Unknown desc = failed to resolve "{c.image}"',
                    }},
                }
                for c in bad
            ]  # fmt: skip
            self.patch_status(pod, st)
            time.sleep(1.0)
        return True

    # ---- status --------------------------------------------------------------------------
    def patch_status(self, pod: Any, status: dict[str, Any]) -> None:
        # Like the kubelet, keep trying while the API server is away (restarted, overloaded):
        # a pod's final status must not be lost to one failed request.
        if pod.metadata.uid in self.unreachable:
            return
        for _ in range(STATUS_RETRIES):
            try:
                self.api.patch_namespaced_pod_status(
                    pod.metadata.name, pod.metadata.namespace, {"status": status}
                )
                return
            except ApiException as exc:
                if exc.status == 404:
                    return
                if exc.status is not None and exc.status < 500 and exc.status != 429:
                    log.warning("status patch of %s failed: %s", pod.metadata.name, exc.reason)
                    return
            except Exception as exc:
                log.info("status patch of %s: API server away (%s), retrying",
                         pod.metadata.name, type(exc).__name__)  # fmt: skip
            time.sleep(1.0)
        log.warning("status patch of %s failed for %d s: given up", pod.metadata.name,
                    STATUS_RETRIES)  # fmt: skip

    def base_status(self, pod: Any, phase: str) -> dict[str, Any]:
        return {
            "phase": phase,
            "hostIP": "127.0.0.1",
            "podIP": "127.0.0.1",
            "podIPs": [{"ip": "127.0.0.1"}],
            "startTime": now(),
        }

    def conditions(self, ready: bool) -> list[dict[str, str]]:
        t = now()
        status = "True" if ready else "False"
        return [
            {"type": "Initialized", "status": "True", "lastTransitionTime": t},
            {"type": "Ready", "status": status, "lastTransitionTime": t},
            {"type": "ContainersReady", "status": status, "lastTransitionTime": t},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": t},
        ]

    def mark_standin_running(self, pod: Any) -> None:
        st = self.base_status(pod, "Running")
        st["conditions"] = self.conditions(True)
        st["containerStatuses"] = [
            {
                "name": c.name,
                "image": c.image,
                "imageID": "",
                "ready": True,
                "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": now()}},
            }
            for c in pod.spec.containers
        ]
        self.patch_status(pod, st)

    # ---- running a pod -------------------------------------------------------------------
    def run_pod(self, pod: Any) -> None:
        ns, name, uid = pod.metadata.namespace, pod.metadata.name, pod.metadata.uid
        if self.cannot_pull(pod):
            return
        started = now()
        running: list[tuple[Any, subprocess.Popen[bytes] | None, Path, str]] = []
        for c in pod.spec.containers:
            logfile = self.logs / f"{ns}_{name}_{c.name}.log"
            termfile = self.workdir / "termination" / uid / c.name
            termfile.parent.mkdir(parents=True, exist_ok=True)
            termfile.write_text("")
            try:
                proc = self.start_container(pod, c, logfile, termfile)
                running.append((c, proc, termfile, ""))
            except Exception as exc:  # env refs that do not resolve, no command, ...
                logfile.write_text(f"testbed agent: cannot start container: {exc}\n")
                running.append((c, None, termfile, str(exc)))
        with self.lock:
            self.procs[uid] = [p for _, p, _, _ in running if p is not None]
            self.grace[uid] = float(pod.spec.termination_grace_period_seconds or 30)
        st = self.base_status(pod, "Running")
        st["conditions"] = self.conditions(True)
        st["containerStatuses"] = [
            {
                "name": c.name,
                "image": c.image,
                "imageID": "",
                "ready": p is not None,
                "restartCount": 0,
                "started": p is not None,
                "state": {"running": {"startedAt": started}}
                if p is not None
                else {"waiting": {"reason": "CreateContainerConfigError", "message": err}},
            }
            for c, p, _, err in running
        ]
        if all(p is None for _, p, _, _ in running):
            st["phase"] = "Failed"
        self.patch_status(pod, st)

        statuses = []
        ok = True
        for c, p, termfile, err in running:
            if p is None:
                ok = False
                statuses.append(
                    {
                        "name": c.name,
                        "image": c.image,
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "started": False,
                        "state": {
                            "terminated": {
                                "exitCode": 128,
                                "reason": "ContainerCannotRun",
                                "message": err[:MAX_TERMINATION_MESSAGE],
                                "startedAt": started,
                                "finishedAt": now(),
                            }
                        },
                    }
                )
                continue
            code = p.wait()
            if code < 0:  # killed by a signal: report as the kubelet does (128 + signal)
                code = 128 - code
            message = termfile.read_text(errors="replace")[:MAX_TERMINATION_MESSAGE]
            policy = c.termination_message_policy or "File"
            if not message and code != 0 and policy == "FallbackToLogsOnError":
                logtext = (self.logs / f"{ns}_{name}_{c.name}.log").read_text(errors="replace")
                message = "\n".join(logtext.splitlines()[-80:])[-2048:]
            ok = ok and code == 0
            term: dict[str, Any] = {
                "exitCode": code,
                "reason": "Completed" if code == 0 else "Error",
                "startedAt": started,
                "finishedAt": now(),
            }
            if message:
                term["message"] = message
            statuses.append(
                {
                    "name": c.name,
                    "image": c.image,
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": {"terminated": term},
                }
            )
        with self.lock:
            still_ours = uid in self.procs
            self.procs.pop(uid, None)
        if not still_ours:
            return  # deleted while running: nothing to report
        st = self.base_status(pod, "Succeeded" if ok else "Failed")
        st["conditions"] = self.conditions(False)
        st["containerStatuses"] = statuses
        self.patch_status(pod, self.faulted_status(pod, st))

    # ---- pods that run until deleted (restartPolicy Always): probes and restarts ---------
    def run_service_pod(self, pod: Any) -> None:
        """Run each container, restart it when it exits or fails its liveness probe, and
        keep the pod's status (ready, restartCount, lastState) as the kubelet reports it."""
        uid = pod.metadata.uid
        with self.lock:
            self.procs[uid] = []
            self.grace[uid] = float(pod.spec.termination_grace_period_seconds or 30)
        states = {c.name: ContainerState(c) for c in pod.spec.containers}
        publish = threading.Lock()

        def report() -> None:
            with publish:
                st = self.base_status(pod, "Running")
                ready = all(s.ready for s in states.values())
                st["conditions"] = self.conditions(ready)
                st["containerStatuses"] = [s.status() for s in states.values()]
                with self.lock:
                    if uid not in self.procs:
                        return  # deleted meanwhile: nothing to report
                self.patch_status(pod, st)

        threads = [
            threading.Thread(target=self.supervise, args=(pod, s, report), daemon=True)
            for s in states.values()
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def alive(self, uid: str) -> bool:
        with self.lock:
            return uid in self.procs

    def supervise(self, pod: Any, state: ContainerState, report: Any) -> None:
        ns, name, uid = pod.metadata.namespace, pod.metadata.name, pod.metadata.uid
        c = state.container
        logfile = self.logs / f"{ns}_{name}_{c.name}.log"
        termfile = self.workdir / "termination" / uid / c.name
        termfile.parent.mkdir(parents=True, exist_ok=True)
        while self.alive(uid):
            termfile.write_text("")
            try:
                proc = self.start_container(pod, c, logfile, termfile)
            except Exception as exc:
                with logfile.open("a") as f:
                    f.write(f"testbed agent: cannot start container: {exc}\n")
                state.waiting = {"reason": "CreateContainerConfigError", "message": str(exc)}
                report()
                time.sleep(RESTART_BACKOFF[-1])
                continue
            with self.lock:
                if uid not in self.procs:
                    kill_group(proc)
                    return
                self.procs[uid].append(proc)
            state.started(now(), ready=c.readiness_probe is None)
            report()
            killed_by_probe = self.watch_probes(pod, state, proc, report)
            code = proc.wait()
            if code < 0:
                code = 128 - code
            with self.lock:
                if proc in self.procs.get(uid, []):
                    self.procs[uid].remove(proc)
            if not self.alive(uid):
                return
            message = termfile.read_text(errors="replace")[:MAX_TERMINATION_MESSAGE]
            state.terminated(code, killed_by_probe, message)
            backoff = RESTART_BACKOFF[min(state.restart_count, len(RESTART_BACKOFF) - 1)]
            state.restart_count += 1
            state.waiting = {
                "reason": "CrashLoopBackOff",
                "message": f"back-off {backoff:g}s restarting failed container={c.name} "
                f"pod={name}_{ns}({uid})",
            }
            report()
            log.info("%s/%s container %s exited %d; restarting in %gs", ns, name, c.name, code,
                     backoff)  # fmt: skip
            time.sleep(backoff)

    def watch_probes(
        self, pod: Any, state: ContainerState, proc: subprocess.Popen[bytes], report: Any
    ) -> bool:
        """Probe until the process exits; True when a failed liveness probe killed it."""
        c = state.container
        start = time.monotonic()
        probes = [
            Prober("Liveness", c.liveness_probe, c, start),
            Prober("Readiness", c.readiness_probe, c, start),
        ]
        while proc.poll() is None:
            time.sleep(0.2)
            if not self.alive(pod.metadata.uid):
                return False
            for probe in probes:
                result = probe.due(time.monotonic())
                if result is None:
                    continue
                ok, detail = result
                if not ok:
                    self.event(pod, "Warning", "Unhealthy", f"{probe.kind} probe failed: {detail}")
                if probe.kind == "Readiness" and ok != state.ready:
                    state.ready = ok
                    report()
                if probe.kind == "Liveness" and probe.failures >= probe.threshold:
                    self.event(
                        pod,
                        "Normal",
                        "Killing",
                        f"Container {c.name} failed liveness probe, will be restarted",
                    )
                    kill_group(proc)
                    return True
        return False

    def event(self, pod: Any, type_: str, reason: str, message: str) -> None:
        """An Event on the pod, from component `kubelet` as the real one records them."""
        ts = dt.datetime.now(dt.UTC)
        body = {
            "metadata": {
                "generateName": f"{pod.metadata.name}.",
                "namespace": pod.metadata.namespace,
            },
            "involvedObject": {
                "kind": "Pod",
                "namespace": pod.metadata.namespace,
                "name": pod.metadata.name,
                "uid": pod.metadata.uid,
                "apiVersion": "v1",
            },
            "reason": reason,
            "message": message,
            "type": type_,
            "source": {"component": "kubelet", "host": pod.spec.node_name},
            "firstTimestamp": ts.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "lastTimestamp": ts.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "count": 1,
        }
        try:
            self.api.create_namespaced_event(pod.metadata.namespace, body)
        except ApiException as exc:
            log.warning("event %s on %s not recorded: %s", reason, pod.metadata.name, exc.reason)

    def start_container(
        self, pod: Any, c: Any, logfile: Path, termfile: Path
    ) -> subprocess.Popen[bytes]:
        env = self.resolve_env(pod, c)
        command = list(c.command or [])
        if not command:
            command = list(IMAGE_ENTRYPOINTS.get(image_repository(c.image or ""), []))
        if not command:
            raise ValueError(
                f"container {c.name!r} has no command and its image {c.image!r} has no "
                f"entrypoint known to the test bed (known: {', '.join(IMAGE_ENTRYPOINTS)})"
            )
        argv = [expand(a, env) for a in command + list(c.args or [])]
        exe = shutil.which(argv[0], path=env["PATH"])
        if exe is None:
            raise ValueError(f"executable {argv[0]!r} not found on the test bed node's PATH")
        argv[0] = exe
        cwd = c.working_dir if c.working_dir and Path(c.working_dir).is_dir() else None
        if cwd is None:
            cwd = tempfile.mkdtemp(prefix=f"{pod.metadata.name}-", dir=self.workdir)
        tpath = c.termination_message_path or "/dev/termination-log"
        target = Path(tpath)
        # A bind mount needs an existing mount point; on the host it stays an empty file.
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch()
        mounts = [(str(termfile), tpath, False), *self.volume_mounts(pod, c)]
        wrapped = [
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            # The agent's own directory (volume sources) stays visible, like the checkout,
            # when the state directory is under a mount point such as the runner's /tmp.
            mount_script(
                mounts,
                self.workdir / "run-overlay" / pod.metadata.uid / c.name,
                keep=(NODE_ROOT, str(self.workdir)),
            ),
            "sh",
            *argv,
        ]
        out = logfile.open("ab")
        try:
            proc = subprocess.Popen(
                wrapped,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
        finally:
            out.close()
        self.cadvisor.started(pod, c.name, proc.pid)
        return proc

    def volume_mounts(self, pod: Any, c: Any) -> list[tuple[str, str, bool]]:
        """(source dir, mountPath, read-only) of the container's volumes, their content
        written under the agent's workdir (secret and configMap items, emptyDir empty)."""
        volumes = {v.name: v for v in pod.spec.volumes or []}
        mounts = []
        for vm in c.volume_mounts or []:
            volume = volumes.get(vm.name)
            if volume is None:
                raise ValueError(f"volumeMount {vm.name!r} names no volume of the pod")
            source = self.workdir / "volumes" / pod.metadata.uid / vm.name
            if not source.exists():
                source.mkdir(parents=True)
                files: dict[str, str] = {}
                mode = 0o644
                if volume.secret is not None:
                    files = self.read_secret(pod.metadata.namespace, volume.secret.secret_name)
                    mode = volume.secret.default_mode or mode
                elif volume.config_map is not None:
                    cm = self.api.read_namespaced_config_map(
                        volume.config_map.name, pod.metadata.namespace
                    )
                    files = dict(cm.data or {})
                    mode = volume.config_map.default_mode or mode
                elif volume.empty_dir is not None:
                    source.chmod(0o1777)  # as the kubelet makes emptyDir: writable by any uid
                else:
                    raise ValueError(
                        f"volume {vm.name!r}: only secret, configMap and emptyDir volumes "
                        "are supported on the test bed"
                    )
                for key, value in files.items():
                    (source / key).write_text(value)
                    (source / key).chmod(mode)
            path = vm.mount_path
            if not (Path(path).exists() or under_run(path)):
                raise ValueError(
                    f"volumeMount {vm.name!r}: {path} does not exist on the test bed node "
                    "(only existing paths and paths under /run can be mount points)"
                )
            mounts.append((str(source / vm.sub_path) if vm.sub_path else str(source), path,
                           bool(vm.read_only)))  # fmt: skip
        return mounts

    def resolve_env(self, pod: Any, c: Any) -> dict[str, str]:
        ns = pod.metadata.namespace
        env = {
            "PATH": self.path_prefix
            + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": "/tmp",
            "HOSTNAME": pod.metadata.name,
            "LANG": "C.UTF-8",
            **self.service_env,
        }
        for src in c.env_from or []:
            prefix = src.prefix or ""
            if src.secret_ref is not None:
                data = self.read_secret(ns, src.secret_ref.name)
                env.update({prefix + k: v for k, v in data.items()})
            if src.config_map_ref is not None:
                cm = self.api.read_namespaced_config_map(src.config_map_ref.name, ns)
                env.update({prefix + k: v for k, v in (cm.data or {}).items()})
        for e in c.env or []:
            if e.value_from is None:
                env[e.name] = expand(e.value or "", env)
                continue
            vf = e.value_from
            if vf.secret_key_ref is not None:
                ref = vf.secret_key_ref
                data = self.read_secret(ns, ref.name)
                if ref.key not in data:
                    raise ValueError(f"couldn't find key {ref.key} in Secret {ns}/{ref.name}")
                env[e.name] = data[ref.key]
            elif vf.config_map_key_ref is not None:
                ref = vf.config_map_key_ref
                cm = self.api.read_namespaced_config_map(ref.name, ns)
                env[e.name] = (cm.data or {})[ref.key]
            elif vf.field_ref is not None:
                env[e.name] = field_value(pod, vf.field_ref.field_path)
            elif vf.resource_field_ref is not None:
                env[e.name] = "0"
        return env

    def read_secret(self, ns: str, name: str) -> dict[str, str]:
        try:
            sec = self.api.read_namespaced_secret(name, ns)
        except ApiException as exc:
            raise ValueError(f'secret "{name}" not found') from exc
        return {k: base64.b64decode(v).decode() for k, v in (sec.data or {}).items()}


def unpullable(image: str | None) -> bool:
    """An image whose registry host is under `.invalid`: no kubelet could pull it."""
    first = (image or "").split("/", 1)[0]
    return "/" in (image or "") and first.split(":", 1)[0].endswith(".invalid")


def session_pids(sid: int) -> list[int]:
    """Every process of session `sid` (the container's processes: the runner started it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # after the state: ppid, pgrp, session
            found.append(int(entry.name))
    return found


def kill_session(sid: int, sig: int) -> None:
    """Send `sig` to every process of the session (process groups the runner made too)."""
    for pid in session_pids(sid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def stop_gracefully(proc: subprocess.Popen[bytes], grace: float) -> None:
    """The kubelet's stop: SIGTERM to the main process, SIGKILL to all that is left later."""
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    kill_session(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


class ContainerState:
    """What the kubelet reports of one container of a supervised pod."""

    def __init__(self, container: Any) -> None:
        self.container = container
        self.restart_count = 0
        self.ready = False
        self.started_at: str | None = None
        self.waiting: dict[str, str] | None = {"reason": "ContainerCreating"}
        self.last_state: dict[str, Any] = {}

    def started(self, at: str, ready: bool) -> None:
        self.started_at, self.ready, self.waiting = at, ready, None

    def terminated(self, code: int, by_probe: bool, message: str) -> None:
        term: dict[str, Any] = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": self.started_at,
            "finishedAt": now(),
        }
        if message:
            term["message"] = message
        self.last_state = {"terminated": term}
        self.ready = False
        self.started_at = None
        if by_probe:
            log.info("container %s killed after failing its liveness probe", self.container.name)

    def status(self) -> dict[str, Any]:
        state: dict[str, Any] = (
            {"running": {"startedAt": self.started_at}}
            if self.started_at
            else {"waiting": self.waiting or {"reason": "ContainerCreating"}}
        )
        return {
            "name": self.container.name,
            "image": self.container.image,
            "imageID": "",
            "ready": self.ready,
            "restartCount": self.restart_count,
            "started": self.started_at is not None,
            "state": state,
            "lastState": self.last_state,
        }


class Prober:
    """One probe of a container (httpGet or tcpSocket on 127.0.0.1), on its own schedule."""

    def __init__(self, kind: str, probe: Any, container: Any, start: float) -> None:
        self.kind, self.probe, self.container = kind, probe, container
        self.failures = 0
        self.threshold = (probe.failure_threshold or 3) if probe else 0
        self.next = start + ((probe.initial_delay_seconds or 0) if probe else 0)

    def due(self, at: float) -> tuple[bool, str] | None:
        """None when not due (or no probe); else (success, detail), counting failures."""
        if self.probe is None or at < self.next:
            return None
        self.next = at + (self.probe.period_seconds or 10)
        ok, detail = self.check()
        self.failures = 0 if ok else self.failures + 1
        return ok, detail

    def port(self, value: Any) -> int:
        if isinstance(value, int) or str(value).isdigit():
            return int(value)
        for p in self.container.ports or []:
            if p.name == value:
                return int(p.container_port)
        raise ValueError(f"no container port named {value!r}")

    def check(self) -> tuple[bool, str]:
        timeout = self.probe.timeout_seconds or 1
        try:
            if self.probe.http_get is not None:
                get = self.probe.http_get
                url = f"http://127.0.0.1:{self.port(get.port)}{get.path or '/'}"
                try:
                    with urllib.request.urlopen(url, timeout=timeout) as r:
                        code = int(r.status)
                except urllib.error.HTTPError as exc:
                    code = int(exc.code)
                    exc.close()
                ok = 200 <= code < 400
                return ok, f"HTTP probe failed with statuscode: {code}" if not ok else ""
            if self.probe.tcp_socket is not None:
                import socket

                with socket.create_connection(
                    ("127.0.0.1", self.port(self.probe.tcp_socket.port)), timeout=timeout
                ):
                    return True, ""
        except (OSError, ValueError) as exc:
            return False, f"Get {self.probe.http_get.path if self.probe.http_get else ''}: {exc}"
        return False, "only httpGet and tcpSocket probes run on the test bed"


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the container's process group (a stopped process ignores SIGTERM)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def field_value(pod: Any, path: str) -> str:
    """The downward-API value of a fieldRef path."""
    simple = {
        "metadata.name": pod.metadata.name,
        "metadata.namespace": pod.metadata.namespace,
        "metadata.uid": pod.metadata.uid,
        "spec.nodeName": pod.spec.node_name,
        "spec.serviceAccountName": pod.spec.service_account_name,
        "status.hostIP": "127.0.0.1",
        "status.podIP": "127.0.0.1",
    }
    if path in simple:
        return str(simple[path] or "")
    m = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if m:
        src = (pod.metadata.labels if m.group(1) == "labels" else pod.metadata.annotations) or {}
        return str(src.get(m.group(2), ""))
    raise ValueError(f"unsupported fieldRef {path}")


def under_run(path: str) -> bool:
    return path == "/run" or path.startswith(("/run/", "/var/run/"))


#: The node's own software and state (this checkout: its venv, sources and .testbed). A
#: real container has its own root file system, so an emptyDir at /tmp hides nothing the
#: image needs; here the "image" is the host's tree, so a checkout under /tmp (a `mktemp -d`
#: clone, as CI makes) stays visible through a volume mounted over one of its parents.
NODE_ROOT = str(Path(__file__).resolve().parents[2])


def _is_within(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def mount_script(
    mounts: list[tuple[str, str, bool]], overlay: Path, keep: Sequence[str] = (NODE_ROOT,)
) -> str:
    """The shell run in the container's new mount namespace before exec: bind mounts, with
    /run overlaid first when a mount point lies under it (mkdir there lands in `overlay`).

    A path in `keep` that a mount would hide (the mount point is one of its parents) is held
    under /run before the mounts and bound back on top of the mount after it."""
    lines = ["set -e"]
    hidden = [path for path in keep if any(_is_within(path, target) for _, target, _ in mounts)]
    if hidden or any(under_run(target) for _, target, _ in mounts):
        upper, work = overlay / "upper", overlay / "work"
        upper.mkdir(parents=True, exist_ok=True)
        work.mkdir(parents=True, exist_ok=True)
        lines.append(
            "mount -t overlay overlay -o "
            + shlex.quote(f"lowerdir=/run,upperdir={upper},workdir={work}")
            + " /run"
        )
    held = {path: f"/run/tidb-bench-testbed-keep/{k}" for k, path in enumerate(hidden)}
    for path, holder in held.items():
        lines += [f"mkdir -p {holder}", f"mount --bind {shlex.quote(path)} {holder}"]
    for source, target, read_only in mounts:
        real = (
            "/run" + target.removeprefix("/var/run") if target.startswith("/var/run/") else target
        )
        if under_run(target):
            lines.append(f"mkdir -p {shlex.quote(real)}")
        lines.append(f"mount --bind {shlex.quote(source)} {shlex.quote(real)}")
        for path, holder in held.items():
            if _is_within(path, target):
                lines += [
                    f"mkdir -p {shlex.quote(path)}",
                    f"mount --bind {holder} {shlex.quote(path)}",
                ]
        if read_only:
            lines.append(f"mount -o remount,bind,ro {shlex.quote(real)}")
    lines.append('exec "$@"')
    return "\n".join(lines)


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes `$(VAR)` expansion; `$$(VAR)` escapes; unknown references stay as written."""

    def repl(m: re.Match[str]) -> str:
        if m.group(1) is not None:  # $$(VAR): an escaped reference, printed as $(VAR)
            return f"$({m.group(1)})"
        return env.get(m.group(2), m.group(0))

    return re.sub(r"\$\$\(([A-Za-z_][A-Za-z0-9_]*)\)|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", repl, text)


# ---- exec: the kubelet's WebSocket streaming protocol, just enough of it -------------------
# The v1.20 apiserver proxies pods/exec to https://<node>:<port>/exec/<ns>/<pod>/<container>
# ?command=..&output=1&error=1, passing the client's Upgrade request through untouched (it
# translates nothing), so we answer the WebSocket handshake ourselves (RFC 6455 §4.2.2).
# Channel protocol v4.channel.k8s.io (k8s.io/apiserver wsstream, kubelet remotecommand):
# every binary message starts with a channel byte: 1 stdout, 2 stderr, 3 a metav1.Status.
#
# kubectl >= 1.30 offers only v5.channel.k8s.io over WebSocket (it expects a >= 1.30 apiserver
# to translate to SPDY for the kubelet); a real 1.20 kubelet refuses v5 and kubectl falls back
# to SPDY/3.1, which this agent does not speak. So we also accept v5, whose server-to-client
# messages are v4's (v5 adds only a client-sent CLOSE on channel 255, for stdin), but prefer
# v4 whenever offered, as the kubelet would pick it for the Python client (offers v5,v4).
WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
EXEC_PROTOCOLS = ("v4.channel.k8s.io", "v5.channel.k8s.io")
STDOUT, STDERR, ERROR = 1, 2, 3
EXEC_TIMEOUT = 120


def ws_frame(opcode: int, payload: bytes) -> bytes:
    """One unmasked, final frame, as a server sends (RFC 6455 §5.2)."""
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
    return head + payload


def ws_read_frame(rfile: Any) -> int | None:
    """Read one client frame and return its opcode (the payload is not needed); None at EOF."""
    head = rfile.read(2)
    if len(head) < 2:
        return None
    n = head[1] & 0x7F
    if n == 126:
        n = struct.unpack("!H", rfile.read(2))[0]
    elif n == 127:
        n = struct.unpack("!Q", rfile.read(8))[0]
    rfile.read((4 if head[1] & 0x80 else 0) + n)  # mask key and payload
    return int(head[0] & 0x0F)


def exec_status(code: int) -> dict[str, Any]:
    """What the kubelet sends on the error channel when the command has ended."""
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: exit status {code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }


def exec_in_pod(pod: Any, command: list[str]) -> tuple[int, bytes, bytes]:
    """Run `command` "in" the pod: its first word must be mapped by the exec annotation."""
    mapping = json.loads((pod.metadata.annotations or {}).get(EXEC_ANNOTATION) or "{}")
    prefix = mapping.get(command[0]) if command else None
    if prefix is None:
        # What runc says for an executable that is not in the image; exit 126 as the kubelet
        # reports an exec that could not start.
        known = ", ".join(sorted(mapping)) or "none"
        text = (
            f"OCI runtime exec failed: exec failed: unable to start container process: exec: "
            f'"{command[0] if command else ""}": stat: no such file or directory (test bed pod '
            f"{pod.metadata.namespace}/{pod.metadata.name} maps: {known}; see {EXEC_ANNOTATION})\n"
        )
        return 126, b"", text.encode()
    done = subprocess.run(
        [*prefix, *command[1:]],
        stdin=subprocess.DEVNULL,  # like exec without -i
        capture_output=True,
        timeout=EXEC_TIMEOUT,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


class LogHandler(http.server.BaseHTTPRequestHandler):
    """Serves /containerLogs/<ns>/<pod>/<container>[?follow=true&tailLines=N] and /exec/..."""

    logs_dir: Path = Path()
    agent: Agent | None = None

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def do_POST(self) -> None:
        # SPDY exec (kubectl's fallback) arrives as POST; WebSocket exec as GET.
        self.do_GET()

    def do_exec(self, ns: str, pod_name: str, query: dict[str, list[str]]) -> None:
        """Answer one exec request over WebSocket, then close."""
        offered = [p.strip() for p in self.headers.get("Sec-WebSocket-Protocol", "").split(",")]
        key = self.headers.get("Sec-WebSocket-Key")
        if self.headers.get("Upgrade", "").lower() != "websocket" or key is None:
            # SPDY/3.1 is not spoken here: a non-101 answer makes clients report the upgrade
            # failure (kubectl >= 1.30 tries WebSocket first anyway).
            self.send_error(400, "the test bed agent serves exec over WebSocket only")
            return
        chosen = next((p for p in EXEC_PROTOCOLS if p in offered), None)
        if chosen is None:
            self.send_error(400, f"supported subprotocols: {EXEC_PROTOCOLS}; got {offered}")
            return
        agent = self.agent
        assert agent is not None
        try:
            pod = agent.api.read_namespaced_pod(pod_name, ns)
        except ApiException as exc:
            self.send_error(404, f"pod {ns}/{pod_name}: {exc.reason}")
            return
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.wfile.write(
            (
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n"
                f"Sec-WebSocket-Protocol: {chosen}\r\n\r\n"
            ).encode()
        )
        # The kubelet first sends an empty message on the lowest writable channel, telling
        # the client the streams are open (kubelet remotecommand createWebSocketStreams).
        self.wfile.write(ws_frame(0x2, bytes([STDOUT])))
        self.wfile.flush()
        try:
            code, out, err = exec_in_pod(pod, query.get("command", []))
        except (OSError, subprocess.TimeoutExpired) as exc:
            code, out, err = 126, b"", f"testbed agent: {exc}\n".encode()
        if out and query.get("output") == ["1"]:
            self.wfile.write(ws_frame(0x2, bytes([STDOUT]) + out))
        if err and query.get("error") == ["1"]:
            self.wfile.write(ws_frame(0x2, bytes([STDERR]) + err))
        self.wfile.write(ws_frame(0x2, bytes([ERROR]) + json.dumps(exec_status(code)).encode()))
        self.wfile.write(ws_frame(0x8, struct.pack("!H", 1000)))  # close: normal closure
        self.wfile.flush()
        # Wait for the client's close frame before closing: closing a socket with unread
        # input sends a RST, which may discard output still queued on the other side.
        self.connection.settimeout(5)
        with contextlib.suppress(OSError, struct.error):  # a timeout is an OSError
            while ws_read_frame(self.rfile) not in (None, 0x8):
                pass
        self.close_connection = True

    def do_GET(self) -> None:
        url = urllib.parse.urlparse(self.path)
        parts = url.path.strip("/").split("/")
        if len(parts) == 4 and parts[0] == "exec":
            self.do_exec(parts[1], parts[2], urllib.parse.parse_qs(url.query))
            return
        if len(parts) != 4 or parts[0] != "containerLogs":
            self.send_error(404, "only /containerLogs/... and /exec/<ns>/<pod>/<container> served")
            return
        _, ns, pod, container = parts
        q = urllib.parse.parse_qs(url.query)
        if self._fault(ns, pod) == "LogsUnavailable":
            # As a kubelet whose container runtime lost the log (or a node under pressure).
            self.send_error(503, f"the log of {ns}/{pod}/{container} is unavailable (fault)")
            return
        path = self.logs_dir / f"{ns}_{pod}_{container}.log"
        if not path.exists():
            self.send_error(404, f"no log for {ns}/{pod}/{container}")
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        data = path.read_bytes()
        if "tailLines" in q:
            n = int(q["tailLines"][0])
            data = b"\n".join(data.splitlines()[-n:]) + b"\n" if n > 0 else b""
        self.wfile.write(data)
        if q.get("follow", ["false"])[0] == "true":
            pos = path.stat().st_size
            # Follow while some process of this pod still runs.
            while self._running(ns, pod):
                time.sleep(0.5)
                size = path.stat().st_size
                if size > pos:
                    with path.open("rb") as f:
                        f.seek(pos)
                        self.wfile.write(f.read())
                        self.wfile.flush()
                    pos = size

    def _pod(self, ns: str, pod: str) -> Any | None:
        agent = self.agent
        if agent is None:
            return None
        try:
            return agent.api.read_namespaced_pod(pod, ns)
        except ApiException:
            return None

    def _fault(self, ns: str, pod: str) -> str | None:
        p = self._pod(ns, pod)
        return None if p is None else (p.metadata.annotations or {}).get(FAULT_ANNOTATION)

    def _running(self, ns: str, pod: str) -> bool:
        p = self._pod(ns, pod)
        return p is not None and p.status.phase in ("Pending", "Running")


def serve_logs(agent: Agent, port: int, cert: Path, key: Path) -> None:
    LogHandler.logs_dir = agent.logs
    LogHandler.agent = agent
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), LogHandler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(key))
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="test bed node agent")
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--port", type=int, required=True, help="kubelet log endpoint port")
    p.add_argument("--cadvisor-port", type=int, help="/metrics/cadvisor port (plain http)")
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--path-prefix", default=str(Path(sys.executable).parent))
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config.load_kube_config(config_file=args.kubeconfig)
    agent = Agent(client.CoreV1Api(), Path(args.workdir), args.path_prefix)
    serve_logs(agent, args.port, Path(args.cert), Path(args.key))
    if args.cadvisor_port:
        serve_cadvisor(agent.cadvisor, args.cadvisor_port)
        log.info("cadvisor on 127.0.0.1:%d/metrics/cadvisor", args.cadvisor_port)
    log.info("agent up; log endpoint on 127.0.0.1:%d", args.port)
    agent.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
