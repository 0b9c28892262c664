"""Where the Driver's looks run: a few slots, and beside them a lane for slow looks.

A look is a reconcile (and its status patch) run on a pool thread; it may wait on a
dependency for as long as that call's timeout (a database or PD that accepts and never
answers: seconds; before every call had one, a minute). Holding one of a few slots that
long would make every other run wait for it, guard looks included. So a look takes one of
`workers` slots; still running after `slow_after` seconds, it gives the slot back and goes
on beside the slots, one thread of its own (at most `slow_looks` at a time); the next look
of an object whose last look was slow starts there at once. Fast looks therefore always
find a slot within `slow_after` seconds, and slow ones cost a thread each, not a slot.
Measured in bench/silent_dependency.py; the choice is explained in docs/design.md.

All of it runs on the event loop, like the Driver's other state.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

log = logging.getLogger("tidb_bench_operator.controller.lanes")

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

#: A look still running after this long gives its slot back (see the module docstring).
SLOW_LOOK_SECONDS = 0.5
#: At most this many slow looks run beside the slots (one thread each); past it a slow look
#: keeps its slot. Every call a look makes has its own timeout, so each ends.
SLOW_LOOKS = 32
#: A look still running after this long is stuck (no call may take this long: each has a
#: timeout of at most a minute): /healthz names it until it ends, so the kubelet restarts
#: the controller rather than leave the object unlooked at.
LOOK_DEADLINE_SECONDS = 600.0


@dataclass
class Lanes(Generic[K]):
    """The slots and the slow lane; `threads` is what the Driver's pool must have."""

    workers: int
    slow_looks: int = SLOW_LOOKS
    slow_after: float = SLOW_LOOK_SECONDS
    clock: Callable[[], float] = field(default=lambda: 0.0)

    def __post_init__(self) -> None:
        self._slots: asyncio.Semaphore | None = None
        self._slow = 0
        #: Objects whose last look was slow: their next look starts beside the slots.
        self._slow_keys: set[K] = set()
        #: When each running look started (LOOK_DEADLINE_SECONDS).
        self._started: dict[K, float] = {}

    @property
    def threads(self) -> int:
        return self.workers + self.slow_looks

    def forget(self, key: K) -> None:
        self._slow_keys.discard(key)

    def stuck(self) -> dict[K, float]:
        """The looks running for longer than LOOK_DEADLINE_SECONDS, with their age."""
        now = self.clock()
        ages = {key: now - started for key, started in self._started.items()}
        return {key: age for key, age in ages.items() if age > LOOK_DEADLINE_SECONDS}

    async def run(self, key: K, look: Callable[[], Awaitable[T]]) -> T:
        """`look()` in a slot, given back once it is slow; beside the slots at once when
        the last look of `key` was slow (while the slow lane has room)."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.workers)
        slots = self._slots
        slow = key in self._slow_keys and self._slow < self.slow_looks
        if slow:
            self._slow += 1
        else:
            await slots.acquire()
        held = not slow
        started = self._started[key] = self.clock()
        task = asyncio.ensure_future(look())
        try:
            done, _ = await asyncio.wait({task}, timeout=None if slow else self.slow_after)
            if not done and self._slow < self.slow_looks:
                slots.release()
                held, slow = False, True
                self._slow += 1
                log.info("%s: slow look (over %.1f s), its slot given back", key, self.slow_after)
            return await task
        finally:
            if not task.done():
                task.cancel()
            if self.clock() - started < self.slow_after:
                self._slow_keys.discard(key)
            else:
                self._slow_keys.add(key)
            self._started.pop(key, None)
            if held:
                slots.release()
            if slow:
                self._slow -= 1
