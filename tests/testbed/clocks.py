"""A monotonic clock the tests move by hand: timelines and re-check loops without waiting."""

from __future__ import annotations


class SecondsClock:
    """`time.monotonic` and `time.sleep` in one: sleeping moves the clock and is recorded."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
