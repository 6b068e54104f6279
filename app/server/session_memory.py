"""Memory of closed sessions comes back without the event loop stopping while students work.

Every student's session holds about 15,000 objects the cycle collector tracks (Panel widgets, Bokeh
models, param watchers, all in reference cycles). Python's full collection walks every tracked
object: 117 ms for the start-up heap alone, 1.4 s with 100 block-trace pages (benchmarks/session_gc.py),
2.3-2.6 s in a server with 100 students (benchmarks/classroom.py --reopen 30). So:

- **Live sessions are kept out of the collector's walk.** Once a page is built, and again once it
  has loaded in the browser (its figures are built then), the young generations are collected and
  every surviving object is frozen (`gc.freeze()`); a collection after that walks only what was
  made since. Everything is frozen again every FREEZE_SECONDS too, so the walk stays short: Bokeh
  runs a full `gc.collect()` for each session it discards (`Document.destroy`), and on a heap
  left unfrozen that is a whole-heap walk per closed tab (1.4 s each with 100 pages, all of one
  Bokeh clean-up pass in one go; 2 ms each on the frozen heap).
- **Closed sessions' memory is reclaimed when the class is quiet.** Frozen objects are never
  collected, and CPython (3.11-3.13) cannot collect part of the frozen heap: the only way is to
  thaw everything, run one full collection and freeze again (`Reclaimer.reclaim`), a pause as
  long as the whole heap's walk. That cannot be cut into steps, so it is put where no student
  waits on it: once no browser has changed anything in any session for QUIET_SECONDS. Only if the
  class is never quiet and closed sessions pile up (as many as are open, and at least
  FORCE_AFTER_CLOSED) does it run anyway, and says so.
- The young generation is collected every YOUNG_THRESHOLD allocations instead of 700, so the
  short-lived cycles of one update die young instead of being promoted.
- Any collection that holds the server longer than LONG_COLLECTION_MS is logged, so a pause the
  collector causes can be told from other work (`benchmarks/classroom.py --reopen` lists them).

Nothing here touches Panel's, Bokeh's or Tornado's internals (the `gc` module, `Document.on_change`,
`Document.on_session_destroyed`, Panel's `onload` and Tornado's `PeriodicCallback`), so it runs with
and without `--no-tuning`. It starts in the serving process with its first served page.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger("blocktrace.gc")

YOUNG_THRESHOLD = 20_000  # allocations between young collections (Python's default: 700)
CHECK_SECONDS = 1.0  # how often the reclaimer looks at closed sessions and the class's activity
FREEZE_SECONDS = 5.0  # everything made since is frozen this often (a young collection first)
QUIET_SECONDS = 10.0  # no browser changed anything for this long: the class is quiet
LONG_COLLECTION_MS = 100.0  # any collection longer than this is logged (the reclaim logs itself)
MIN_GAP_SECONDS = 60.0  # at most one reclaim per this long, even in a quiet class
FORCE_AFTER_CLOSED = 50  # reclaim even in a busy class once this many sessions closed ...
FORCE_SHARE = 1.0  # ... and at least this share of the sessions still open


@dataclass
class Reclaimer:
    """Decides when the frozen memory of closed sessions is reclaimed, and reclaims it."""

    clock: Callable[[], float] = time.monotonic
    open_sessions: int = 0
    closed_since: int = 0  # sessions closed since the last reclaim
    last_change: float = float("-inf")  # when a browser last changed something, on `clock`
    last_reclaim: float = float("-inf")
    reclaims: list[tuple[str, float]] = field(default_factory=list)  # (why, milliseconds)

    def session_opened(self) -> None:
        self.open_sessions += 1

    def session_closed(self) -> None:
        self.open_sessions = max(0, self.open_sessions - 1)
        self.closed_since += 1

    def browser_changed(self) -> None:
        self.last_change = self.clock()

    def due(self) -> str | None:
        """Why a reclaim should run now ("quiet", "closed sessions piling up"), or None."""
        if self.closed_since == 0:
            return None
        now = self.clock()
        if self.closed_since >= max(FORCE_AFTER_CLOSED, FORCE_SHARE * self.open_sessions):
            return "closed sessions piling up"
        if now - self.last_change >= QUIET_SECONDS and now - self.last_reclaim >= MIN_GAP_SECONDS:
            return "quiet"
        return None

    def reclaim_if_due(self) -> bool:
        why = self.due()
        if why is None:
            return False
        self.reclaim(why)
        return True

    def reclaim(self, why: str) -> None:
        """Thaw everything, collect it once, freeze the survivors again: the one long pause, logged."""
        closed = self.closed_since
        started, cpu = time.perf_counter(), time.thread_time()
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        took, took_cpu = 1000 * (time.perf_counter() - started), 1000 * (time.thread_time() - cpu)
        self.reclaims.append((why, took))
        self.closed_since, self.last_reclaim = 0, self.clock()
        log.info("memory of %d closed sessions reclaimed in %.0f ms (%.0f ms of CPU; %s, %d open)",
                 closed, took, took_cpu, why, self.open_sessions)


@dataclass
class CollectionTimer:
    """A `gc.callbacks` hook: one log line for each collection that held the server longer than LONG_COLLECTION_MS."""

    clock: Callable[[], float] = time.perf_counter
    started: float = 0.0
    longest_ms: float = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self.started = self.clock()
            return
        took = 1000 * (self.clock() - self.started)
        self.longest_ms = max(self.longest_ms, took)
        if took >= LONG_COLLECTION_MS:
            log.info("a generation-%d collection paused the server %.0f ms", info.get("generation", -1), took)


def freeze_young() -> None:
    """Collect the young generations, then move every surviving object out of the collector's sight."""
    gc.collect(1)
    gc.freeze()


reclaimer = Reclaimer()
_started = False


def track_page() -> None:
    """Call while building each page: in a session of the running server, take part in the above.

    The page is frozen on the next tick (after it is built) and again after everything its onload
    builds: onload callbacks run in the order they were registered and each schedules its work on
    the next tick, so the last one registered runs after the page's own (the figures).
    """
    import panel as pn

    from blocktrace.app.server.session_setup import for_a_browser

    doc = pn.state.curdoc
    if doc is None or not for_a_browser(doc.session_context):
        return  # Panel's start-up warm-up, a test's document, a notebook
    start()
    reclaimer.session_opened()
    doc.on_session_destroyed(lambda _context: reclaimer.session_closed())
    doc.on_change(_browser_changed)
    doc.add_next_tick_callback(freeze_young)
    pn.state.onload(lambda: pn.state.execute(freeze_young, schedule=True))


def _browser_changed(event) -> None:
    if getattr(event, "setter", None) is not None:  # the server's own changes have no setter
        reclaimer.browser_changed()


def start() -> None:
    """In the serving process, once: thresholds, the start-up heap frozen, the periodic checks."""
    global _started
    if _started:
        return
    _started = True
    from tornado.ioloop import PeriodicCallback

    gc.set_threshold(YOUNG_THRESHOLD, 10, 10)
    gc.callbacks.append(CollectionTimer())
    freeze_young()  # the start-up heap: imports and Panel's warm-up, never garbage
    PeriodicCallback(reclaimer.reclaim_if_due, CHECK_SECONDS * 1000).start()
    PeriodicCallback(freeze_young, FREEZE_SECONDS * 1000).start()
