"""Token buckets per client address, in a table of bounded size that every worker process shares.

    buckets = TokenBuckets(capacity=120, per_second=0.5)
    if not buckets.allow(client_key(request.remote_ip)):
        ...  # refuse, or serve without the costly part

Each address may spend `capacity` at once and gets `per_second` back over time. The table holds at most
`max_keys` addresses (the `limit_table_keys` setting), in a fixed block of memory (SharedTable): a client
inventing addresses cannot make it grow; when the few slots an address may use are taken, the one seen
longest ago is given up, and an address given up starts again with a full bucket, the generous side to err on.

A client is counted by `client_key(address)`: an IPv4 address as itself, an IPv6 one by its /64 (the
network one home or school is given, where a laptop picks a new address at will).

The block is an anonymous shared mapping made when the table is made, with a lock every process shares:
made before `--num-procs` forks its workers (`blocktrace serve` makes every table before `pn.serve`), one
client's budget is the same whichever worker its requests reach, instead of one budget per worker. The lock
is waited for at most `limit_lock_timeout` seconds: a worker killed while holding it would otherwise stop
every worker for good, so past that the request is let through (counted as a client seen for the first
time), and the log says so, once for each table.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import mmap
import multiprocessing
import struct
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from blocktrace.app.settings import settings

__all__ = ["SharedCounts", "SharedTable", "TokenBuckets", "client_key"]

log = logging.getLogger(__name__)
PROBES = 8  # slots a key may use: its own and the next ones


def client_key(address: str) -> str:
    """The key a client is counted by: an IPv4 address itself (also when written as IPv4-mapped IPv6), an IPv6
    address its /64 network, anything else (not an address) as it is."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if ip.version == 6:
        if ip.ipv4_mapped is not None:  # ::ffff:a.b.c.d is the IPv4 client a.b.c.d
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def _process_shared_lock() -> Any:
    """A lock that holds across fork(): a POSIX semaphore, unlinked at once (no resource tracker needed)."""
    if sys.platform == "win32":  # no fork: the workers of --num-procs do not exist there
        return threading.Lock()
    return multiprocessing.get_context("fork").Lock()


class SharedTable:
    """Two numbers per key for up to `max_keys` keys, in memory shared with processes forked after it was made."""

    SLOT = struct.Struct("<Qdd")  # the key's 64-bit hash (0: an empty slot), then its two numbers

    def __init__(self, max_keys: int | None = None, lock_timeout: float | None = None) -> None:
        max_keys = settings().limit_table_keys if max_keys is None else max_keys
        if max_keys < 1:
            raise ValueError("max_keys >= 1")
        self.max_keys = max_keys
        self.lock_timeout = settings().limit_lock_timeout if lock_timeout is None else lock_timeout
        self._memory = mmap.mmap(-1, self.SLOT.size * max_keys)  # anonymous: shared with forked children
        self._lock = _process_shared_lock()
        self._lock_stuck = False  # the last wait for the lock ran out: the next request does not wait again
        self._lock_lost_logged = False  # by this process

    @staticmethod
    def _hash(key: str) -> int:
        return int.from_bytes(hashlib.blake2b(key.encode("utf-8", "replace"), digest_size=8).digest(), "little") or 1

    def update(self, key: str,
               change: Callable[[tuple[float, float] | None], tuple[tuple[float, float] | None, Any]]) -> Any:
        """Under the shared lock: `change(the key's numbers, or None)` gives (the new numbers, or None to drop the
        key; a result), and the result is returned. A new key takes a free slot of its PROBES, else the one
        whose second number (the time it was last used) is least. If the lock cannot be had within
        `lock_timeout`, the result is `change(None)`'s, and nothing is stored."""
        wanted = self._hash(key)
        size, memory = self.SLOT.size, self._memory
        first = wanted % self.max_keys
        if not self._acquire():
            return change(None)[1]
        try:
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
        finally:
            self._lock.release()

    def __len__(self) -> int:
        """Keys held now (read without the lock if it cannot be had)."""
        locked = self._acquire()
        try:
            return sum(1 for (stored, _a, _b) in self.SLOT.iter_unpack(self._memory) if stored)
        finally:
            if locked:
                self._lock.release()

    def _acquire(self) -> bool:
        """Take the lock, waiting at most `lock_timeout`; not at all while it stayed locked last time (a lock
        whose holder was killed is never released, and no request should wait for it again)."""
        if self._lock.acquire(timeout=0 if self._lock_stuck else self.lock_timeout):
            self._lock_stuck = False
            return True
        self._lock_stuck = True
        self._lock_lost()
        return False

    def _lock_lost(self) -> None:
        if not self._lock_lost_logged:
            self._lock_lost_logged = True
            log.warning("a per-client limit table stayed locked (a worker killed while holding it?): its requests "
                        "are let through uncounted while it stays so; restart the server to count them again")


class TokenBuckets:
    def __init__(self, capacity: float, per_second: float, max_keys: int | None = None,
                 clock: Callable[[], float] = time.monotonic, lock_timeout: float | None = None):
        max_keys = settings().limit_table_keys if max_keys is None else max_keys
        if capacity < 1 or per_second <= 0 or max_keys < 1:
            raise ValueError("capacity >= 1, per_second > 0 and max_keys >= 1")
        self.capacity, self.per_second, self.max_keys, self.clock = capacity, per_second, max_keys, clock
        self._table = SharedTable(max_keys, lock_timeout)

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

    def __init__(self, max_keys: int | None = None, clock: Callable[[], float] = time.monotonic,
                 lock_timeout: float | None = None):
        self._table, self.clock = SharedTable(max_keys, lock_timeout), clock

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

