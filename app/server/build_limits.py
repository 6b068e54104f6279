"""How much building one client's page requests may make the server do.

Every page request builds a session. A class behind one NAT shares one address, so a limit per address
must let a hundred pages arrive at once; yet ten requests of a heavy page from one script, answered in
milliseconds each, used to cost the server seconds of building that every other student waited out.
Two measures, per client (`client_key` of the request's `remote_ip`, which is the balancer's X-Forwarded-For
only when the server trusts it: an IPv4 address, or an IPv6 /64):

- **Built when the browser is there** (the `pending_eager` setting): while an address has that many sessions built
  whose browser has not yet loaded the page (Panel's onload), a further page is sent as its frame and a
  place, and its content (the explorable, the learner bar) is built only once its browser has loaded
  it. A request that never opens the page's websocket costs a frame. A class arriving together gets its
  pages all the same, a moment later for most of them.
- **A bucket of builds** (the `page_builds` setting): a burst of 1,000 pages per address (a school behind one
  router), then four a second. Beyond it the page is one short notice, built in microseconds, asking to reload
  in a minute.

Requests from this machine itself (loopback: the teacher's own browser, the test suite) are not limited;
behind a balancer on the same machine the server must be told to trust its forwarding header
(`--use-xheaders`), as deploy/ does, or every student would count as loopback.

Bokeh discards sessions whose browser never connects after `unused_session_lifetime` (15 s by default);
a pending count goes down when its page loads or its session is discarded. Both tables are shared by
the worker processes of `--num-procs` (rate_limits.SharedTable): a client has one budget, not one per
worker. `blocktrace serve` makes them (`share_build_limits()`) before it forks the workers; under another
server (plain `panel serve`) the first page of each process does.
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Callable
from enum import Enum

import panel as pn

from blocktrace.app.server.rate_limits import SharedCounts, TokenBuckets, client_key
from blocktrace.app.settings import settings
from blocktrace.explorables.components.build_turns import in_turn
from blocktrace.explorables.components.figures import DrawnAfterLoad
from blocktrace.explorables.components.style import styled
from blocktrace.explorables.components.updates import batched

__all__ = ["Build", "BuildLimits", "limited", "loopback", "share_build_limits"]

REFUSED_HTML = ('<p class="bt-notice" role="alert">Too many pages were opened from your network in the last '
                "minute. Wait a moment, then reload this page.</p>")
WAITING_CSS = (f":host(.{DrawnAfterLoad.PENDING})::before {{ content: 'Loading…'; margin: 1rem auto; "
               "font-size: 0.9rem; color: var(--panel-on-background-color, #212529); opacity: 0.75; }")


class Build(Enum):
    NOW = "now"  # build the page's content with the session, as always
    WHEN_LOADED = "when loaded"  # build it once the browser has loaded the page
    REFUSED = "refused"  # this address has built too many pages just now


class BuildLimits:
    """Per-client counts of page builds (a token bucket) and of sessions not yet loaded; numbers not given are
    the settings' (`pending_eager`, `page_builds`)."""

    def __init__(self, pending_eager: int | None = None, builds: tuple[float, float] | None = None):
        self.pending_eager = settings().pending_eager if pending_eager is None else pending_eager
        self.buckets = TokenBuckets(*(settings().page_builds if builds is None else builds))
        self.pending = SharedCounts()  # shared by every worker process, like the buckets

    def decide(self, address: str) -> Build:
        """What a page request from `address` gets; counts it as pending unless refused."""
        key = client_key(address)
        if not self.buckets.allow(key):
            return Build.REFUSED
        waiting = self.pending.add(key, 1)
        return Build.NOW if waiting < self.pending_eager else Build.WHEN_LOADED

    def loaded(self, address: str) -> None:
        """A page of `address` has loaded, or its session was discarded before it did."""
        self.pending.add(client_key(address), -1)


_shared: BuildLimits | None = None


def share_build_limits(limits: BuildLimits | None = None) -> BuildLimits:
    """Make (or set) the limits every page of this process counts in; called before the workers are forked,
    they share its tables."""
    global _shared
    _shared = BuildLimits() if limits is None else limits
    return _shared


def client_address() -> str | None:
    """The address of the browser this session is being built for; None outside a served page request
    (Panel's warm-up at start, a test building a page directly)."""
    doc = pn.state.curdoc
    context = getattr(doc, "session_context", None)
    if context is None or getattr(context, "server_context", None) is None:
        return None
    request = getattr(context, "request", None)
    if request is None:
        return None
    return getattr(request, "remote_ip", None) or "unknown"


def loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def limited(build: Callable[[], pn.viewable.Viewable], limits: BuildLimits | None = None) -> pn.viewable.Viewable:
    """The page content `build()` makes, now, once the browser has loaded the page, or a refusal; counted in
    `limits`, by default the shared ones (made now if `share_build_limits` was not called)."""
    address = client_address()
    if address is None or loopback(address):
        return build()
    if limits is None:
        limits = _shared if _shared is not None else share_build_limits()
    decision = limits.decide(address)
    if decision is Build.REFUSED:
        return pn.pane.HTML(REFUSED_HTML, **styled(sizing_mode="stretch_width"))
    done = threading.Event()  # counted down once: loaded or discarded, whichever comes first

    def count_down() -> None:
        if not done.is_set():
            done.set()
            limits.loaded(address)

    def discarded(session_context) -> None:  # Bokeh calls it with the session's context
        count_down()

    pn.state.on_session_destroyed(discarded)
    pn.state.onload(count_down)
    if decision is Build.NOW:
        return build()
    place = pn.Column(sizing_mode="stretch_width", min_height=400, css_classes=[DrawnAfterLoad.PENDING],
                      stylesheets=[WAITING_CSS])

    @batched
    def fill() -> None:
        place.param.update(objects=[build()], css_classes=[], min_height=None)

    pn.state.onload(lambda: in_turn(fill))  # one build step of the server's queue (build_turns.py)
    return place
