"""A step's client logs are read several at a time, within LOG_READERS: 64 clients whose
nodes take the API's whole timeout to answer no longer hold the look for 64 timeouts."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any, cast

from tidb_bench_operator.domain.manifests import LABEL_CLIENT
from tidb_bench_operator.reconcile.run import logs, steps
from tidb_bench_operator.reconcile.run.context import RunContext

#: A read that waits for a node: long beside the bookkeeping, short for a unit test.
READ_SECONDS = 0.1


class SlowNodes:
    """pod_log that takes READ_SECONDS per read; the odd clients' nodes never serve one."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reading = 0
        self.most = 0
        self.reads: list[str] = []

    def pod_log(self, namespace: str, name: str, container: str) -> str | None:
        with self.lock:
            self.reading += 1
            self.most = max(self.most, self.reading)
            self.reads.append(name)
        time.sleep(READ_SECONDS)
        with self.lock:
            self.reading -= 1
        return None if int(name.rsplit("-c", 1)[1]) % 2 else f"log of {name}"


def test_the_logs_of_64_clients_are_read_concurrently_within_the_bound_and_in_order() -> None:
    nodes = SlowNodes()
    ctx = cast(RunContext, SimpleNamespace(kube=nodes, run=SimpleNamespace(namespace="bench")))
    step = cast(Any, SimpleNamespace(workload="oltp_point_select", threads=8))
    pods = [{"metadata": {"name": f"sweep-s0-c{c}", "labels": {LABEL_CLIENT: str(c)}}}
            for c in range(64)]  # fmt: skip
    t0 = time.monotonic()
    _, notes, _, unread = steps.read_step_series(ctx, step, pods)
    took = time.monotonic() - t0
    one_by_one = (32 + 32 * logs.LOG_READS) * READ_SECONDS  # 96 reads: 9.6 s
    assert took < one_by_one / 4, f"{took:.2f} s for 96 reads of {READ_SECONDS} s"
    assert nodes.most == logs.LOG_READERS, "at most LOG_READERS reads at once, and that many"
    odd = [f"sweep-s0-c{c}" for c in range(1, 64, 2)]
    assert [name for name, _ in unread] == odd, "in the pods' order"
    assert len(notes) == 32
    assert sorted(nodes.reads) == sorted([p["metadata"]["name"] for p in pods] + odd)


def test_no_pods_no_reads() -> None:
    ctx = cast(Any, SimpleNamespace(kube=SlowNodes(), run=SimpleNamespace(namespace="bench")))
    assert logs.read_logs(ctx, []) == []
