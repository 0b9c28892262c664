"""Benchmark: a long run's size — status, patch bytes, results store and Jobs per trial.

Against the in-memory API (tests/testbed/fake_kube.py, no test bed needed): one run of
20 thread counts x 20 repeats (400 trials, one client, 60 s trials of 6 interval lines),
driven by the run reconciler with each status patch written as the Driver writes it
(tests/testbed/sizes.py). Printed at trial counts 1 ... 400: the run's status bytes, the
status patch bytes sent so far, the results-store bytes written so far and held, and the
Jobs alive; beside them the same run on the baseline commit (`--baseline`, default the
commit before status was bounded: its package is taken with `git archive` and run in a
subprocess) and the ratio of the cumulative patch bytes to a straight line through the
first 100 trials (1.0: linear; growing: quadratic). Last, status.steps of the largest run
the schema allows at its widest numbers and texts, against the 1 MiB bound.

    make bench-size     (or .venv/bin/python bench/status_size.py [--trials 400])
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import asdict
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The commit before status was bounded (issue 25, item 6): the baseline.
BASELINE = "b58438b"
COUNTS = (1, 25, 50, 100, 200, 300, 400)
STEPS_BOUND = 1024 * 1024


def measure(src: Path, threads: int, repeats: int) -> list[dict[str, int]]:
    """Rows of the run (sizes.run_trials) with the package at `src` on the path."""
    sys.path[:0] = [str(src), str(ROOT / "tests")]
    from testbed.sizes import run_trials

    return [asdict(r) for r in run_trials(threads, repeats)]


def baseline_rows(rev: str, threads: int, repeats: int) -> list[dict[str, int]] | None:
    """The same run on commit `rev`'s package, in a subprocess; None when git cannot give it."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", rev, "operator"],
            check=True, capture_output=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"(no baseline: git archive {rev} failed: {exc})")
        return None
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        out = subprocess.run(
            [sys.executable, __file__, "--measure", str(Path(tmp) / "operator"),
             "--threads", str(threads), "--repeats", str(repeats)],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
    return list(json.loads(out.strip().splitlines()[-1]))


def kib(n: int) -> str:
    return f"{n / 1024:,.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=400, help="trials (20 per thread count)")
    parser.add_argument("--baseline", default=BASELINE, help="commit to compare with")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=20, help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, default=20, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:  # the baseline's subprocess
        print(json.dumps(measure(args.measure, args.threads, args.repeats)))
        return 0
    threads, repeats = max(1, args.trials // 20), 20
    new = measure(ROOT / "operator", threads, repeats)
    base = baseline_rows(args.baseline, threads, repeats)
    per100 = new[min(99, len(new) - 1)]["patch_bytes"] / min(100, len(new))
    base100 = base[min(99, len(base) - 1)]["patch_bytes"] / min(100, len(base)) if base else 0
    print(f"one run, {threads} thread counts x {repeats} repeats, 1 client; KiB; "
          f"baseline = {args.baseline}")  # fmt: skip
    head = (
        "trials | status | patches sent | /linear | store written | store held | Jobs"
        " || base status | base patches | base /linear | base store written | base Jobs"
    )
    print(head)
    for n in COUNTS:
        if n > len(new):
            break
        r = new[n - 1]
        line = (
            f"{n:6} | {kib(r['status_bytes']):>6} | {kib(r['patch_bytes']):>12} | "
            f"{r['patch_bytes'] / (per100 * n):7.2f} | {kib(r['store_written']):>13} | "
            f"{kib(r['store_bytes']):>10} | {r['jobs_alive']:4}"
        )
        if base and n <= len(base):
            b = base[n - 1]
            line += (
                f" || {kib(b['status_bytes']):>11} | {kib(b['patch_bytes']):>12} | "
                f"{b['patch_bytes'] / (base100 * n):12.2f} | {kib(b['store_written']):>18} | "
                f"{b['jobs_alive']:9}"
            )
        print(line)
    last = new[-1]
    if base:
        b = base[-1]
        print(
            f"at {len(new)} trials: patches {b['patch_bytes'] / last['patch_bytes']:.0f}x "
            f"fewer bytes, store writes {b['store_written'] / last['store_written']:.0f}x "
            f"fewer, Jobs alive {last['jobs_alive']} vs {b['jobs_alive']}"
        )
    sys.path[:0] = [str(ROOT / "operator"), str(ROOT / "tests")]
    from testbed.sizes import largest_run_steps_bytes

    size, steps, listed = largest_run_steps_bytes()
    print(
        f"largest run the schema allows ({steps} steps x 30 trials, 64 clients, widest "
        f"numbers): status.steps {size:,} bytes ({listed} trials a step listed) <= bound "
        f"{STEPS_BOUND:,}: {'ok' if size <= STEPS_BOUND else 'OVER'}"
    )
    return 0 if size <= STEPS_BOUND else 1


if __name__ == "__main__":
    sys.exit(main())
