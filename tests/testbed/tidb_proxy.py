"""A TCP proxy in front of MariaDB whose backends are a cluster's TiDB stand-in pods.

Every run's SQL on the bed goes to one MariaDB, whatever the TiDB stand-ins do. Through this
proxy a connection belongs to one TiDB stand-in pod, as it would belong to one TiDB process:
when that pod is deleted, stops being Ready or disappears, its connections are reset, so a
rolling restart of the stand-ins really drops live traffic (docs/testbed.md). With
`migrate=True` it stands in for TiProxy in front of TiDB instead: such a connection is held
(no byte forwarded either way, its MariaDB connection kept) until a Ready pod exists again,
then it goes on on that pod.
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from testbed.standin_operator import component_labels, pod_ready

#: How often the pods are listed (the brief of the operations window: at most 0.2 s).
POLL_SECONDS = 0.2
#: How often a connection's pump looks whether its pod died (select's timeout).
_PUMP_TICK = 0.05
_CHUNK = 65536


@dataclass
class PodCounts:
    """Connections one TiDB stand-in pod (by name, over all its uids) took and lost."""

    accepted: int = 0
    cut: int = 0
    #: (migrate mode) connections moved off this pod when it went away.
    migrated: int = 0


@dataclass
class _Pair:
    """One client connection and its upstream, owned (and closed) by its pump thread."""

    downstream: socket.socket
    upstream: socket.socket
    pod: str
    uid: str
    cut: threading.Event = field(default_factory=threading.Event)
    #: (migrate mode) set while its pod is gone and no other is Ready: the pump forwards nothing.
    held: threading.Event = field(default_factory=threading.Event)


def _reset(sock: socket.socket) -> None:
    """Close with SO_LINGER 0: the peer gets an RST, as from a process that died."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class TidbProxy:
    """Listens on 127.0.0.1:`port`; each connection goes to `upstream` on behalf of one Ready,
    non-terminating TiDB stand-in pod of `cluster` (round robin), and is reset when that pod
    dies, or with `migrate` held until a pod is Ready and then moved to it. With no such pod a
    new connection is reset at once (a refused connection)."""

    def __init__(
        self,
        api_client: client.ApiClient,
        namespace: str,
        cluster: str,
        upstream: tuple[str, int],
        *,
        migrate: bool = False,
        ready_seconds: float = 0.0,
    ) -> None:
        self.core = client.CoreV1Api(api_client)
        self.namespace = namespace
        self.cluster = cluster
        self.upstream = upstream
        self.migrate = migrate
        #: A pod takes connections once it has been Ready this long (as TiProxy routes to a
        #: TiDB once its health check passes; a stand-in is Ready at once, a TiDB is not).
        self.ready_seconds = ready_seconds
        self._ready_since: dict[str, float] = {}  # uid -> when first seen Ready (monotonic)
        self._listed = False
        labels = component_labels(cluster, "tidb")
        self._selector = ",".join(
            f"{k}={labels[k]}"
            for k in ("app.kubernetes.io/instance", "app.kubernetes.io/component")
        )
        self._lock = threading.Lock()
        self._live: list[tuple[str, str]] = []  # (name, uid) of the pods that take connections
        self._next = 0
        self._pairs: list[_Pair] = []
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self.counts: dict[str, PodCounts] = {}
        self.refused = 0
        self.poll_errors = 0
        self._listener: socket.socket | None = None
        self.port = 0

    @property
    def target(self) -> dict[str, Any]:
        """spec.target of a run whose SQL goes through this proxy."""
        return {"host": "127.0.0.1", "port": self.port}

    def start(self) -> TidbProxy:
        self._poll()  # the first backends known before the first connection
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        listener.settimeout(_PUMP_TICK * 2)
        self._listener, self.port = listener, listener.getsockname()[1]
        for target in (self._accept_loop, self._poll_loop):
            t = threading.Thread(target=target, name=f"tidb-proxy-{target.__name__}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        """Stop accepting, reset every connection, and join every thread of the proxy."""
        self._stop.set()
        with self._lock:
            for pair in self._pairs:
                pair.cut.set()
        while True:
            with self._lock:
                threads, self._threads = self._threads, []
            if not threads:
                break
            for t in threads:
                t.join(timeout=10)

    def totals(self) -> PodCounts:
        counts = self.counts.values()
        return PodCounts(
            sum(c.accepted for c in counts),
            sum(c.cut for c in counts),
            sum(c.migrated for c in counts),
        )

    def backends(self) -> list[str]:
        """The pods new connections go to now, by name."""
        with self._lock:
            return [name for name, _ in self._live]

    def threads(self) -> int:
        """Threads of this proxy still running (0 after `stop`)."""
        with self._lock:
            return sum(t.is_alive() for t in self._threads)

    def open_connections(self) -> int:
        with self._lock:
            return len(self._pairs)

    # ------------------------------------------------------------------ the pods
    def _poll_loop(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            self._poll()

    def _poll(self) -> None:
        try:
            pods = self.core.list_namespaced_pod(
                self.namespace, label_selector=self._selector
            ).items
        except Exception:  # an API hiccup: keep the last known backends
            self.poll_errors += 1
            return
        now, first = time.monotonic(), not self._listed
        self._listed = True
        ready = {
            p.metadata.uid: p.metadata.name
            for p in pods
            if p.metadata.deletion_timestamp is None and pod_ready(p)
        }
        # At the first listing a Ready pod has been up for long: it takes connections at once.
        since = {u: self._ready_since.get(u, 0.0 if first else now) for u in ready}
        self._ready_since = since
        live = sorted(
            (name, uid) for uid, name in ready.items() if now - since[uid] >= self.ready_seconds
        )
        uids = {uid for _, uid in live}
        with self._lock:
            self._live = live
            for pair in self._pairs:
                if pair.uid in uids or pair.cut.is_set():
                    continue
                if not self.migrate:
                    pair.cut.set()
                    self.counts.setdefault(pair.pod, PodCounts()).cut += 1
                    continue
                pair.held.set()  # before the pump's next read: nothing forwarded from now
                if live:
                    self.counts.setdefault(pair.pod, PodCounts()).migrated += 1
                    pair.pod, pair.uid = live[self._next % len(live)]
                    self._next += 1
                    pair.held.clear()

    # ------------------------------------------------------------------ the connections
    def _accept_loop(self) -> None:
        assert self._listener is not None
        try:
            while not self._stop.is_set():
                try:
                    conn, _ = self._listener.accept()
                except TimeoutError:
                    continue
                except OSError:
                    if self._stop.is_set():
                        break
                    raise
                self._assign(conn)
        finally:
            self._listener.close()

    def _assign(self, conn: socket.socket) -> None:
        with self._lock:
            if not self._live:
                self.refused += 1
                backend = None
            else:
                backend = self._live[self._next % len(self._live)]
                self._next += 1
        if backend is None:
            _reset(conn)
            return
        try:
            upstream = socket.create_connection(self.upstream, timeout=5)
        except OSError:
            _reset(conn)
            return
        for s in (conn, upstream):
            s.setblocking(True)
            s.settimeout(None)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pair = _Pair(conn, upstream, *backend)
        thread = threading.Thread(
            target=self._pump, args=(pair,), name="tidb-proxy-pump", daemon=True
        )
        with self._lock:
            self.counts.setdefault(pair.pod, PodCounts()).accepted += 1
            self._pairs.append(pair)
            self._threads.append(thread)
        thread.start()

    def _pump(self, pair: _Pair) -> None:
        """Copy bytes both ways until either side closes or the pair's pod dies."""
        other = {pair.downstream: pair.upstream, pair.upstream: pair.downstream}
        cut = False
        try:
            while True:
                if pair.cut.is_set():
                    cut = True
                    break
                if pair.held.is_set():
                    pair.cut.wait(_PUMP_TICK)
                    continue
                readable, _, _ = select.select(list(other), [], [], _PUMP_TICK)
                closed = False
                for s in readable:
                    if pair.held.is_set():
                        break  # its pod went away since select: forward nothing
                    data = s.recv(_CHUNK)
                    if not data:
                        closed = True
                        break
                    other[s].sendall(data)
                if closed:
                    break
        except OSError:
            pass
        finally:
            for s in other:
                if cut:
                    _reset(s)
                else:
                    s.close()
            with self._lock:
                self._pairs.remove(pair)
                if threading.current_thread() in self._threads:
                    self._threads.remove(threading.current_thread())
