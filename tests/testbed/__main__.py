"""`python -m testbed up|down|status`: the local test bed from the command line (make testbed-up)."""

from __future__ import annotations

import argparse
import sys

from testbed.bed import bring_up, tear_down
from testbed.cluster import Testbed, TestbedError


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="testbed", description=__doc__)
    p.add_argument("action", choices=["up", "down", "status"])
    args = p.parse_args(argv)
    tb = Testbed()
    if args.action == "down":
        tear_down(tb)
        print(f"test bed in {tb.state} stopped")
        return 0
    if args.action == "status":
        up = tb.is_up()
        print(f"test bed in {tb.state}: {'up at ' + tb.server if up else 'down'}")
        return 0 if up else 1
    try:
        bring_up(tb)
    except TestbedError as exc:
        print(f"testbed: FAILED: {exc}", file=sys.stderr)
        tear_down(tb)
        return 1
    print(f"test bed up: {tb.server}\nexport KUBECONFIG={tb.kubeconfig}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
