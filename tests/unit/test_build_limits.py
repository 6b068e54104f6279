"""Page builds per address: a few built at once, the rest once their browser is there, a flood refused."""

from __future__ import annotations

from blocktrace.app.server.build_limits import Build, BuildLimits, limited, loopback
from blocktrace.app.settings import overridden


def test_builds_wait_for_their_browser_once_an_address_has_pending_ones() -> None:
    """Beyond `pending_eager` sessions not yet loaded, a page's content waits; a loaded page frees a place."""
    limits = BuildLimits(pending_eager=2, builds=(100, 1.0))
    assert [limits.decide("10.0.0.1") for _ in range(4)] == [Build.NOW, Build.NOW, Build.WHEN_LOADED,
                                                             Build.WHEN_LOADED]
    assert limits.decide("10.0.0.2") is Build.NOW  # another address is counted apart
    for _ in range(3):
        limits.loaded("10.0.0.1")
    assert limits.decide("10.0.0.1") is Build.NOW
    for _ in range(5):
        limits.loaded("10.0.0.1")  # more than were pending: the count stays at zero, the entry goes
    assert limits.pending.get("10.0.0.1") == 0 and len(limits.pending) == 1  # 10.0.0.2's alone


def test_a_class_behind_one_address_gets_its_burst_then_builds_are_refused() -> None:
    """A hundred pages at once from one NAT address are all built (most when loaded); beyond the burst, refused."""
    limits = BuildLimits(pending_eager=2, builds=(150, 0.001))
    decisions = [limits.decide("192.0.2.7") for _ in range(150)]
    assert Build.REFUSED not in decisions
    assert limits.decide("192.0.2.7") is Build.REFUSED
    assert limits.pending.get("192.0.2.7") == 150  # a refused request is not counted as pending


def test_a_school_behind_one_address_gets_its_pages_with_the_default_settings() -> None:
    """600 pages at once from one address are all built (most once loaded) under the default `page_builds`."""
    limits = BuildLimits()
    assert Build.REFUSED not in [limits.decide("198.51.100.7") for _ in range(600)]


def test_outside_a_served_page_the_content_is_built_at_once() -> None:
    """A page built in a test or at Panel's warm-up (no request) is its content, built now and never limited."""
    limits = BuildLimits(pending_eager=0, builds=(1, 0.001))
    made = []
    assert limited(lambda: made.append(1) or "content", limits) == "content"
    assert made == [1] and len(limits.pending) == 0


def test_loopback_is_this_machine() -> None:
    """The teacher's own browser and the test suite come from loopback; classroom laptops do not."""
    assert loopback("127.0.0.1") and loopback("::1")
    assert not loopback("192.168.1.23") and not loopback("unknown")


def test_ipv6_clients_are_counted_by_their_64() -> None:
    """Page builds of two addresses in one /64 come out of one bucket and one pending count; another /64's do not."""
    limits = BuildLimits(pending_eager=1, builds=(2, 0.001))
    assert limits.decide("2001:db8:1:2::1") is Build.NOW
    assert limits.decide("2001:db8:1:2::2") is Build.WHEN_LOADED  # the first is still pending
    assert limits.decide("2001:db8:1:2:ffff::3") is Build.REFUSED  # the /64's burst of two is spent
    assert limits.decide("2001:db8:1:3::1") is Build.NOW
    limits.loaded("2001:db8:1:2::2")
    assert limits.pending.get("2001:db8:1:2::/64") == 1


def test_limits_made_without_numbers_take_the_settings() -> None:
    """`pending_eager` and `page_builds` come from the settings when a BuildLimits is made without them."""
    with overridden(pending_eager=0, page_builds=(1.0, 0.001)):
        limits = BuildLimits()
    assert [limits.decide("192.0.2.7") for _ in range(2)] == [Build.WHEN_LOADED, Build.REFUSED]
