"""`python -m testbed up|down|status|restart-agent`: the local test bed from the command line.

`restart-agent` restarts only the node agent (e.g. after changing tests/testbed/agent.py),
leaving the control plane, MariaDB and everyone's pods as they are.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

from kubernetes import client

from testbed.agent import STANDIN_ANNOTATION, STANDIN_COMPONENTS
from testbed.bed import bring_up, tear_down
from testbed.cluster import Testbed, TestbedError, pid_alive
from testbed.kube import api_client
from testbed.services import start_agent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="testbed", description=__doc__)
    p.add_argument("action", choices=["up", "down", "status", "restart-agent"])
    p.add_argument(
        "--wait",
        type=float,
        default=300,
        help="restart-agent: seconds to wait for running benchmark pods to finish first",
    )
    args = p.parse_args(argv)
    tb = Testbed()
    if args.action == "down":
        tear_down(tb)
        print(f"test bed in {tb.state} stopped")
        return 0
    if args.action == "status":
        up = tb.is_up()
        print(f"test bed in {tb.state}: {'up at ' + tb.server if up else 'down'}")
        return 0 if up else 1
    if args.action == "restart-agent":
        return restart_agent(tb, args.wait)
    try:
        bring_up(tb)
    except TestbedError as exc:
        print(f"testbed: FAILED: {exc}", file=sys.stderr)
        tear_down(tb)
        return 1
    print(f"test bed up: {tb.server}\nexport KUBECONFIG={tb.kubeconfig}")
    return 0


def _busy_pods(tb: Testbed) -> list[str]:
    """Pods whose containers the agent runs right now (stand-ins only get a status)."""
    core = client.CoreV1Api(api_client(tb))
    busy = []
    for pod in core.list_pod_for_all_namespaces().items:
        labels, notes = pod.metadata.labels or {}, pod.metadata.annotations or {}
        standin = (
            labels.get("app.kubernetes.io/component") in STANDIN_COMPONENTS
            or notes.get(STANDIN_ANNOTATION) == "true"
        )
        if pod.spec.node_name and not standin and pod.status.phase in ("Pending", "Running"):
            busy.append(f"{pod.metadata.namespace}/{pod.metadata.name}")
    return busy


def restart_agent(tb: Testbed, wait: float) -> int:
    """Stop the agent recorded in agent.pid (and only it), then start it from today's code.

    A new agent would run again the containers of a pod the old one was running (it keeps
    no state), so first wait until no benchmark pod runs: other suites share the test bed.
    """
    if not tb.is_up():
        print(f"test bed in {tb.state} is down: use `up`", file=sys.stderr)
        return 1
    deadline = time.monotonic() + wait
    while busy := _busy_pods(tb):
        if time.monotonic() > deadline:
            print(f"testbed: pods still running after {wait:g} s: {busy}", file=sys.stderr)
            return 1
        time.sleep(1)
    pidfile = tb.state / "agent.pid"
    if pidfile.exists():
        pid = int(pidfile.read_text())
        if pid_alive(pid):
            os.kill(pid, signal.SIGTERM)
            stop_by = time.monotonic() + 10
            while pid_alive(pid) and time.monotonic() < stop_by:
                time.sleep(0.1)
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
    # start_agent looks for "agent up" in the log's tail: start a fresh log so the old
    # agent's line cannot count.
    log = tb.log_of("agent")
    if log.exists():
        log.replace(log.with_suffix(".log.old"))
    try:
        start_agent(tb)
    except TestbedError as exc:
        print(f"testbed: FAILED: {exc}", file=sys.stderr)
        return 1
    print(f"node agent restarted (pid {pidfile.read_text().strip()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
