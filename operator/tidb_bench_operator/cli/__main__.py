"""`python -m tidb_bench_operator.cli`: the same as the `tidb-bench` command."""

import sys

from tidb_bench_operator.cli import main

sys.exit(main())
