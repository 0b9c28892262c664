"""Before/after proof of a refactoring: the CLI's output on every input in tests/data/, byte
for byte, on a base revision and on this checkout.

    python scripts/compare_outputs.py [--base REV]      (make compare-outputs; default: main)

The base revision is checked out into a temporary `git worktree` (removed at the end). Each
case runs `python -m tidb_bench_operator.cli ...` once per tree, with PYTHONPATH set to that
tree's operator/, in a fixed environment (TZ=UTC, C.UTF-8, no kubeconfig, a fresh empty working
directory), and compares stdout, stderr, the exit code and every file the case writes
(--svg, --html). The inputs are this checkout's files, by the same path for both trees, so
only the code differs. Cases:

  - `parse FILE` of each sysbench output under tests/data/sysbench, --format json and table,
    and of all of them at once;
  - `pd-check --stores F` of each file under tests/data/pd (most are no stores sample: they
    must be refused identically), and of each stores sample with each operators sample;
  - `report FILE` of each saved run, results ConfigMap and schedule (tests/data/report,
    tests/data/golden, docs/report, examples/, a saved schedule written here): Markdown on
    stdout, with --svg OUT, with --html OUT, and both; with --results, with --compare of a
    run and of the reference files (examples/reference), and the refusals;
  - --help of every verb and --version.

One line per case (same / DIFFERENT, with what differs), then `N cases: S same, D different`;
exit status 1 when any case differs.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
#: Files a case may write, relative to its working directory.
OUTPUTS = ("out.svg", "out.html")

#: A saved BenchmarkSchedule with a history, a verdict and a change point: tests/data holds
#: none, and the schedule's report (history table, trend chart) needs one.
SCHEDULE = """\
apiVersion: tidbbench.io/v1alpha1
kind: BenchmarkSchedule
metadata:
  name: nightly-point-select
  namespace: bench
status:
  verdict: Regressed
  lastSuccessfulRun: nightly-4
  changePoints:
  - workload: oltp_point_select
    threads: 4
    run: nightly-3
    previousRun: nightly-2
    pValue: 0.004
    beforeMedianQps: 41000.0
    afterMedianQps: 30500.0
    changePercent: -25.6
  history:
""" + "".join(
    f"""\
  - name: nightly-{n}
    outcome: Succeeded
    peakQps: {qps * 1.5}
    finishedAt: "2026-11-0{n}T02:{10 + n}:00Z"
    verdict: {"Regressed" if n >= 3 else "NoChange"}
    steps:
    - {{workload: oltp_point_select, threads: 2, qps: {qps}, trials: [{qps - 300}, {qps}]}}
    - {{workload: oltp_point_select, threads: 4, qps: {qps * 1.5}, trials: [{qps * 1.5}]}}
