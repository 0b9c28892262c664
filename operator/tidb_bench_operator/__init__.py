"""tidb-bench-operator: fair, repeatable sysbench thread sweeps against TiDB on Kubernetes."""

__version__ = "0.1.0"
