"""A clock for unit tests: it moves only when the test moves it (`clock.now += seconds`)."""

from __future__ import annotations


class Clock:
    """Callable like time.monotonic or time.time; returns `now`, which the test sets."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
