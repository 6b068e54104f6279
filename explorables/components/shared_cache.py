"""A bounded, process-wide memo for values that are pure functions of an explorable's controls.

A class following a lesson asks the same questions: thirty students drag the same slider over
the same values on the same default vector. What the server computes for one setting (the
trace, the tables, the text alternatives, the plot data) is the same for every student, so one
process keeps the most recently used settings and each session takes its answer from there.

Only immutable things go in: strings, read-only arrays, tuples. Widgets and Bokeh models are
never shared; a session copies plot data into its own sources.

Entries whose size varies a thousandfold with the settings (a trace at d = 8 or at d = 512) are also bounded by
weight: with `weigh`, the least recently used go until the entries weigh at most `limit` together (the newest
stays, whatever it weighs).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["SharedCache"]

V = TypeVar("V")


class SharedCache(Generic[V]):
    """Least recently used entries beyond `size` (or beyond `limit` in weight) are dropped; safe to call from
    several threads."""

    def __init__(self, size: int, limit: int | None = None, weigh: Callable[[V], int] | None = None):
        if (limit is None) != (weigh is None):
            raise ValueError("a weight limit needs a way to weigh an entry, and the other way round")
        self.size = size
        self.limit = limit
        self._weigh = weigh
        self._entries: OrderedDict[Hashable, V] = OrderedDict()
        self._weights: dict[Hashable, int] = {}
        self.weight = 0  # of every entry held, with `weigh`
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, compute: Callable[[], V]) -> V:
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                self.hits += 1
                return self._entries[key]
        value = compute()  # outside the lock: two threads may both compute a new key, with the same result
        weight = self._weigh(value) if self._weigh is not None else 0
        with self._lock:
            self.misses += 1
            self._entries[key] = value
            self._entries.move_to_end(key)
            self.weight += weight - self._weights.get(key, 0)
            self._weights[key] = weight
            while len(self._entries) > self.size or (
                    self.limit is not None and self.weight > self.limit and len(self._entries) > 1):
                dropped, _ = self._entries.popitem(last=False)
                self.weight -= self._weights.pop(dropped)
        return value

    def peek(self, key: Hashable) -> V | None:
        """The value held for `key` (now the most recently used), or None; never computes."""
        with self._lock:
            if key not in self._entries:
                return None
            self._entries.move_to_end(key)
            return self._entries[key]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._weights.clear()
            self.hits = self.misses = self.weight = 0

    def __len__(self) -> int:
        return len(self._entries)
