"""Benchmark: `tidb-bench run` against bare sysbench on the same server and settings.

Alternates the two in ABBA order (bare, tool, tool, bare, ...) so drift in the server and
order effects hit both alike, and prints every QPS, each pair's ratio, the medians and the
verdict. Target: the tool within 3% of bare sysbench, judged on the median of the per-pair
ratios (the two runs of a pair are back to back, so slow drift of the machine cancels out).

    make testbed-up && .venv/bin/python bench/run_vs_sysbench.py [--pairs 10] [--seconds 10]

Uses the test bed's MariaDB (or --host/--port/--user with TIDB_BENCH_PASSWORD). On the test
bed, MariaDB is pinned to CPU 0 and the clients to CPU 1 while it runs (`--no-pin` to skip):
on 2 cores, client and server fighting over both CPUs swing QPS by 10-20% between runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pymysql

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def testbed_db() -> dict[str, object]:
    return dict(json.loads((ROOT / ".testbed" / "mariadb.json").read_text()))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=10)
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--workload", default="oltp_point_select")
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    p.add_argument("--user")
    p.add_argument(
        "--no-pin",
        action="store_true",
        help="test bed only: do not pin MariaDB to CPU 0 and the clients to CPU 1",
    )
    args = p.parse_args()
    mariadb_pid = ""
    pin: list[str] = []
    if not args.host and not args.no_pin and (os.cpu_count() or 1) >= 2:
        mariadb_pid = (ROOT / ".testbed" / "mariadb.pid").read_text().strip()
        pin = ["taskset", "-c", "1"]
    try:
        if mariadb_pid:
            subprocess.run(["taskset", "-a", "-p", "-c", "0", mariadb_pid], check=True,
                           capture_output=True)  # fmt: skip
        return measure(args, pin)
    finally:
        if mariadb_pid:
            # Give the test bed's MariaDB all CPUs back: e2e and the demo expect that.
            subprocess.run(["taskset", "-a", "-p", "-c", f"0-{(os.cpu_count() or 1) - 1}",
                            mariadb_pid], check=False, capture_output=True)  # fmt: skip


def measure(args: argparse.Namespace, pin: list[str]) -> int:
    if args.host:
        db = {
            "host": args.host,
            "port": args.port or 4000,
            "user": args.user or "root",
            "password": os.environ.get("TIDB_BENCH_PASSWORD", ""),
        }
    else:
        db = testbed_db()
    database = "bench_ratio"
    common = [
        args.workload,
        "--db-driver=mysql",
        f"--mysql-host={db['host']}",
        f"--mysql-port={db['port']}",
        f"--mysql-user={db['user']}",
        f"--mysql-db={database}",
        "--tables=1",
        "--table-size=10000",
    ]
    env = {
        **os.environ,
        "TIDB_BENCH_PASSWORD": str(db["password"]),
        "TIDB_BENCH_USER": str(db["user"]),
    }
    # The password goes in no argv, as in the tool: a 0600 sysbench --config-file.
    secrets_dir = tempfile.TemporaryDirectory(prefix="bench-ratio-")
    cfg = Path(secrets_dir.name) / "sysbench.cfg"
    cfg.touch(mode=0o600)
    cfg.write_text(f"mysql-password={db['password']}\n")
    # One dataset for both, prepared by the tool (IfMissing) before the first measurement.
    spec = {
        "apiVersion": "tidbbench.io/v1alpha1",
        "kind": "BenchmarkRun",
        "metadata": {"name": "ratio"},
        "spec": {
            "credentials": {"secretRef": {"name": "unused"}},
            "database": database,
            "workloads": [args.workload],
            "threads": [args.threads],
            "durationSeconds": args.seconds,
            "reportIntervalSeconds": args.seconds,
            "dataset": {"tables": 1, "tableSize": 10000, "prepare": "IfMissing"},
        },
    }
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        json.dump(spec, f)
        run_file = f.name
    conn = pymysql.connect(host=str(db["host"]), port=int(str(db["port"])), user=str(db["user"]),
                           password=str(db["password"]))  # fmt: skip
    with conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{database}`")

    def bare() -> float:
        out = subprocess.run(
            [*pin, "sysbench", f"--config-file={cfg}", *common, f"--threads={args.threads}",
             f"--time={args.seconds}", f"--report-interval={args.seconds}", "--percentile=95",
             "run"],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        line = next(ln for ln in out.splitlines() if ln.strip().startswith("queries:"))
        return float(line.split("(")[1].split()[0])

    def tool() -> float:
        out = subprocess.run(
            [*pin, str(BIN / "tidb-bench"), "run", "-f", run_file, f"--host={db['host']}",
             f"--port={db['port']}", f"--user={db['user']}", "--format=json"],
            check=True, capture_output=True, text=True, env=env,
        ).stdout  # fmt: skip
        return float(json.loads(out)["steps"][0]["qps"])

    print(f"{args.workload}, {args.threads} thread(s), {args.seconds} s per run, "
          f"{args.pairs} pairs, clients pinned: {'yes' if pin else 'no'}", flush=True)  # fmt: skip
    tool()  # prepares the table if missing; not counted
    bare()  # and both warm up; not counted
    bares, tools, ratios = [], [], []
    print(f"{'pair':>6}  {'bare sysbench QPS':>18}  {'tidb-bench run QPS':>18}  {'tool/bare':>9}")
    try:
        for i in range(args.pairs):
            # ABBA order: a fixed order would credit one side with whatever follows the other.
            if i % 2 == 0:
                b, t = bare(), tool()
            else:
                t, b = tool(), bare()
            bares.append(b)
            tools.append(t)
            ratios.append(t / b)
            print(f"{i + 1:>6}  {b:>18,.2f}  {t:>18,.2f}  {t / b:>9.4f}", flush=True)
    finally:
        Path(run_file).unlink()
        secrets_dir.cleanup()
    mb, mt = statistics.median(bares), statistics.median(tools)
    ratio = statistics.median(ratios)
    print(f"{'median':>6}  {mb:>18,.2f}  {mt:>18,.2f}  {ratio:>9.4f}")
    print(f"ratio of the medians {mt / mb:.4f}; median of the per-pair ratios {ratio:.4f} "
          f"({(ratio - 1) * 100:+.2f}%); target within 3%: "
          f"{'OK' if abs(ratio - 1) <= 0.03 else 'NOT MET'}")  # fmt: skip
    return 0 if abs(ratio - 1) <= 0.03 else 1


if __name__ == "__main__":
    sys.exit(main())
