"""Benchmark: `tidb-bench run` against bare sysbench on the same server and settings.

Alternates the two in ABBA order (bare, tool, tool, bare, ...) so drift in the server and
order effects hit both alike,
and prints every QPS, the medians and the ratio. Target: the tool within 3% of bare sysbench.

    make testbed-up && .venv/bin/python bench/run_vs_sysbench.py [--pairs 5] [--seconds 10]

Uses the test bed's MariaDB (or --host/--port/--user with TIDB_BENCH_PASSWORD).
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

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def testbed_db() -> dict[str, object]:
    return dict(json.loads((ROOT / ".testbed" / "mariadb.json").read_text()))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--workload", default="oltp_point_select")
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    p.add_argument("--user")
    p.add_argument(
        "--pin",
        action="store_true",
        help="test bed only: pin MariaDB to CPU 0 and the clients to CPU 1 (less noise)",
    )
    args = p.parse_args()
    pin: list[str] = []
    if args.pin:
        # On 2 cores, client and server threads fighting over both CPUs swing QPS by ±20%
        # from one 10 s run to the next; one CPU each makes runs comparable.
        mariadb_pid = (ROOT / ".testbed" / "mariadb.pid").read_text().strip()
        subprocess.run(["taskset", "-a", "-p", "-c", "0", mariadb_pid], check=True,
                       capture_output=True)  # fmt: skip
        pin = ["taskset", "-c", "1"]
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
    pw = f"--mysql-password={db['password']}"
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
    subprocess.run(
        ["mariadb", f"--host={db['host']}", f"--port={db['port']}", f"--user={db['user']}",
         pw.replace("--mysql-", "--"), "-e", f"CREATE DATABASE IF NOT EXISTS {database}"],
        check=True, capture_output=True,
    )  # fmt: skip

    def bare() -> float:
        out = subprocess.run(
            [*pin, "sysbench", *common, f"--threads={args.threads}", f"--time={args.seconds}",
             f"--report-interval={args.seconds}", "--percentile=95", pw, "run"],
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

    tool()  # prepares the table if missing, and warms both up; not counted
    bares, tools = [], []
    print(f"{'pair':>4}  {'bare sysbench QPS':>18}  {'tidb-bench run QPS':>18}")
    for i in range(args.pairs):
        # ABBA order: a fixed order would credit one side with whatever follows the other.
        if i % 2 == 0:
            b, t = bare(), tool()
        else:
            t, b = tool(), bare()
        bares.append(b)
        tools.append(t)
        print(f"{i + 1:>4}  {b:>18,.2f}  {t:>18,.2f}")
    mb, mt = statistics.median(bares), statistics.median(tools)
    ratio = mt / mb
    print(f"median  {mb:>18,.2f}  {mt:>18,.2f}")
    print(f"ratio tool/bare = {ratio:.4f} ({(ratio - 1) * 100:+.2f}%); target within 3%: "
          f"{'OK' if abs(ratio - 1) <= 0.03 else 'NOT MET'}")  # fmt: skip
    Path(run_file).unlink()
    return 0 if abs(ratio - 1) <= 0.03 else 1


if __name__ == "__main__":
    sys.exit(main())
