"""A step's client logs, read several at a time: a node that does not answer costs one read's
timeout, not one per client."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from tidb_bench_operator.domain.jobs import RUNNER_CONTAINER
from tidb_bench_operator.reconcile.run.context import RunContext

#: Reads of a client pod's log before its series counts as unreadable.
LOG_READS = 2
#: Client logs read at the same time: each read may take the API's 10 s for a node that
#: does not answer, so 64 clients read one by one could hold the look for over ten minutes;
#: 16 at a time bound it to 4 rounds of LOG_READS reads (80 s) whatever the nodes do.
LOG_READERS = 16


def _read_log(ctx: RunContext, name: str) -> str | None:
    """A client pod's log, read up to LOG_READS times; None when no read gave it."""
    for _ in range(LOG_READS):
        log = ctx.kube.pod_log(ctx.run.namespace, name, RUNNER_CONTAINER)
        if log is not None:
            return log
    return None


def read_logs(ctx: RunContext, names: list[str]) -> list[str | None]:
    """Each pod's log (None: unreadable), LOG_READERS reads at a time, in `names`' order."""
    if not names:
        return []
    with ThreadPoolExecutor(min(LOG_READERS, len(names)), thread_name_prefix="logs") as pool:
        return list(pool.map(lambda name: _read_log(ctx, name), names))
