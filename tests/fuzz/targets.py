"""Coverage-guided fuzz targets (atheris, libFuzzer) over every parser of untrusted input.

Each target takes arbitrary bytes, runs what the product runs on such input, and lets only
a TidbBenchError (a precise refusal) pass; any other exception, a result that breaks a
stated property (NaN in JSON, a negative rate, a balance judged on a missing size) or an
input that takes over libFuzzer's -timeout is a crash. Run them with `make fuzz`
(tests/fuzz/run.py); seeds come from tests/data/.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable

from tidb_bench_operator.cli.run import load_spec_text
from tidb_bench_operator.cli.sources import load_report_source
from tidb_bench_operator.domain.pd import parse_operators, parse_stores
from tidb_bench_operator.domain.preflight.pdcheck import run_pd_check
from tidb_bench_operator.domain.report.chart import render_svg
from tidb_bench_operator.domain.report.markdown import render_markdown
from tidb_bench_operator.domain.report.model import run_report
from tidb_bench_operator.domain.sysbench import parse_sysbench_output, to_step_result
from tidb_bench_operator.domain.untrusted import decode_text
from tidb_bench_operator.errors import TidbBenchError


def fuzz_sysbench(data: bytes) -> None:
    """sysbench output → step result: a sane StepResult or a TidbBenchError."""
    text = decode_text(data)
    try:
        step = to_step_result(parse_sysbench_output(text), "oltp_point_select")
    except TidbBenchError:
        return
    json.dumps(step.to_json_dict(), allow_nan=False)
    lat = step.latency_ms
    numbers = [step.tps, step.qps, step.read_qps, step.write_qps, step.other_qps, lat.min]
    numbers += [lat.avg, lat.max, step.errors_per_sec, step.reconnects_per_sec]
    if not all(math.isfinite(n) and n >= 0 for n in [*numbers, step.duration_seconds]):
        raise AssertionError(f"impossible number accepted: {step}")
    if not lat.min <= lat.avg + 0.01 <= lat.max + 0.02:
        raise AssertionError(f"impossible latency block accepted: {lat}")
    if step.threads < 1:
        raise AssertionError(f"impossible thread count accepted: {step.threads}")


def fuzz_pd(data: bytes) -> None:
    """PD stores/operators → pd-check verdict: judged only on sizes that were read."""
    with contextlib.suppress(TidbBenchError):
        parse_operators(data)
    try:
        stores = parse_stores(data)
        result = run_pd_check(data)
    except TidbBenchError:
        return
    json.dumps(result, allow_nan=False)
    checks = {c["name"]: c for c in result["checks"]}
    up = [s for s in stores if s.is_tikv and s.state_name == "Up"]
    for name, field in (
        ("leader-size-balance", "leader_size"),
        ("region-size-balance", "region_size"),
    ):
        values = [getattr(s, field) for s in up]
        if any(v is None for v in values) and checks[name]["status"] != "Fail":
            raise AssertionError(f"{name} judged a store without {field}: {checks[name]}")
        if any(v is not None and v < 0 for v in values):
            raise AssertionError(f"negative {field} accepted")


def fuzz_documents(data: bytes) -> None:
    """A saved run (report) or a run file: read, validated, rendered, or refused."""
    from pydantic import ValidationError

    text = decode_text(data)
    try:
        source = load_report_source(text, "run.yaml")
        report = run_report(source.name, source.status, compare=(source.name, source.status))
        render_markdown(report)
        render_svg(report)
    except (TidbBenchError, ValidationError):
        pass  # cmd_report turns a ValidationError into a TidbBenchError
    try:
        from tidb_bench_operator.domain.api.resources import parse_run_spec

        parse_run_spec(load_spec_text(text))
    except TidbBenchError:
        pass


TARGETS: dict[str, Callable[[bytes], None]] = {
    "sysbench": fuzz_sysbench,
    "pd": fuzz_pd,
    "documents": fuzz_documents,
}
