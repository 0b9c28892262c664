#!/usr/bin/env bash
# `make e2e`: the test bed up once, the parallel-safe e2e tests on E2E_WORKERS pytest-xdist
# workers, then the tests marked `serial` alone; the bed torn down again if this script
# brought it up (on failure too). Exits non-zero when either phase failed. See docs/testbed.md.
set -uo pipefail

BIN="${BIN:-.venv/bin}"
WORKERS="${E2E_WORKERS:-2}"
PYTEST=("$BIN/pytest" tests/e2e -q -p no:cacheprovider --durations=15)

started=0
if ! "$BIN/python" -m testbed status >/dev/null 2>&1; then
    started=1
fi
down() {
    if [ "$started" = 1 ]; then
        "$BIN/python" -m testbed down || true
    fi
}
trap down EXIT
trap 'exit 130' INT TERM

# Up once here, so that the workers' `testbed` fixtures reuse it (testbed/bed.py bring_up):
# two workers starting a control plane on the same ports at once would collide.
"$BIN/python" -m testbed up || exit 1

# pytest's exit code 5 is "no test collected": a phase that has none has not failed.
phase() {
    local name="$1"
    shift
    local t0=$SECONDS rc=0
    echo "== e2e $name: pytest $*"
    "${PYTEST[@]}" "$@" || rc=$?
    [ "$rc" = 5 ] && rc=0
    echo "== e2e $name: exit $rc after $((SECONDS - t0)) s"
    return "$rc"
}

t0=$SECONDS
parallel_rc=0
serial_rc=0
# Each file on one worker, and the files that share something global (the cluster-wide
# install of deploy/) on the same one: tests/e2e/conftest.py's scheduler.
phase parallel -m "not serial" -n "$WORKERS" --dist loadfile || parallel_rc=$?
phase serial -m serial || serial_rc=$?
echo "== e2e: parallel exit $parallel_rc, serial exit $serial_rc, $((SECONDS - t0)) s in all"
[ "$parallel_rc" = 0 ] && [ "$serial_rc" = 0 ]
