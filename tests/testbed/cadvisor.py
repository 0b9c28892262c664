"""The node agent's cAdvisor: per-container CPU and memory of what it runs, as kubelet serves
them on /metrics/cadvisor, read from /proc (testbed.procstat).

Series, in Prometheus's text format (docs/testbed.md, "cAdvisor series"):
- `container_cpu_usage_seconds_total` and `container_memory_working_set_bytes` per container
  (labels container, cpu, id, image, name, namespace, pod, node), per pod (its cgroup:
  container="" and image="", the sum of its containers) and per node (the root cgroup,
  id="/": the sum of every container the agent ran there, the departed ones included);
- CPU is utime+stime of every process of the container's session, each process counted at
  its last value once it exits, so a counter never goes down; memory is the RSS sum.

What a container is made of:
- a container the agent runs: its session (the agent starts each in a new one);
- a stand-in pod: nothing (its series stay at 0), unless it is bound by an annotation:
- a stand-in pod annotated `testbed.tidbbench.io/cpu-of: mariadb`: the test bed service
  whose pid file is `<state>/mariadb.pid` (the MariaDB stand-in: the TiDB pod shows the
  CPU the SQL layer really spends), reported as the pod's first container, counted from
  the binding on;
- a stand-in pod annotated `testbed.tidbbench.io/burn: "<cores>"`: a CPU burner the agent
  starts (testbed.burner), capped at the first container's CPU limit; the annotation
  changed or removed on the live pod restarts or stops it at the next watch event. Both
  annotations on one pod add up.

The `node` label comes with the series here; Prometheus Operator's kubelet ServiceMonitor
gets it from the endpoint's Node (one agent plays every node, so one target serves all).
"""

from __future__ import annotations

import contextlib
import http.server
import logging
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testbed.burner import cpu_quantity
from testbed.procstat import Counter, ProcStat, pid_file_pid, scan

log = logging.getLogger("testbed.cadvisor")

CPU_OF_ANNOTATION = "testbed.tidbbench.io/cpu-of"
BURN_ANNOTATION = "testbed.tidbbench.io/burn"
METRICS_PATH = "/metrics/cadvisor"
#: Background sampling, so a process that exits between two scrapes loses at most this.
SAMPLE_SECONDS = 0.5
#: How long the list of nodes (for the root cgroups of nodes with nothing on them) is kept.
NODES_TTL = 10.0

#: Which processes make a container, picked from one scan of /proc.
Source = Callable[[dict[int, ProcStat]], Iterable[ProcStat]]


def session_source(sid: int) -> Source:
    """Every process of a session (a container the agent started with a new session)."""
    return lambda procs: (p for p in procs.values() if p.session == sid)


def tree_source(pid: int) -> Source:
    """A process and its children (a burner and the workers it forked)."""
    return lambda procs: (p for p in procs.values() if pid in (p.pid, p.ppid))


def pid_file_source(path: Path) -> Source:
    """The process a pid file names and its children, the file read again at every sample (a
    restarted MariaDB has a new pid: the old one keeps its last seconds, the new one adds)."""

    def pick(procs: dict[int, ProcStat]) -> Iterable[ProcStat]:
        pid = pid_file_pid(path)
        return () if pid is None else tree_source(pid)(procs)

    return pick


@dataclass
class Container:
    """One container's series: who it is, what processes make it, what they used."""

    namespace: str
    pod: str
    uid: str
    name: str
    node: str
    image: str
    sources: dict[str, Source] = field(default_factory=dict)
    counter: Counter = field(default_factory=Counter)
    rss: int = 0


def _labels(**labels: str) -> str:
    body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return "{" + body + "}"


def _id(uid: str, container: str = "") -> str:
    return f"/kubepods/pod{uid}" + (f"/{container}" if container else "")


