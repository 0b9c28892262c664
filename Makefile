# tidb-bench-operator — `make test` is the whole suite (CI calls exactly that); `make demo`
# brings the local test bed up and runs the example benchmarks on it.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export PYTHONPATH := $(CURDIR)/operator:$(CURDIR)/tests
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: test deps venv k8s lint types contracts unit e2e bench bench-input bench-guard bench-size bench-stall bench-resources fuzz soak testbed-up testbed-down demo clean crds docs-images compare-outputs

test: deps venv k8s lint types contracts unit e2e

deps:
	@bash scripts/testbed/install-deps.sh

venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/pip install -q -U pip >/dev/null
	@$(BIN)/pip install -q -e '.[dev]'
	@touch $@

k8s:
	@bash scripts/testbed/build-k8s.sh

lint: venv
	$(BIN)/ruff check operator tests bench scripts
	$(BIN)/ruff format --check operator tests bench scripts
	$(BIN)/hadolint Dockerfile
	# No product symbol used only by tests; no copied blocks; no reference to a document
	# outside the repository; no relative link in README.md or docs/ that leads nowhere; no
	# module over 500 lines without a reason (docs/design.md).
	$(BIN)/python scripts/lint/dead_code.py
	cd operator && ../$(BIN)/pylint --disable=all --enable=duplicate-code --score=n \
		--min-similarity-lines=6 tidb_bench_operator
	$(BIN)/python scripts/lint/doc_refs.py
	$(BIN)/python scripts/lint/doc_links.py
	$(BIN)/python scripts/lint/module_size.py
	$(BIN)/python scripts/lint/private_imports.py

types: venv
	$(BIN)/mypy
	# The tests' fakes against the Protocols they stand in for (tests/conformance.py).
	MYPYPATH=operator:tests $(BIN)/mypy --strict --follow-imports=silent tests/conformance.py

contracts: venv
	$(BIN)/lint-imports

unit: venv
	$(BIN)/pytest tests/unit -q

# The parallel-safe e2e tests on two workers, then those marked `serial` alone, on one test
# bed (docs/testbed.md); E2E_WORKERS=1 runs the first phase on one worker.
e2e: venv deps k8s
	@BIN=$(BIN) bash scripts/testbed/e2e.sh

crds: venv
	$(BIN)/python -m tidb_bench_operator.domain.crdgen crds/

testbed-up: venv deps k8s
	$(BIN)/python -m testbed up

testbed-down: venv
	$(BIN)/python -m testbed down

demo: venv deps k8s
	$(BIN)/python -m testbed.demo

clean: testbed-down
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

# Benchmarks (need `make testbed-up`): tool vs bare sysbench, the controller's overhead, the
# queue at scale; then the hostile-input benchmark (pd-check on 4 MB of text, parse of a
# 200 MB log); the statistics' false alarms and detection, a long run's size and the
# silent-dependency benchmark need nothing running.
bench: venv bench-input bench-size bench-stall
	$(BIN)/python bench/stats_false_alarms.py
	$(BIN)/python bench/run_vs_sysbench.py
	$(BIN)/python bench/controller_overhead.py
	$(BIN)/python bench/scale.py
	$(BIN)/python bench/resources_cost.py

# What reading server resources costs a step (controller CPU, Prometheus queries, wall
# time), against the same sweep with spec.metrics.source none; needs `make testbed-up`.
bench-resources: venv
	$(BIN)/python bench/resources_cost.py

bench-input: venv
	$(BIN)/python bench/hostile_input.py

# A long run's size (no test bed): 400 trials against the in-memory API, status, patch and
# results-store bytes and Jobs alive per trial count, beside the commit before the bound.
bench-size: venv
	$(BIN)/python bench/status_size.py

# A dependency that accepts and never answers (needs nothing running: the Driver on the fake
# API): a run's per-step overhead alone and beside eight runs whose database is silent.
bench-stall: venv
	$(BIN)/python bench/silent_dependency.py

# The guard's cost (needs `make testbed-up`): the same sweep with spec.guard Off and Flag in
# ABBA order, QPS ratio and the controller's CPU side by side.
bench-guard: venv
	$(BIN)/python bench/guard_overhead.py

# Coverage-guided fuzzing (atheris) of every parser of untrusted input, FUZZ_SECONDS per
# target (default 600), seeded from tests/data/; crashes land in .fuzz/artifacts/.
FUZZ_SECONDS ?= 600
fuzz: venv
	FUZZ_SECONDS=$(FUZZ_SECONDS) $(BIN)/python tests/fuzz/run.py

# Soak (not in `make test`): a schedule firing every minute for 30 min with random faults
# (controller kills, client pod deletions, API server restarts); every run must end.
soak: venv deps k8s
	$(BIN)/python -m testbed.soak

# The report charts shown in the README, from the saved runs in docs/report/ (SVG kept beside
# the PNG; tests/unit/test_docs_images.py fails when the code draws them differently now).
REPORT := $(BIN)/tidb-bench report
docs-images: venv
	$(REPORT) docs/report/read-write-sweep.yaml --results docs/report/read-write-sweep-results.yaml \
	  --svg docs/report-sweep.svg > /dev/null
	$(REPORT) docs/report/point-select-tikv3.yaml --compare docs/report/point-select-tikv4.yaml \
	  --compare examples/reference/published-sysbench.yaml --svg docs/report-compare.svg > /dev/null
	$(REPORT) docs/report/failed-and-invalid.yaml --svg docs/report-failed-invalid.svg > /dev/null
	$(REPORT) docs/report/point-select-resources.yaml --svg docs/report-resources.svg > /dev/null
	for f in sweep compare failed-invalid resources; do rsvg-convert -o docs/report-$$f.png docs/report-$$f.svg; done
	$(REPORT) examples/experiment/what-if-tikv-3-vs-4.yaml --svg docs/experiment-compare.svg > /dev/null
	$(REPORT) tests/data/experiment-window.json --svg docs/experiment-window.svg > /dev/null
	for f in compare window; do rsvg-convert -o docs/experiment-$$f.png docs/experiment-$$f.svg; done

# Before/after proof of a refactoring (not in `make test`): parse, pd-check and report on
# every input in tests/data/ give byte-identical output, exit code and files on BASE and here.
BASE ?= main
compare-outputs: venv
	$(BIN)/python scripts/compare_outputs.py --base $(BASE)
