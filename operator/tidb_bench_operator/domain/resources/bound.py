"""The bound on a step's resources in status: a run's status is one etcd object (1.5 MiB by
default), shared by every step, so a step of a cluster with hundreds of pods keeps only its
busiest pods and nodes, and says how many it left out.

The caller may give a smaller limit (a run of many steps shares its status among them:
docs/how-a-run-goes.md#the-status-bound); under a limit too small for any pod the block
keeps its sums, components and verdict, and one note.
"""

from __future__ import annotations

from tidb_bench_operator.domain.api.step_resources import StepResources

#: A step's resources, serialized, stay within this many bytes.
MAX_STEP_RESOURCES_BYTES = 24 * 1024


def serialized_size(r: StepResources) -> int:
    """Bytes of the block as status stores it (camelCase JSON)."""
    return len(r.model_dump_json(by_alias=True, exclude_none=True).encode())


def _keep(r: StepResources, count: int, limit: int) -> StepResources:
    """The `count` busiest pods and nodes (both lists are sorted busiest first), each node
    listing only the pods kept, and a note counting what was left out."""
    pods = r.pods[:count]
    kept = {p.name for p in pods}
    nodes = [n.model_copy(update={"pods": [p for p in n.pods if p in kept]})
             for n in r.nodes[:count]]  # fmt: skip
    out_pods, out_nodes = len(r.pods) - len(pods), len(r.nodes) - len(nodes)
    note = (
        f"left out the {out_pods} least busy of {len(r.pods)} pods and {out_nodes} of "
        f"{len(r.nodes)} nodes, to keep this block under {_size_text(limit)}"
    )
    return r.model_copy(update={"pods": pods, "nodes": nodes, "notes": [*r.notes, note]})


def _size_text(limit: int) -> str:
    return f"{limit // 1024} KiB" if limit % 1024 == 0 else f"{limit:,} bytes"


def bound_resources(r: StepResources, limit: int = MAX_STEP_RESOURCES_BYTES) -> StepResources:
    """`r` itself when it fits in `limit` bytes, else its busiest part that does."""
    if serialized_size(r) <= limit:
        return r
    notes = r.notes
    if len(notes) > 10:  # the adapters' notes are few; many would be a bug, not evidence
        notes = [*notes[:10], f"and {len(notes) - 10} more notes"]
    r = r.model_copy(update={"notes": notes})
    low, high = 0, max(len(r.pods), len(r.nodes))
    # The largest count that fits: size grows with the count, so bisect.
    while low < high:
        middle = (low + high + 1) // 2
        if serialized_size(_keep(r, middle, limit)) <= limit:
            low = middle
        else:
            high = middle - 1
    kept = _keep(r, low, limit)
    if low == 0 and serialized_size(kept) > limit:
        # Not even the sums and the notes fit: the note saying what was left out stays.
        kept.notes = kept.notes[-1:]
    return kept


#: All steps' resources together in a run's status (each step's share is this over the
#: planned steps, at most MAX_STEP_RESOURCES_BYTES); the results store keeps every block whole.
RUN_RESOURCES_BYTES = 64 * 1024
#: Below this share a step keeps only its headline: sums, efficiency and the verdict.
_HEADLINE_BYTES = 2 * 1024


def status_resources(r: StepResources, steps: int, index: int) -> StepResources:
    """The block step `index` keeps in status when the run plans `steps` steps.

    The share is RUN_RESOURCES_BYTES over the steps (at most MAX_STEP_RESOURCES_BYTES). A
    share too small for any pod keeps the headline (source, sums, QPS per core, CPU per
    query, the verdict with its message cut to fit) and a note saying where the rest is.
    """
    share = min(MAX_STEP_RESOURCES_BYTES, RUN_RESOURCES_BYTES // max(1, steps))
    if share >= _HEADLINE_BYTES:
        return bound_resources(r, share)
    if serialized_size(r) <= share:
        return r
    where = f"per pod and node: the run's results store (document st{index})"
    verdict = r.bottleneck
    head = r.model_copy(
        update={"pods": [], "nodes": [], "components": [], "notes": [where],
                "source": r.source[:32], "window_start": None, "window_end": None,
                "bottleneck": None if verdict is None else verdict.model_copy(
                    update={"message": "", "subject": (verdict.subject or "")[:63] or None})}
    )  # fmt: skip
    for drop in ("notes", "subject", "client_cores", "source"):
        if serialized_size(head) <= share:
            break
        if drop == "subject" and head.bottleneck is not None:
            head.bottleneck.subject = None
        elif drop == "source":
            head.source = ""
        elif drop == "notes":
            head.notes = []
        else:
            head.client_cores = None
    if head.bottleneck is not None and verdict is not None:
        room = max(0, share - serialized_size(head))
        head.bottleneck.message = verdict.message[:room]
    return head
