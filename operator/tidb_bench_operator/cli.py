"""The `tidb-bench` command line: operator, runner, parse, pd-check, run, report."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tidb_bench_operator import __version__


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every verb."""
    parser = argparse.ArgumentParser(prog="tidb-bench", description=__doc__)
    parser.add_argument("--version", action="version", version=f"tidb-bench {__version__}")
    parser.add_subparsers(dest="verb", metavar="VERB")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verb is None:
        parser.print_help(sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
