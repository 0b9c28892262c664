"""Property-based tests (hypothesis) over the parsers that read untrusted input.

Two kinds of property: a report or PD body built the way the real program prints it reads
back exactly; and any input at all (random text, random JSON, mutated real captures) ends
in a result or a TidbBenchError, never another exception, and a result that is returned
holds only finite, non-negative, mutually consistent numbers and is strict JSON.
The properties are the fuzz targets' (tests/fuzz/targets.py): hypothesis drives them with
structured inputs, the coverage-guided fuzzer (`make fuzz`) with arbitrary bytes for longer.
The example counts are kept small so that `make unit` stays fast.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fuzz.targets import fuzz_pd, fuzz_sysbench
from tidb_bench_operator.cli.sources import load_report_source
from tidb_bench_operator.domain.pd import parse_operators, parse_stores
from tidb_bench_operator.domain.preflight import check_leader_size_balance, compute_skew
from tidb_bench_operator.domain.sysbench import parse_sysbench_output, to_step_result
from tidb_bench_operator.domain.untrusted import MAX_FLOAT, embedded_json_values
from tidb_bench_operator.errors import TidbBenchError

DATA = Path(__file__).resolve().parents[1] / "data"
SAMPLES = sorted((DATA / "sysbench").glob("*.txt"))
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- sysbench: a report printed with sysbench's formats reads back exactly ---------------


@st.composite
def sysbench_report(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A 1.0.20 end-of-run report printed with sysbench's own format strings."""
    threads = draw(st.integers(1, 4096))
    events = draw(st.integers(1, 10**9))
    seconds = draw(st.floats(0.5, 1e5))
    reads = draw(st.integers(0, 20)) * events
    writes = draw(st.integers(0, 8)) * events
    other = draw(st.integers(0, 2)) * events
    avg_true = draw(st.floats(0.001, 1e4))
    lo = avg_true * draw(st.floats(0.0, 1.0))
    hi = avg_true * draw(st.floats(1.0, 1e3))
    pct = draw(st.integers(1, 100))
    pvalue = draw(st.floats(0.0, 1e5))
    errors = draw(st.integers(0, events))
    total = reads + writes + other
    text = (
        "sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)\n\n"
        "Running the test with following options:\n"
        f"Number of threads: {threads}\n"
        "Initializing random number generator from current time\n\n\n"
        "Initializing worker threads...\n\nThreads started!\n\n"
        "SQL statistics:\n    queries performed:\n"
        f"        read:                            {reads}\n"
        f"        write:                           {writes}\n"
        f"        other:                           {other}\n"
        f"        total:                           {total}\n"
        f"    transactions:                        {events:<6} ({events / seconds:.2f} per sec.)\n"
        f"    queries:                             {total:<6} ({total / seconds:.2f} per sec.)\n"
        f"    ignored errors:                      {errors:<6} ({errors / seconds:.2f} per sec.)\n"
        f"    reconnects:                          0      (0.00 per sec.)\n\n"
        "General statistics:\n"
        f"    total time:                          {seconds:.4f}s\n"
        f"    total number of events:              {events}\n\n"
        "Latency (ms):\n"
        f"         min: {lo:39.2f}\n"
        f"         avg: {avg_true:39.2f}\n"
        f"         max: {hi:39.2f}\n"
        f"        {pct:3d}th percentile: {pvalue:27.2f}\n"
        f"         sum: {avg_true * events:39.2f}\n\n"
        "Threads fairness:\n"
        f"    events (avg/stddev):           {events / threads:.4f}/0.00\n"
        f"    execution time (avg/stddev):   {seconds:.4f}/0.00\n\n"
    )
    expected = {
        "threads": threads,
        "events": events,
        "tps": float(f"{events / seconds:.2f}"),
        "qps": float(f"{total / seconds:.2f}"),
        "min": float(f"{lo:.2f}"),
        "avg": float(f"{avg_true:.2f}"),
        "max": float(f"{hi:.2f}"),
        "percentile": pct,
        "duration": float(f"{seconds:.4f}"),
    }
    return text, expected


@FAST
@given(sysbench_report())
def test_a_report_printed_with_sysbench_formats_reads_back_exactly(
    case: tuple[str, dict[str, Any]],
) -> None:
    text, want = case
    step = to_step_result(parse_sysbench_output(text), "oltp_read_write")
    assert step.threads == want["threads"]
    assert step.events == want["events"]
    assert (step.tps, step.qps) == (want["tps"], want["qps"])
    assert (step.latency_ms.min, step.latency_ms.avg, step.latency_ms.max) == (
        want["min"],
        want["avg"],
        want["max"],
    )
    assert step.latency_ms.percentile == want["percentile"]
    assert step.duration_seconds == want["duration"]
    assert math.isclose(step.read_qps + step.write_qps + step.other_qps, step.qps, abs_tol=0.05)


def assert_sane_step(text: str) -> None:
    """Any text: a StepResult with sane numbers, or a TidbBenchError; nothing else."""
    fuzz_sysbench(text.encode("utf-8", "surrogatepass"))