class Cadvisor:
    """The containers the agent runs or binds, their /proc usage, and their exposition."""

    def __init__(self, state: Path, nodes: Callable[[], list[str]]) -> None:
        self.state = state
        self._nodes = nodes
        self._node_list: tuple[float, list[str]] = (0.0, [])
        self.lock = threading.Lock()
        self.containers: dict[tuple[str, str], Container] = {}
        #: CPU seconds of containers whose pod is gone, per node: the root cgroup keeps them.
        self.retired: dict[str, float] = {}
        self.burners: dict[str, tuple[float, subprocess.Popen[bytes]]] = {}

    # ---- what makes a container -------------------------------------------------------------
    def bind(
        self, pod: Any, container: str, key: str, source: Source, *, from_now: bool = False
    ) -> None:
        """Count `source`'s processes (under `key`) as the pod's container `container`.

        `from_now`: processes that ran before count only their CPU from now on, as a
        container's counter starts with it (and a process unbound for a while did not use
        it there). Binding a key already bound changes nothing."""
        meta = pod.metadata
        image = next((c.image for c in pod.spec.containers if c.name == container), "")
        procs = scan() if from_now else {}
        with self.lock:
            entry = self.containers.setdefault(
                (meta.uid, container),
                Container(meta.namespace, meta.name, meta.uid, container, pod.spec.node_name,
                          image or ""),
            )  # fmt: skip
            if key in entry.sources:
                return
            if from_now:
                entry.counter.count_from_now(source(procs))
            entry.sources[key] = source

    def unbind(self, uid: str, key: str) -> None:
        """Stop counting `key`'s processes from now on (what they used stays counted)."""
        with self.lock:
            for (owner, _), entry in self.containers.items():
                if owner == uid:
                    entry.sources.pop(key, None)

    def started(self, pod: Any, container: str, pid: int) -> None:
        """The agent started a container (in a new session, whose id is its pid)."""
        self.bind(pod, container, f"session-{pid}", session_source(pid))

    def forget(self, uid: str) -> None:
        """The pod is gone: stop its burner, drop its series, keep its seconds in its node's."""
        self._stop_burner(uid)
        with self.lock:
            if not any(k[0] == uid for k in self.containers):
                return
        self.sample()
        with self.lock:
            for key in [k for k in self.containers if k[0] == uid]:
                entry = self.containers.pop(key)
                self.retired[entry.node] = self.retired.get(entry.node, 0.0) + entry.counter.seconds

    # ---- stand-in pods bound by annotation ----------------------------------------------
    def sync_standin(self, pod: Any) -> None:
        """Apply the pod's cpu-of and burn annotations (idempotent: called at every event)."""
        notes = pod.metadata.annotations or {}
        uid = pod.metadata.uid
        first = pod.spec.containers[0]
        # Every stand-in has its series, as every real pod has a cgroup: 0 s when unbound.
        self.bind(pod, first.name, "standin", lambda procs: ())
        service = notes.get(CPU_OF_ANNOTATION)
        if service and re.fullmatch(r"[a-z0-9][a-z0-9-]*", service):
            source = pid_file_source(self.state / f"{service}.pid")
            self.bind(pod, first.name, f"cpu-of-{service}", source, from_now=True)
        for entry in self._entries(uid):
            for key in [k for k in entry.sources if k.startswith("cpu-of-")]:
                if key != f"cpu-of-{service}":
                    self.unbind(uid, key)
        cores = self._burn_wanted(pod, first)
        running = self.burners.get(uid)
        if running is not None and running[0] == cores:
            return
        self._stop_burner(uid)
        if cores is None:
            return
        proc = subprocess.Popen(
            [sys.executable, "-m", "testbed.burner", f"--cores={cores:g}",
             f"--pod={pod.metadata.namespace}/{pod.metadata.name}", f"--parent={os.getpid()}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        )  # fmt: skip
        self.burners[uid] = (cores, proc)
        self.bind(pod, first.name, f"burner-{proc.pid}", tree_source(proc.pid))
        log.info("%s/%s: burner at %g cores (pid %d)", pod.metadata.namespace,
                 pod.metadata.name, cores, proc.pid)  # fmt: skip

    def _entries(self, uid: str) -> list[Container]:
        with self.lock:
            return [e for (owner, _), e in self.containers.items() if owner == uid]

    def _burn_wanted(self, pod: Any, container: Any) -> float | None:
        text = (pod.metadata.annotations or {}).get(BURN_ANNOTATION)
        if not text:
            return None
        try:
            cores = cpu_quantity(text)
        except ValueError:
            log.warning("%s: burn annotation %r is not a CPU quantity", pod.metadata.name, text)
            return None
        limits = (container.resources.limits if container.resources else None) or {}
        if "cpu" in limits:
            cores = min(cores, cpu_quantity(str(limits["cpu"])))  # CFS's quota
        return cores if cores > 0 else None

    def _stop_burner(self, uid: str) -> None:
        running = self.burners.pop(uid, None)
        if running is None:
            return
        _, proc = running
        self.sample()  # its last seconds, before it goes
        proc.kill()
        proc.wait()
        # Its workers notice their parent's death within a period; keep them counted till then.
        time.sleep(0.15)
        self.sample()
        self.unbind(uid, f"burner-{proc.pid}")

    # ---- sampling and exposition -------------------------------------------------------
    def sample(self) -> None:
        procs = scan()
        with self.lock:
            for entry in self.containers.values():
                members = {p.pid: p for src in entry.sources.values() for p in src(procs)}
                entry.counter.update(members.values())
                entry.rss = sum(p.rss_bytes for p in members.values())

    def run_sampler(self) -> None:
        while True:
            time.sleep(SAMPLE_SECONDS)
            try:
                self.sample()
            except Exception:  # keep sampling; the next one repairs
                log.exception("cadvisor sample failed")

    def nodes(self) -> list[str]:
        at, names = self._node_list
        if time.monotonic() - at > NODES_TTL:
            with contextlib.suppress(Exception):  # the API server away: the last list
                names = self._nodes()
                self._node_list = (time.monotonic(), names)
        return names

    def render(self) -> str:
        """The exposition, as kubelet's /metrics/cadvisor shows these two metrics."""
        self.sample()
        nodes = self.nodes()
        with self.lock:
            entries = list(self.containers.values())
            node_cpu = {n: self.retired.get(n, 0.0) for n in {*nodes, *self.retired}}
        node_mem: dict[str, int] = dict.fromkeys(node_cpu, 0)
        # (labels, cpu seconds, working set): containers, then pods' cgroups, then roots.
        rows: list[tuple[dict[str, str], float, int]] = []
        pods: dict[str, list[Container]] = {}
        for e in entries:
            pods.setdefault(e.uid, []).append(e)
            node_cpu[e.node] = node_cpu.get(e.node, 0.0) + e.counter.seconds
            node_mem[e.node] = node_mem.get(e.node, 0) + e.rss
            rows.append(
                (
                    {"container": e.name, "id": _id(e.uid, e.name), "image": e.image,
                     "name": f"{e.pod}_{e.name}", "namespace": e.namespace, "pod": e.pod,
                     "node": e.node},
                    e.counter.seconds,
                    e.rss,
                )
            )  # fmt: skip
        for uid, members in pods.items():
            e = members[0]
            rows.append(
                (
                    {"container": "", "id": _id(uid), "image": "", "name": "",
                     "namespace": e.namespace, "pod": e.pod, "node": e.node},
                    sum(m.counter.seconds for m in members),
                    sum(m.rss for m in members),
                )
            )  # fmt: skip
        for node in sorted(node_cpu):
            root = {"container": "", "id": "/", "image": "", "name": "", "namespace": "",
                    "pod": "", "node": node}  # fmt: skip
            rows.append((root, node_cpu[node], node_mem[node]))
        return "\n".join(
            [
                "# HELP container_cpu_usage_seconds_total Cumulative cpu time consumed in seconds.",
                "# TYPE container_cpu_usage_seconds_total counter",
                *(
                    f"container_cpu_usage_seconds_total{_labels(cpu='total', **labels)} {cpu:.6f}"
                    for labels, cpu, _ in rows
                ),
                "# HELP container_memory_working_set_bytes Current working set in bytes.",
                "# TYPE container_memory_working_set_bytes gauge",
                *(
                    f"container_memory_working_set_bytes{_labels(**labels)} {rss}"
                    for labels, _, rss in rows
                ),
                "",
            ]
        )


class _Handler(http.server.BaseHTTPRequestHandler):
    cadvisor: Cadvisor | None = None

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] != METRICS_PATH or self.cadvisor is None:
            self.send_error(404, f"only {METRICS_PATH} is served here")
            return
        body = self.cadvisor.render().encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def serve(cadvisor: Cadvisor, port: int) -> None:
    """Serve /metrics/cadvisor on plain http on 127.0.0.1:`port`, and sample in the background."""
    _Handler.cadvisor = cadvisor
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), _Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    threading.Thread(target=cadvisor.run_sampler, daemon=True).start()
