"""Keep Python's cycle collector from pausing the server while a class is exploring.

Every student's session holds a few megabytes of long-lived objects (Panel widgets, Bokeh models,
param watchers). Python's full ("oldest generation") collection walks all of them, so with 60
students one collection stopped the server for 0.3-0.7 s, and with the default thresholds it ran
every few seconds while students moved sliders: it was most of the classroom benchmark's p95.

What this module does, once `install()` has run in the serving process:

- once a session's page is built, its objects are moved out of the collector's sight
  (`gc.freeze()`, after a young-generation collection so fresh garbage is not frozen with them);
  later collections walk only objects made since, which is little. A page's figures are built
  after it loads (DrawnAfterLoad), so each page is frozen again then (`freeze_after_load`): left
  in the old generation, 100 students' figures had made each full collection a 100-150 ms pause;
- the young generation is collected less often (every YOUNG_THRESHOLD allocations instead of
  700), so the short-lived cycles of one update die young instead of being promoted;
- frozen objects of closed sessions are not collected while frozen, so from time to time, once
  enough sessions have closed, everything is thawed, collected once and frozen again
  (`Reclaimer`); that one full collection is the only long pause left, and it is logged.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger("blocktrace.gc")

YOUNG_THRESHOLD = 20_000  # allocations between young collections (Python's default: 700)
CHECK_SECONDS = 30.0  # how often the reclaimer looks at closed sessions
RECLAIM_AFTER_CLOSED = 10  # closed sessions worth a full collection ...
RECLAIM_SHARE = 0.25  # ... or this share of the sessions still open, whichever is more
RECLAIM_MAX_WAIT_S = 20 * 60.0  # at most this long between a session closing and its memory returning


@dataclass
class Reclaimer:
    """Decides when frozen memory of closed sessions is worth one full collection, and does it."""

    clock: Callable[[], float] = time.monotonic
    open_sessions: int = 0
    closed_since: int = 0  # sessions closed since the last reclaim
    first_closed_at: float | None = None
    reclaims: list[float] = field(default_factory=list)  # milliseconds each reclaim took

    def session_opened(self) -> None:
        self.open_sessions += 1

    def session_closed(self) -> None:
        self.open_sessions = max(0, self.open_sessions - 1)
        self.closed_since += 1
        if self.first_closed_at is None:
            self.first_closed_at = self.clock()

    def due(self) -> bool:
        if self.closed_since == 0:
            return False
        enough = max(RECLAIM_AFTER_CLOSED, RECLAIM_SHARE * self.open_sessions)
        waited = 0.0 if self.first_closed_at is None else self.clock() - self.first_closed_at
        return self.closed_since >= enough or waited >= RECLAIM_MAX_WAIT_S

    def reclaim_if_due(self) -> bool:
        if not self.due():
            return False
        closed = self.closed_since
        started = time.perf_counter()
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        took = 1000 * (time.perf_counter() - started)
        self.reclaims.append(took)
        self.closed_since, self.first_closed_at = 0, None
        log.info("memory of %d closed sessions reclaimed in %.0f ms", closed, took)
        return True


def freeze_young() -> None:
    """Collect the young generations, then move every surviving object out of the collector's sight."""
    gc.collect(1)
    gc.freeze()


def freeze_after_load() -> None:
    """In a served page of the installed server: freeze again after everything its onload builds.

    Call at the end of building a page: onload callbacks run in the order they were registered and
    each schedules its work on the next tick, so this runs after the page's own (the figures).
    """
    import panel as pn

    doc = pn.state.curdoc
    if not _installed or doc is None or doc.session_context is None:
        return
    pn.state.onload(lambda: pn.state.execute(freeze_young, schedule=True))


reclaimer = Reclaimer()
_installed = False


def apply() -> None:
    """Set the thresholds and hook session creation (before the server starts; idempotent)."""
    global _installed
    if _installed:
        return
    import panel as pn

    gc.set_threshold(YOUNG_THRESHOLD, 10, 10)
    pn.state.on_session_created(_session_created)
    _installed = True


def _session_created(session_context) -> None:
    doc = session_context._document
    reclaimer.session_opened()
    doc.on_session_destroyed(lambda _context: reclaimer.session_closed())
    doc.add_next_tick_callback(freeze_young)  # after the page is built
    _start_checks()


_checks = None


def _start_checks() -> None:
    global _checks
    if _checks is not None:
        return
    from tornado.ioloop import PeriodicCallback

    _checks = PeriodicCallback(reclaimer.reclaim_if_due, CHECK_SECONDS * 1000)
    _checks.start()