"""
    for n, qps in ((1, 27000.0), (2, 27400.0), (3, 20300.0), (4, 20500.0))
)


@dataclass(frozen=True)
class Case:
    """One command line, its stdin (None: none) and a short name for the report."""

    name: str
    argv: tuple[str, ...]
    stdin: bytes | None = None


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def files(folder: Path, *suffixes: str) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in suffixes)


def parse_cases() -> Iterator[Case]:
    outputs = files(DATA / "sysbench", ".txt")
    for path in outputs:
        for fmt in ("json", "table"):
            yield Case(f"parse {rel(path)} --format {fmt}", ("parse", str(path), "--format", fmt))
    everything = tuple(str(p) for p in outputs)
    yield Case("parse (all of tests/data/sysbench)", ("parse", *everything, "--format", "table"))
    first = outputs[0]
    yield Case("parse - (stdin)", ("parse", "-"), first.read_bytes())
    yield Case("parse --workload oltp_insert", ("parse", str(first), "--workload", "oltp_insert"))
    yield Case("parse --workload nonsense", ("parse", str(first), "--workload", "nonsense"))


def pd_cases() -> Iterator[Case]:
    samples = files(DATA / "pd", ".json", ".txt", ".yaml")
    for path in samples:
        for fmt in ("json", "table"):
            yield Case(
                f"pd-check --stores {rel(path)} --format {fmt}",
                ("pd-check", "--stores", str(path), "--format", fmt),
            )
    stores = [p for p in samples if "store" in p.name.lower()]
    operators = [p for p in samples if "operator-" in p.name and "store" not in p.name]
    for store in stores:
        for ops in operators:
            for fmt in ("json", "table"):
                yield Case(
                    f"pd-check --stores {rel(store)} --operators {rel(ops)} --format {fmt}",
                    ("pd-check", "--stores", str(store), "--operators", str(ops), "--format", fmt),
                )
    v81 = str(DATA / "pd" / "pd-api-v1-stores_v8.1.0_tidb-operator-testdata.json")
    for flag, value in (("--max-leader-size-skew", "0"), ("--max-region-size-skew", "nan")):
        yield Case(f"pd-check {flag} {value}", ("pd-check", "--stores", v81, flag, value))


def report_cases(schedule: Path) -> Iterator[Case]:
    docs = ROOT / "docs" / "report"
    references = files(ROOT / "examples" / "reference", ".yaml")
    runs = [
        *files(DATA / "report", ".yaml", ".yml", ".json"),
        DATA / "golden" / "results-configmap.yaml",
        *files(docs, ".yaml"),
    ]
    inputs = [*runs, *references, *files(ROOT / "examples" / "gitops" / "benchmarks", ".yaml")]
    inputs += [ROOT / "examples" / "point-select-sweep.yaml", DATA / "golden" / "event.yaml"]
    outputs = (
        ("", ()),
        (" --svg", ("--svg", OUTPUTS[0])),
        (" --html", ("--html", OUTPUTS[1])),
        (" --svg --html", ("--svg", OUTPUTS[0], "--html", OUTPUTS[1])),
    )

    def each_output(name: str, argv: tuple[str, ...]) -> Iterator[Case]:
        for suffix, extra in outputs:
            yield Case(name + suffix, (*argv, *extra))

    for path in inputs:
        yield from each_output(f"report {rel(path)}", ("report", str(path)))
    yield from each_output("report (saved schedule)", ("report", str(schedule)))
    tikv3, tikv4 = str(docs / "point-select-tikv3.yaml"), str(docs / "point-select-tikv4.yaml")
    sweep = str(docs / "read-write-sweep.yaml")
    results = str(docs / "read-write-sweep-results.yaml")
    golden = str(DATA / "golden" / "results-configmap.yaml")
    refs = tuple(arg for ref in references for arg in ("--compare", str(ref)))
    yield from each_output("report sweep --results", ("report", sweep, "--results", results))
    yield from each_output(
        "report tikv3 --compare tikv4 --compare references",
        ("report", tikv3, "--compare", tikv4, *refs),
    )
    for run in runs:
        for other in runs:
            if other != run:
                yield Case(
                    f"report {rel(run)} --compare {rel(other)}",
                    ("report", str(run), "--compare", str(other)),
                )
        yield from each_output(
            f"report {rel(run)} --compare references", ("report", str(run), *refs)
        )
    yield Case("report - (stdin)", ("report", "-", "--svg", OUTPUTS[0]), Path(tikv3).read_bytes())
    yield Case(
        "report --compare - (stdin)", ("report", tikv4, "--compare", "-"), Path(tikv3).read_bytes()
    )
    # Refusals: they must fail with the same words.
    refusals = {
        "two runs compared": ("report", tikv3, "--compare", tikv4, "--compare", sweep),
        "--results without series": ("report", sweep, "--results", golden),
        "--results not a ConfigMap": ("report", sweep, "--results", tikv3),
        "schedule with --compare": ("report", str(schedule), "--compare", tikv3),
        "schedule with --results": ("report", str(schedule), "--results", results),
        "schedule/NAME without a cluster": ("report", "schedule/nightly", "-n", "bench"),
        "schedule/ bad name": ("report", "schedule/Not_A_Name"),
        "NAME without a cluster": ("report", "nightly-1"),
        "missing file": ("report", "no-such-run.yaml"),
        "a directory": ("report", str(docs)),
        "unwritable --svg": ("report", tikv3, "--svg", "missing/dir/out.svg"),
        "unwritable --html": ("report", tikv3, "--html", "missing/dir/out.html"),
        "a sysbench log": ("report", str(files(DATA / "sysbench", ".txt")[0])),
    }
    for name, argv in refusals.items():
        yield Case(f"report: {name}", argv)


def help_cases() -> Iterator[Case]:
    yield Case("--version", ("--version",))
    yield Case("--help", ("--help",))
    yield Case("(no verb)", ())
    for verb in ("operator", "runner", "parse", "pd-check", "run", "report"):
        yield Case(f"{verb} --help", (verb, "--help"))


def environment(tree: Path, home: Path) -> dict[str, str]:
    """The same fixed environment for both trees: only PYTHONPATH differs."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "PYTHONPATH": str(tree / "operator"),
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONIOENCODING": "utf-8",
        "TZ": "UTC",
        "LC_ALL": "C.UTF-8",
        "LANG": "C.UTF-8",
        "COLUMNS": "100",
        "KUBECONFIG": str(home / "no-kubeconfig"),
    }


