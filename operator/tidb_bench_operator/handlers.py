"""`kopf run -m tidb_bench_operator.handlers`: the documented entry point, kept for scripts.

The handlers live in `controller/handlers.py`; importing it registers them with kopf.
"""

from tidb_bench_operator.controller import handlers as _registered  # noqa: F401