@FAST
@given(st.text(max_size=2000))
def test_any_text_parses_to_a_sane_step_or_a_precise_error(text: str) -> None:
    assert_sane_step(text)


@st.composite
def mutated_sample(draw: st.DrawFn) -> str:
    """A real capture with lines dropped, duplicated, swapped or edited, or cut short."""
    lines = draw(st.sampled_from(SAMPLES)).read_text().splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["drop", "dup", "edit", "swap", "cut"]))
        if action == "drop":
            del lines[i]
        elif action == "dup":
            lines.insert(i, lines[i])
        elif action == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif action == "cut":
            lines = [*lines[:i], lines[i][: draw(st.integers(0, len(lines[i])))]]
        else:
            token = draw(st.sampled_from(["nan", "-1.00", "inf", "N/A", "9" * 30, "", "0.00"]))
            head, sep, _ = lines[i].partition(":")
            lines[i] = f"{head}{sep} {token}\n" if sep else token + "\n"
    return "".join(lines)


@settings(max_examples=150, deadline=None)
@given(mutated_sample())
def test_mutated_real_captures_give_a_sane_step_or_a_precise_error(text: str) -> None:
    assert_sane_step(text)


# --- PD: any JSON is stores/operators or a precise error; no unjudgeable verdict ---------

# Numbers as PD can send them (64-bit); larger ones are refused (tests/unit/test_hostile_input.py).
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(-MAX_FLOAT, MAX_FLOAT)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)  # fmt: skip

STORE_KEYS = st.sampled_from(["id", "state_name", "state", "address", "labels"])
STATUS_KEYS = st.sampled_from(["leader_size", "region_size", "region_count", "leader_count"])


@st.composite
def store_shaped(draw: st.DrawFn) -> dict[str, Any]:
    """Store-like documents with random values in the fields the parser reads."""
    infos = []
    for _ in range(draw(st.integers(0, 4))):
        store = draw(st.dictionaries(STORE_KEYS, JSON_VALUES, max_size=5))
        if draw(st.booleans()):
            store["id"] = draw(st.integers(0, 2**64))
            store["state_name"] = draw(st.sampled_from(["Up", "Offline", "Tombstone", "Down"]))
        info: dict[str, Any] = {"store": store}
        if draw(st.booleans()):
            info["status"] = draw(st.dictionaries(STATUS_KEYS, JSON_VALUES | st.integers(0, 10**6)))
        infos.append(info)
    return {"count": len(infos), "stores": infos}


def assert_checks_judge_only_what_they_can(stores_text: str) -> None:
    """Stores and operators read or refused; a balance judged only on sizes that were read."""
    fuzz_pd(stores_text.encode("utf-8", "surrogatepass"))


@FAST
@given(store_shaped())
def test_store_shaped_documents_are_read_or_refused_and_never_judged_blind(
    doc: dict[str, Any],
) -> None:
    assert_checks_judge_only_what_they_can(json.dumps(doc))


@FAST
@given(JSON_VALUES)
def test_any_json_is_stores_operators_or_a_precise_error(value: Any) -> None:
    text = json.dumps(value)
    assert_checks_judge_only_what_they_can(text)
    try:
        operators = parse_operators(text)
    except TidbBenchError:
        return
    assert value is None or isinstance(value, list)
    assert len(operators) == (0 if value is None else len(value))


@FAST
@given(st.text(max_size=3000))
def test_any_text_is_stores_operators_or_a_precise_error(text: str) -> None:
    assert_checks_judge_only_what_they_can(text)


@FAST
@given(st.lists(st.integers(0, 10**7), min_size=2, max_size=8), st.floats(0, 5))
def test_balance_passes_exactly_when_the_skew_is_within_the_bound(
    sizes: list[int], bound: float
) -> None:
    body = {
        "count": len(sizes),
        "stores": [
            {"store": {"id": i + 1, "state_name": "Up"}, "status": {"leader_size": size}}
            for i, size in enumerate(sizes)
        ],
    }
    result = check_leader_size_balance(parse_stores(json.dumps(body)), bound)
    assert (result.status == "Pass") == (compute_skew([float(s) for s in sizes]) <= bound)


@FAST
@given(JSON_VALUES, st.text(alphabet="abc xyz:-\t", max_size=200))
def test_json_printed_on_its_own_line_amid_prose_is_found(value: Any, prose: str) -> None:
    assume(isinstance(value, dict | list))
    text = f"{prose}\n{json.dumps(value, indent=1)}\n{prose}\n"
    assert next(iter(embedded_json_values(text))) == value


# --- saved runs for `tidb-bench report` ----------------------------------------------------


@FAST
@given(st.text(max_size=2000) | JSON_VALUES.map(json.dumps))
def test_any_saved_run_text_is_read_or_refused_precisely(text: str) -> None:
    try:
        name, status = load_report_source(text, "run.yaml")
    except TidbBenchError:
        return
    assert isinstance(name, str) and isinstance(status, dict)
