"""The Driver and a dependency that accepts and never answers: a silent target's looks give
their slot back, so the other runs' looks (guard looks included) keep their pace."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator

import pytest

from tidb_bench_operator.controller.driver import WORKERS, Driver
from tidb_bench_operator.domain.queue import ADMITTED, Turn
from tidb_bench_operator.reconcile.run import Outcome
from unit.controller.test_driver import JSON, NOW, Runs, Schedules, World, event


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts connections and never sends a byte."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield listener.getsockname()[1]


class SilentTargets(Runs):
    """Runs named silent-* ask a dependency that never answers (a 2-s read timeout, as the
    adapters have theirs); the others answer at once with a short hint."""

    def __init__(self, port: int) -> None:
        super().__init__(hint=0.05)
        self.port = port

    def reconcile(self, body: JSON, turn: Turn = ADMITTED) -> Outcome:
        if body["metadata"]["name"].startswith("silent"):
            with socket.create_connection(("127.0.0.1", self.port), timeout=2.0) as conn:
                conn.settimeout(2.0)
                with contextlib.suppress(TimeoutError):
                    conn.recv(1)
            return Outcome(status={}, requeue_seconds=1.0)
        return super().reconcile(body, turn)


def looks_of_normal(port: int, silent: int, seconds: float = 3.0) -> int:
    world = World()
    runs = SilentTargets(port)
    driver = Driver(runs=runs, schedules=Schedules(None), kube=world, wall=lambda: NOW)
    for i in range(silent):  # each on a cluster of its own: all of them measure at once
        world.add(f"silent-{i}", phase="Preflight")
        world.objects[f"silent-{i}"]["spec"]["cluster"]["name"] = f"silent-{i}"
        event(driver, world, f"silent-{i}", "ADDED")
    world.objects.setdefault("normal", world.add("normal", phase="Running"))
    world.objects["normal"]["spec"]["cluster"]["name"] = "normal"
    event(driver, world, "normal", "ADDED")

    async def for_a_while() -> None:
        loop = asyncio.create_task(driver.run())
        await asyncio.sleep(seconds)
        loop.cancel()

    asyncio.run(for_a_while())
    return runs.names().count("normal")


def test_eight_silent_targets_do_not_slow_the_other_runs_looks(silent_port: int) -> None:
    alone = looks_of_normal(silent_port, 0)
    beside = looks_of_normal(silent_port, 2 * WORKERS)
    assert alone >= 20, alone
    # A silent target's first look holds a slot for SLOW_LOOK_SECONDS (0.5 s; eight of them
    # fill the four slots twice), its later looks start beside the slots: the normal run
    # loses about a second of the three once, never the silent calls' 2 s per look.
    assert beside >= alone / 2, f"{beside} looks beside eight silent targets, {alone} alone"
