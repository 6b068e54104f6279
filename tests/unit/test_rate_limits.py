"""app/server/rate_limits.py: the key a client is counted by, and a shared lock a dead worker cannot keep."""

from __future__ import annotations

import logging
import os
import signal
import warnings

import pytest

from blocktrace.app.server.rate_limits import SharedCounts, TokenBuckets, client_key
from blocktrace.app.settings import overridden


@pytest.mark.parametrize(("address", "key"), [
    ("192.0.2.7", "192.0.2.7"),
    ("::ffff:192.0.2.7", "192.0.2.7"),
    ("2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::/64"),
    ("2001:db8:1:2::9", "2001:db8:1:2::/64"),
    ("2001:db8:1:3::9", "2001:db8:1:3::/64"),
    ("unknown", "unknown"),
    ("?", "?"),
])
def test_client_key_counts_ipv4_as_itself_and_ipv6_by_its_64(address: str, key: str) -> None:
    """An IPv4 client (also written IPv4-mapped) is its address, an IPv6 one its /64, anything else itself."""
    assert client_key(address) == key


def test_two_addresses_of_one_64_spend_one_bucket() -> None:
    """A laptop that picks a new IPv6 address within its /64 still spends the same budget; another /64 does not."""
    buckets = TokenBuckets(capacity=2, per_second=1e-6)
    spent = [buckets.allow(client_key(address)) for address in ("2001:db8:1:2::1", "2001:db8:1:2::2",
                                                                 "2001:db8:1:2:ffff::3")]
    assert spent == [True, True, False]
    assert buckets.allow(client_key("2001:db8:1:3::1"))


def test_the_tables_take_their_size_and_lock_timeout_from_the_settings() -> None:
    """A table made without numbers holds `limit_table_keys` keys and waits `limit_lock_timeout` for its lock."""
    with overridden(limit_table_keys=3, limit_lock_timeout=0.25):
        buckets, counts = TokenBuckets(capacity=1, per_second=1.0), SharedCounts()
    for key in "abcdef":
        buckets.allow(key)
        counts.add(key, 1)
    assert len(buckets) == 3 and len(counts) == 3
    assert buckets._table.lock_timeout == 0.25 == counts._table.lock_timeout


@pytest.mark.timeout(120)  # without the lock's timeout, allow() below waits for ever
def test_a_worker_killed_holding_the_lock_does_not_stop_the_others(caplog) -> None:
    """A worker killed inside the shared lock leaves it taken for good: the other workers still answer every
    request (letting it through, the generous side) and say so in the log once."""
    buckets = TokenBuckets(capacity=1, per_second=1e-6, lock_timeout=0.05)
    assert buckets.allow("192.0.2.7") and not buckets.allow("192.0.2.7")  # spent, while the lock is free
    ready, told = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12+ warns about fork with threads
        child = os.fork()
    if child == 0:  # a worker that takes the lock and is killed before it lets go
        try:
            buckets._table._lock.acquire()
            os.write(told, b"1")
            while True:
                signal.pause()
        finally:
            os._exit(1)
    os.close(told)
    assert os.read(ready, 1) == b"1"  # the child holds the lock now
    os.close(ready)
    os.kill(child, signal.SIGKILL)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == -signal.SIGKILL
    with caplog.at_level(logging.WARNING, logger="blocktrace.app.server.rate_limits"):
        assert buckets.allow("192.0.2.7") and buckets.allow("192.0.2.7")
        assert buckets.wait("192.0.2.8") == 0.0
    warned = [r for r in caplog.records if r.name == "blocktrace.app.server.rate_limits"]
    assert len(warned) == 1 and "locked" in warned[0].getMessage()


class _RecordingLock:
    """A lock that is free or not as the test says, and records how long each caller offered to wait."""

    def __init__(self) -> None:
        self.free, self.waits = False, []

    def acquire(self, timeout: float) -> bool:
        self.waits.append(timeout)
        return self.free

    def release(self) -> None:
        pass


def test_once_the_lock_stayed_taken_no_request_waits_for_it_again_until_it_is_free() -> None:
    """A lock whose holder was killed is never released: after one wait runs out, requests take it only if it is
    free at once (no 0.1 s on every page request for the rest of the server's life); once taken, waits resume."""
    buckets = TokenBuckets(capacity=1, per_second=1e-6, lock_timeout=0.05)
    lock = buckets._table._lock = _RecordingLock()
    assert buckets.allow("192.0.2.7") and buckets.allow("192.0.2.7") and buckets.allow("192.0.2.7")
    assert lock.waits == [0.05, 0, 0]
    lock.free = True
    assert buckets.allow("192.0.2.7") and not buckets.allow("192.0.2.7")  # counted again
    assert lock.waits == [0.05, 0, 0, 0, 0.05]