@dataclass(frozen=True)
class Outcome:
    """What one tree did with one case: exit code, stdout, stderr and the files written."""

    code: int
    stdout: bytes
    stderr: bytes
    written: tuple[tuple[str, bytes | None], ...]


def run(case: Case, tree: Path, scratch: Path) -> Outcome:
    with tempfile.TemporaryDirectory(dir=scratch) as work:
        cwd = Path(work)
        proc = subprocess.run(
            [sys.executable, "-m", "tidb_bench_operator.cli", *case.argv],
            cwd=cwd,
            env=environment(tree, scratch),
            input=case.stdin if case.stdin is not None else b"",
            capture_output=True,
            timeout=300,
            check=False,
        )
        written = tuple(
            (name, (cwd / name).read_bytes() if (cwd / name).exists() else None) for name in OUTPUTS
        )
    return Outcome(proc.returncode, proc.stdout, proc.stderr, written)


def differences(base: Outcome, new: Outcome) -> list[str]:
    found = []
    if base.code != new.code:
        found.append(f"exit {base.code} -> {new.code}")
    for what in ("stdout", "stderr"):
        if getattr(base, what) != getattr(new, what):
            found.append(what)
    for (name, before), (_, after) in zip(base.written, new.written, strict=True):
        if before != after:
            found.append(name if before is not None and after is not None else f"{name} written")
    return found


def digest(outcome: Outcome) -> str:
    blob = hashlib.sha256(outcome.stdout + b"\0" + outcome.stderr)
    for _, data in outcome.written:
        blob.update(b"\0" + (data or b""))
    return blob.hexdigest()[:10]


def worktree(rev: str, where: Path) -> None:
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(where), rev],
        check=True,
    )


def remove_worktree(where: Path) -> None:
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)],
        check=False,
        capture_output=True,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="main", help="the revision to compare with")
    parser.add_argument("--jobs", type=int, default=2, help="cases run at once (default 2)")
    parser.add_argument("--match", default="", help="only the cases whose name contains this")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each output digest")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="compare-outputs-") as tmp:
        scratch = Path(tmp)
        base = scratch / "base"
        worktree(args.base, base)
        try:
            schedule = scratch / "saved-schedule.yaml"
            schedule.write_text(SCHEDULE, encoding="utf-8")
            cases = [*help_cases(), *parse_cases(), *pd_cases(), *report_cases(schedule)]
            cases = [case for case in cases if args.match in case.name]

            def both(case: Case) -> tuple[Outcome, Outcome]:
                return run(case, base, scratch), run(case, ROOT, scratch)

            different = 0
            with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
                for case, (before, after) in zip(cases, pool.map(both, cases), strict=True):
                    found = differences(before, after)
                    different += bool(found)
                    verdict = "DIFFERENT (" + ", ".join(found) + ")" if found else "same"
                    extra = f" [exit {after.code}, {digest(after)}]" if args.verbose else ""
                    print(f"{verdict:<10} {case.name}{extra}", flush=True)
        finally:
            remove_worktree(base)
    print(f"{len(cases)} cases: {len(cases) - different} same, {different} different")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
