"""Procedures as presets: PingCAP's, from their TiDB v8.5.0 sysbench report (docs/load-shapes.md).

The report ("TiDB Cloud Sysbench Performance Test Report for TiDB v8.5.0",
<https://docs.pingcap.com/tidbcloud/v8.5-performance-benchmarking-with-sysbench>, test steps
4 and 5) measures:
- read workloads (oltp_point_select, oltp_read_only) for a stated time per thread level
  (`--time=600`);
- write workloads (oltp_write_only, oltp_read_write) bounded by events, not time
  (`--time=0 --events=N`: 6,000,000 at 100 threads, 8,000,000 at 200, 10,000,000 at 400);
- `sleep 60` before every level;
- `--rand-type=uniform` throughout.
The preset fills what a run leaves unset; durationSeconds (600 in the report) stays the run's.
"""

from __future__ import annotations

from collections.abc import Mapping

#: The tests that write; under `writeEvents` they end after a number of events.
WRITE_WORKLOADS: frozenset[str] = frozenset(
    {
        "oltp_write_only",
        "oltp_read_write",
        "oltp_insert",
        "oltp_delete",
        "oltp_update_index",
        "oltp_update_non_index",
        "bulk_insert",
    }
)

PINGCAP = "PingCAP"
#: PingCAP's v8.5.0 report: events per write step at each thread level.
PINGCAP_WRITE_EVENTS: Mapping[int, int] = {100: 6_000_000, 200: 8_000_000, 400: 10_000_000}
PINGCAP_PAUSE_SECONDS = 60
PINGCAP_RAND_TYPE = "uniform"


def events_note(bound: int, events: int, seconds: float, cap_seconds: int) -> str:
    """How an events-bound step ended: after its events, or at its time cap short of them."""
    if events >= bound:
        return f"bounded by events: ended after {events:,} events in {seconds:g}s"
    return (
        f"bounded by events: stopped at the durationSeconds cap ({cap_seconds}s) after {events:,} "
        f"of {bound:,} events; raise durationSeconds to let the step finish its events"
    )
