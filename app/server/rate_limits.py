"""Token buckets per client address, in a table of bounded size that every worker process shares.

    buckets = TokenBuckets(capacity=120, per_second=0.5)
    if not buckets.allow(request.remote_ip):
        ...  # refuse, or serve without the costly part

Each address may spend `capacity` at once and gets `per_second` back over time. The table holds at most
`max_keys` addresses, in a fixed block of memory (SharedTable): a client inventing addresses cannot make
it grow; when the few slots an address may use are taken, the one seen longest ago is given up, and an
address given up starts again with a full bucket, the generous side to err on.

The block is an anonymous shared mapping made when the table is made, before `--num-procs` forks its
workers, with a lock every process shares: one client's budget is the same whichever worker its requests
reach, instead of one budget per worker.
"""

from __future__ import annotations

import hashlib
import mmap
import multiprocessing
import struct
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

MAX_KEYS = 10_000
PROBES = 8  # slots a key may use: its own and the next ones


def _process_shared_lock() -> Any:
    """A lock that holds across fork(): a POSIX semaphore, unlinked at once (no resource tracker needed)."""
    if sys.platform == "win32":  # no fork: the workers of --num-procs do not exist there
        return threading.Lock()
    return multiprocessing.get_context("fork").Lock()


class SharedTable:
    """Two numbers per key for up to `max_keys` keys, in memory shared with processes forked after it was made."""

    SLOT = struct.Struct("<Qdd")  # the key's 64-bit hash (0: an empty slot), then its two numbers

    def __init__(self, max_keys: int = MAX_KEYS) -> None:
        if max_keys < 1:
            raise ValueError("max_keys >= 1")
        self.max_keys = max_keys
        self._memory = mmap.mmap(-1, self.SLOT.size * max_keys)  # anonymous: shared with forked children
        self._lock = _process_shared_lock()

    @staticmethod
    def _hash(key: str) -> int:
        return int.from_bytes(hashlib.blake2b(key.encode("utf-8", "replace"), digest_size=8).digest(), "little") or 1

    def update(self, key: str,
               change: Callable[[tuple[float, float] | None], tuple[tuple[float, float] | None, Any]]) -> Any:
        """Under the shared lock: `change(the key's numbers, or None)` gives (the new numbers, or None to drop the
        key; a result), and the result is returned. A new key takes a free slot of its PROBES, else the one
        whose second number (the time it was last used) is least."""
        wanted = self._hash(key)
        size, memory = self.SLOT.size, self._memory
        first = wanted % self.max_keys
        with self._lock:
            found = free = oldest = None
            oldest_used = float("inf")
            for step in range(min(PROBES, self.max_keys)):
                slot = (first + step) % self.max_keys
                stored, _number, used = self.SLOT.unpack_from(memory, slot * size)
                if stored == wanted:
                    found = slot
                    break
                if stored == 0:
                    if free is None:
                        free = slot
                elif used < oldest_used:
                    oldest, oldest_used = slot, used
            values, result = change(None if found is None else self.SLOT.unpack_from(memory, found * size)[1:])
            slot = found if found is not None else (free if free is not None else oldest)
            if values is not None:
                self.SLOT.pack_into(memory, slot * size, wanted, *values)
            elif found is not None:
                self.SLOT.pack_into(memory, found * size, 0, 0.0, 0.0)
            return result

    def __len__(self) -> int:
        """Keys held now."""
        with self._lock:
            return sum(1 for (stored, _a, _b) in self.SLOT.iter_unpack(self._memory) if stored)


class TokenBuckets:
    def __init__(self, capacity: float, per_second: float, max_keys: int = MAX_KEYS,
                 clock: Callable[[], float] = time.monotonic):
        if capacity < 1 or per_second <= 0 or max_keys < 1:
            raise ValueError("capacity >= 1, per_second > 0 and max_keys >= 1")
        self.capacity, self.per_second, self.max_keys, self.clock = capacity, per_second, max_keys, clock
        self._table = SharedTable(max_keys)

    def wait(self, key: str, cost: float = 1.0) -> float:
        """Spend `cost` from `key`'s bucket if it holds that much and return 0; else spend nothing and return
        the seconds until it will."""
        now = self.clock()  # CLOCK_MONOTONIC: the same clock in every process of the machine

        def spend(values: tuple[float, float] | None) -> tuple[tuple[float, float], float]:
            tokens, when = values if values is not None else (self.capacity, now)
            tokens = min(self.capacity, tokens + max(0.0, now - when) * self.per_second)
            if tokens >= cost:
                return (tokens - cost, now), 0.0
            return (tokens, now), (cost - tokens) / self.per_second

        return self._table.update(key, spend)

    def allow(self, key: str, cost: float = 1.0) -> bool:
        """Spend `cost` from `key`'s bucket if it holds that much; False (nothing spent) if not."""
        return self.wait(key, cost) == 0.0

    def __len__(self) -> int:
        return len(self._table)


class SharedCounts:
    """A count per key (of things under way: pages built and not yet loaded), shared like TokenBuckets."""

    def __init__(self, max_keys: int = MAX_KEYS, clock: Callable[[], float] = time.monotonic):
        self._table, self.clock = SharedTable(max_keys), clock

    def add(self, key: str, by: int) -> int:
        """Add `by` (which may be negative) to `key`'s count and return the count before; a count of 0 or less
        drops the key."""
        now = self.clock()

        def change(values: tuple[float, float] | None) -> tuple[tuple[float, float] | None, int]:
            before = int(values[0]) if values is not None else 0
            after = before + by
            return ((float(after), now) if after > 0 else None), before

        return self._table.update(key, change)

    def get(self, key: str) -> int:
        return self._table.update(key, lambda values: (values, int(values[0]) if values is not None else 0))

    def __len__(self) -> int:
        """Keys with a count now."""
        return len(self._table)
