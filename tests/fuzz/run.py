"""Run the fuzz targets of tests/fuzz/targets.py with atheris, one after the other.

    python tests/fuzz/run.py [--seconds N] [TARGET...]     (make fuzz: FUZZ_SECONDS=600)
    python tests/fuzz/run.py --target NAME -- LIBFUZZER-ARGS (one libFuzzer process)

Each target's corpus lives in .fuzz/corpus/TARGET (seeded from tests/data/), crashes are
written to .fuzz/artifacts/; the summary prints executions, coverage and the verdict.
Every crash found becomes a regression test in tests/unit/test_hostile_input.py.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / ".fuzz"
SEEDS = {
    "sysbench": [ROOT / "tests/data/sysbench"],
    "pd": [ROOT / "tests/data/pd"],
    "documents": [ROOT / "tests/data/report", ROOT / "tests/data/golden", ROOT / "examples"],
}
#: Inputs larger than this are not tried (the parsers' size limits are tested directly).
MAX_LEN = 65536


def run_one_process(name: str, libfuzzer_args: list[str]) -> None:
    import atheris

    with atheris.instrument_imports(include=["tidb_bench_operator"]):
        from targets import TARGETS  # type: ignore[import-not-found]

    atheris.Setup([sys.argv[0], *libfuzzer_args], TARGETS[name])
    atheris.Fuzz()


def seed_corpus(name: str) -> Path:
    corpus = WORK / "corpus" / name
    corpus.mkdir(parents=True, exist_ok=True)
    for folder in SEEDS[name]:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.stat().st_size <= MAX_LEN:
                shutil.copyfile(path, corpus / f"seed-{path.name}")
    return corpus


def fuzz(name: str, seconds: int) -> tuple[bool, str]:
    corpus = seed_corpus(name)
    artifacts = WORK / "artifacts" / name
    artifacts.mkdir(parents=True, exist_ok=True)
    log = WORK / f"{name}.log"
    args = [
        sys.executable, str(Path(__file__)), "--target", name, "--",
        f"-max_total_time={seconds}", f"-max_len={MAX_LEN}", "-timeout=10",
        "-rss_limit_mb=2048", f"-artifact_prefix={artifacts}/", "-print_final_stats=1",
        str(corpus),
    ]  # fmt: skip
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "operator"), str(Path(__file__).parent)]),
    }
    started = time.monotonic()
    with log.open("w") as out:
        code = subprocess.call(args, stdout=out, stderr=subprocess.STDOUT, env=env)
    wall = time.monotonic() - started
    text = log.read_text(errors="replace")
    runs = re.findall(r"stat::number_of_executed_units: (\d+)", text)
    cov = re.findall(r"cov: (\d+)", text)
    verdict = "clean" if code == 0 else f"CRASH (exit {code}, see {log} and {artifacts})"
    line = (
        f"{name}: {verdict}; {runs[-1] if runs else '?'} executions in {wall:.0f} s, "
        f"coverage {cov[-1] if cov else '?'} edges, corpus {len(list(corpus.iterdir()))} inputs"
    )
    return code == 0, line


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--target":
        # One libFuzzer process: everything after `--` is libFuzzer's.
        rest = sys.argv[sys.argv.index("--") + 1 :] if "--" in sys.argv else []
        run_one_process(sys.argv[2], rest)
        return 0
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=int(os.environ.get("FUZZ_SECONDS", "600")))
    parser.add_argument("names", nargs="*")
    args = parser.parse_args()
    names = args.names or list(SEEDS)
    results = [fuzz(name, args.seconds) for name in names]
    for _, line in results:
        print(line)
    return 0 if all(ok for ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
