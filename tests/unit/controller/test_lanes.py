"""The Driver's lanes: a slow look gives its slot back, the next look of that object starts
beside the slots, the slow lane is bounded, and a look past its deadline is reported."""

from __future__ import annotations

import asyncio

from testbed.clocks import SecondsClock
from tidb_bench_operator.controller.lanes import LOOK_DEADLINE_SECONDS, Lanes


def test_slow_looks_leave_the_slot_and_the_lane_is_bounded_and_stuck_looks_are_named() -> None:
    clock = SecondsClock()
    lanes: Lanes[str] = Lanes(workers=1, slow_looks=1, slow_after=0.05, clock=clock)
    order: list[str] = []

    async def scenario() -> None:
        release = asyncio.Event()

        async def hung() -> str:
            await release.wait()
            return "hung"

        async def quick(name: str) -> str:
            order.append(name)
            return name

        first = asyncio.create_task(lanes.run("silent-0", hung))
        await asyncio.sleep(0.1)  # past slow_after: its slot is free again
        assert await lanes.run("normal", lambda: quick("normal")) == "normal"
        # The slow lane is full (1): a second silent look keeps its slot...
        second = asyncio.create_task(lanes.run("silent-1", hung))
        await asyncio.sleep(0.1)
        waiting = asyncio.create_task(lanes.run("normal", lambda: quick("normal-2")))
        await asyncio.sleep(0.1)
        assert order == ["normal"], "the one slot is held by silent-1"
        clock.now += LOOK_DEADLINE_SECONDS + 1
        assert set(lanes.stuck()) == {"silent-0", "silent-1"}
        release.set()
        assert await first == "hung" and await second == "hung"
        assert await waiting == "normal-2"
        assert lanes.stuck() == {}
        # silent-0's last look was slow: its next one starts beside the slot, at once.
        hold = asyncio.Event()

        async def busy() -> str:
            await hold.wait()
            return "busy"

        holder = asyncio.create_task(lanes.run("busy", busy))
        await asyncio.sleep(0.01)  # busy holds the slot (not slow yet)
        assert await lanes.run("silent-0", lambda: quick("silent-0 again")) == "silent-0 again"
        hold.set()
        await holder

    asyncio.run(scenario())
