"""Benchmark: hostile inputs against their limits, this version side by side with a baseline.

Two targets from the hostile-input work: `tidb-bench pd-check --stores` answers within
1 s on 4 MB of text that is not PD output, and `tidb-bench parse` of a 200 MB sysbench log
stays under 200 MB of memory (max RSS). Each command runs as its own process; wall time and
max RSS (getrusage of that child) are measured, medians of --repeat runs are printed. The
baseline is the same command from another git revision's operator/ (default: none; e.g.
--baseline 9d15ac7 for the code before the hostile-input work), capped by --baseline-timeout.

    .venv/bin/python bench/hostile_input.py [--repeat 5] [--log-mb 200] [--baseline REV]
"""

from __future__ import annotations

import argparse
import io
import json
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "tests/data/sysbench/sysbench-1.0.20_oltp_point_select_threads4_recorded.txt"

#: Runs a command and prints its wall seconds and max RSS in KiB (this child only).
MEASURE = (
    "import resource, subprocess, sys, time\n"
    "t = time.monotonic()\n"
    "rc = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, "
    "timeout=float(sys.argv[1])).returncode\n"
    "print(rc, time.monotonic() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def text_inputs(folder: Path, size: int) -> dict[str, Path]:
    """4 MB inputs that are not PD output, of several kinds."""
    rng = random.Random(16)
    printable = [chr(c) for c in range(32, 127)] + ["\n"] * 4
    kinds = {
        "random printable text": "".join(rng.choices(printable, k=size)),
        "a sysbench log (wrong file)": (SAMPLE.read_text() * (size // 2000 + 1))[:size],
        "INI/Markdown-like: '[' lines, no '{'": "".join(
            f"[section {i}] key = value {rng.random():.6f}\n" for i in range(size // 40)
        )[:size],
        "random bytes": rng.randbytes(size).decode("latin-1"),
        "nested JSON, 100,000 deep": "[" * (size // 40) + "]" * (size // 40),
    }
    paths = {}
    for i, (kind, text) in enumerate(kinds.items()):
        path = folder / f"text-{i}.txt"
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
        paths[kind] = path
    return paths


def big_log(path: Path, megabytes: int) -> int:
    """A sysbench 1.0.20 log with ~megabytes of intermediate reports, then the summary."""
    text = SAMPLE.read_text()
    head, summary = (
        text[: text.index("Threads started!")] + "Threads started!\n\n",
        text[text.index("SQL statistics:") :],
    )
    target = megabytes * 1024 * 1024
    lines = 0
    with path.open("w") as out:
        out.write(head)
        written = len(head)
        block = io.StringIO()
        while written < target:
            block.seek(0)
            block.truncate()
            for _ in range(10_000):
                lines += 1
                block.write(
                    f"[ {lines}s ] thds: 4 tps: 76955.79 qps: 76955.79 (r/w/o: 76955.79/0.00/"
                    "0.00) lat (ms,95%): 0.10 err/s: 0.00 reconn/s: 0.00\n"
                )
            chunk = block.getvalue()
            out.write(chunk)
            written += len(chunk)
        out.write(summary)
    return lines


def operator_of(rev: str, folder: Path) -> Path:
    """operator/ of a git revision, extracted to `folder` (for the baseline)."""
    data = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "operator"], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(folder, filter="data")
    return folder / "operator"


def measure(pythonpath: Path, argv: list[str], timeout: float) -> tuple[int, float, int]:
    """(exit code, wall s, max RSS KiB) of `tidb-bench argv` run with `pythonpath`."""
    cmd = [sys.executable, "-c", "from tidb_bench_operator.cli import main; "
           "import sys; sys.exit(main(sys.argv[1:]))", *argv]  # fmt: skip
    env = {"PYTHONPATH": str(pythonpath), "PATH": "/usr/bin:/bin"}
    try:
        out = subprocess.run(
            [sys.executable, "-c", MEASURE, str(timeout), *cmd],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout.split()
    except subprocess.CalledProcessError as exc:
        if "TimeoutExpired" in exc.stderr:
            return -1, timeout, 0
        raise
    return int(out[0]), float(out[1]), int(out[2])


def medians(samples: list[tuple[int, float, int]]) -> str:
    if any(rc == -1 for rc, _, _ in samples):
        return f"> {samples[0][1]:.0f} s (cut off)"
    wall = statistics.median(s[1] for s in samples)
    rss = statistics.median(s[2] for s in samples) / 1024
    codes = sorted({s[0] for s in samples})
    return f"{wall:.2f} s, {rss:.0f} MB, exit {','.join(map(str, codes))}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--text-mb", type=int, default=4)
    p.add_argument("--log-mb", type=int, default=200)
    p.add_argument("--baseline", default=None, help="git revision to compare with")
    p.add_argument("--baseline-timeout", type=float, default=120.0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    rows: list[dict[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="tidb-bench-hostile-") as tmp:
        folder = Path(tmp)
        versions = {"this version": (ROOT / "operator", 600.0)}
        if args.baseline:
            versions[f"baseline {args.baseline}"] = (
                operator_of(args.baseline, folder / "baseline"),
                args.baseline_timeout,
            )
        for kind, path in text_inputs(folder, args.text_mb * 1024 * 1024).items():
            row = {"input": f"pd-check --stores: {args.text_mb} MB of {kind}"}
            for label, (pythonpath, timeout) in versions.items():
                repeat = args.repeat if label == "this version" else 1
                row[label] = medians(
                    [
                        measure(pythonpath, ["pd-check", "--stores", str(path)], timeout)
                        for _ in range(repeat)
                    ]
                )
            rows.append(row)
            print(json.dumps(row), flush=True)
        log = folder / "big.log"
        lines = big_log(log, args.log_mb)
        size = log.stat().st_size / 1024 / 1024
        row = {"input": f"parse: a {size:.0f} MB sysbench log ({lines:,} interval lines)"}
        for label, (pythonpath, timeout) in versions.items():
            repeat = max(1, args.repeat // 2) if label == "this version" else 1
            row[label] = medians(
                [measure(pythonpath, ["parse", str(log)], timeout) for _ in range(repeat)]
            )
        rows.append(row)
        print(json.dumps(row), flush=True)
    labels = list(versions)
    print("\n| input | " + " | ".join(labels) + " |")
    print("|---|" + "---:|" * len(labels))
    for row in rows:
        print(f"| {row['input']} | " + " | ".join(row[label] for label in labels) + " |")
    return 0


if __name__ == "__main__":
    started = time.monotonic()
    code = main()
    print(f"\n(bench took {time.monotonic() - started:.0f} s)")
    sys.exit(code)
