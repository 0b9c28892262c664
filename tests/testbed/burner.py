"""A CPU burner for a stand-in pod: `python -m testbed.burner --cores=X --pod=NS/NAME`.

A duty-cycled busy loop: in every 100 ms period (CFS's default) each of ceil(X) processes
spins until it has used its share of X cores of CPU time, then sleeps to the period's
end, so the burner uses X cores when the machine has them. The node agent starts it for
the annotation `testbed.tidbbench.io/burn` and caps X at the pod's CPU limit, as CFS
throttling would. Every process exits within a period of its parent's death (the agent's
for the first, the first's for the others): a burner never outlives its agent.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

PERIOD = 0.1


def cpu_quantity(text: str) -> float:
    """A Kubernetes CPU quantity in cores: `250m` -> 0.25, `1.5` -> 1.5."""
    text = text.strip()
    if text.endswith("m"):
        return float(text[:-1]) / 1000
    return float(text)


def burn(share: float, parent: int) -> None:
    """Use `share` of one core (0 < share <= 1) until the parent process is gone."""
    while os.getppid() == parent:
        start, used = time.monotonic(), time.process_time()
        while time.process_time() - used < share * PERIOD and time.monotonic() - start < PERIOD:
            pass
        time.sleep(max(0.0, start + PERIOD - time.monotonic()))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="testbed.burner", description=__doc__)
    p.add_argument("--cores", type=float, required=True)
    p.add_argument("--pod", required=True, help="NS/NAME, so a test can find the processes")
    p.add_argument("--parent", type=int, required=True, help="exit when this pid is gone")
    args = p.parse_args(argv)
    if args.cores <= 0:
        return 0
    workers = math.ceil(args.cores)
    parent = args.parent
    for _ in range(workers - 1):
        me = os.getpid()
        if os.fork() == 0:  # a child burns its share until the first process is gone
            parent = me
            break
    burn(args.cores / workers, parent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
