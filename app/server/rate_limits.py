"""Token buckets per client address, in a table of bounded size.

    buckets = TokenBuckets(capacity=120, per_second=0.5)
    if not buckets.allow(request.remote_ip):
        ...  # refuse, or serve without the costly part

Each address may spend `capacity` at once and gets `per_second` back over time. The table keeps at most
`max_keys` addresses (the least recently seen go first), so a client inventing addresses cannot make it
grow; an evicted address starts again with a full bucket, which is the generous side to err on.
One table per server process: with --num-procs each worker counts on its own.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

MAX_KEYS = 10_000


class TokenBuckets:
    def __init__(self, capacity: float, per_second: float, max_keys: int = MAX_KEYS,
                 clock: Callable[[], float] = time.monotonic):
        if capacity < 1 or per_second <= 0 or max_keys < 1:
            raise ValueError("capacity >= 1, per_second > 0 and max_keys >= 1")
        self.capacity, self.per_second, self.max_keys, self.clock = capacity, per_second, max_keys, clock
        self._table: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key -> (tokens, when)
        self._lock = threading.Lock()

    def allow(self, key: str, cost: float = 1.0) -> bool:
        """Spend `cost` from `key`'s bucket if it holds that much; False (nothing spent) if not."""
        now = self.clock()
        with self._lock:
            tokens, when = self._table.pop(key, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - when) * self.per_second)
            allowed = tokens >= cost
            if allowed:
                tokens -= cost
            self._table[key] = (tokens, now)
            while len(self._table) > self.max_keys:
                self._table.popitem(last=False)
            return allowed

    def __len__(self) -> int:
        return len(self._table)
