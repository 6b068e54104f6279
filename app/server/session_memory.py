"""Memory of closed sessions comes back without the event loop stopping while students work.

Every student's page holds about 15,000 objects the cycle collector tracks (Panel widgets, Bokeh
models, param watchers, all in reference cycles). Python's full collection walks every tracked
object: 117 ms for the start-up heap alone, 1.4 s with 100 block-trace pages (benchmarks/session_gc.py),
2.3-2.6 s in a server with 100 students (benchmarks/classroom.py --reopen 30). So:

- **Live pages are kept out of the collector's walk.** Once a page is built, and again once it has
  loaded in the browser (its figures are built then), what was made since the last freeze is
  collected and every surviving object is frozen (`gc.freeze()`); a collection after that walks only
  what was made since. Everything is frozen again every `freeze_every` seconds too, so the walk stays short:
  Bokeh runs a full `gc.collect()` for each session it discards, and on a heap left unfrozen that is
  a whole-heap walk per closed tab (1.4 s each with 100 pages; 2 ms each on the frozen heap). A freeze
  waits (a little) for pages' next-tick callbacks to have run: one frozen while waiting would stay.
- **A closed page's own cycles are taken apart as it closes** (session_reclaim.py): a walk of what the
  page reaches (15,000 objects for the block trace, 40,000 for the decoder lab), in steps of the
  process's build queue (build_turns.py, behind every page build waiting) of at most 10,000 objects
  (20-30 ms), then one step that decides and takes apart (15-40 ms), instead of a walk of every
  student's objects. It starts from the page's outermost Panel object, its Document and every model
  and session callback it had when anything was frozen (`OpenPage`), and does not go into what every
  session shares (`shared_types`). For the walk to find a page unreferenced, nothing the server keeps
  after the page has closed may refer to it: the callbacks a page schedules on its Document call it
  weakly (weak_callbacks.py). Where
  session_reclaim.py's assumptions do not hold (an interpreter other than CPython 3.11-3.13 with the
  GIL), or with `BLOCKTRACE_SESSION_RECLAIM=0`, this step stands down (one log line says so) and the
  quiet-time reclaim below frees closed pages instead.
- **What that leaves is reclaimed when the class is quiet.** Frozen objects are never collected, and
  CPython (3.11-3.13) cannot collect part of the frozen heap: the only way is to thaw everything, run
  one full collection and freeze again (`Reclaimer.reclaim`), a pause as long as the whole heap's
  walk. It runs once no browser has changed anything in any session for `quiet_after` seconds, for pages the
  step above could not free (still held after `take_apart_tries` tries), or once `housekeeping_after` pages
  were freed by it (each leaves a few hundred objects: its emptied Document, which what Bokeh's server
  keeps of a session's callbacks still holds). If the class is never quiet and unfreed pages pile up
  (as many as are open, and at least `reclaim_forced_after`) it runs anyway, and says so.
- The young generation is collected every `young_collection_every` allocations instead of 700, so the
  short-lived cycles of one update die young instead of being promoted.
- Any collection that holds the server longer than `long_collection_ms` is logged, so a pause the
  collector causes can be told from other work (`benchmarks/classroom.py --reopen` lists them).
  GET /health/memory reports the open pages, the frozen objects and what was reclaimed each way.

Nothing here touches Panel's, Bokeh's or Tornado's internals (the `gc` module, public Document methods,
Panel's `onload` and Tornado's `PeriodicCallback`), so it runs with and without `--no-tuning`. It starts
in the serving process with its first served page.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import time
import weakref
from collections.abc import Callable
from contextvars import Context
from dataclasses import dataclass, field
from typing import Any

from bokeh.server.callbacks import NextTickCallback

from blocktrace.app.server import session_reclaim
from blocktrace.app.settings import settings
from blocktrace.explorables.components.build_turns import running_loop, serving_loop

__all__ = ["Reclaimer", "reclaimer"]

log = logging.getLogger(__name__)

# The numbers named `like_this` above are settings (app/settings.py, "Closed pages' memory"), read when used;
# these two are how a freeze waits for pages' callbacks, not something to tune.
SETTLE_TRIES = 50  # a freeze waits at most this many rounds for pages' next-tick callbacks to run ...
SETTLE_S = 0.01  # ... this long each


@dataclass
class Reclaimer:
    """Decides when the frozen memory of closed sessions is reclaimed, and reclaims it."""

    clock: Callable[[], float] = time.monotonic
    open_sessions: int = 0
    closed_since: int = 0  # closed sessions left behind (not freed by their own step) since the last reclaim
    last_change: float = float("-inf")  # when a browser last changed something, on `clock`
    last_reclaim: float = float("-inf")
    reclaims: list[tuple[str, float]] = field(default_factory=list)  # (why, milliseconds)
    taken_apart: list[session_reclaim.Reclaimed] = field(default_factory=list)  # each closed session's own step
    taken_apart_count: int = 0
    taken_apart_since: int = 0  # ... since the last full reclaim
    checks: int = 0  # periodic looks at whether a reclaim is due (each `memory_check_every`)

    def session_opened(self) -> None:
        self.open_sessions += 1

    def session_closed(self) -> None:
        self.open_sessions = max(0, self.open_sessions - 1)

    def left_behind(self) -> None:
        """A closed session its own step could not free: the full reclaim is for it."""
        self.closed_since += 1

    def session_taken_apart(self, outcome: session_reclaim.Reclaimed) -> None:
        """A closed session's memory came back in its own step."""
        self.taken_apart_count += 1
        self.taken_apart_since += 1
        self.taken_apart.append(outcome)
        del self.taken_apart[:max(0, len(self.taken_apart) - settings().reclaim_figures_kept)]

    def browser_changed(self) -> None:
        self.last_change = self.clock()

    def due(self) -> str | None:
        """Why a reclaim should run now ("quiet", "closed sessions piling up"), or None: for sessions whose own
        step could not free them, or, in a quiet class, for what every freed one leaves (see the module)."""
        now, numbers = self.clock(), settings()
        forced_at = max(numbers.reclaim_forced_after, numbers.reclaim_forced_share * self.open_sessions)
        if self.closed_since and self.closed_since >= forced_at:
            return "closed sessions piling up"
        quiet = now - self.last_change >= numbers.quiet_after and now - self.last_reclaim >= numbers.reclaim_gap
        if quiet and (self.closed_since or self.taken_apart_since >= numbers.housekeeping_after):
            return "quiet"
        return None

    def reclaim_if_due(self) -> bool:
        self.checks += 1
        why = self.due()
        if why is None:
            return False
        self.reclaim(why)
        return True

    def reclaim(self, why: str) -> None:
        """Thaw everything, collect it once, freeze the survivors again: the one long pause, logged."""
        closed, freed = self.closed_since, self.taken_apart_since
        started, cpu = time.perf_counter(), time.thread_time()
        gc.unfreeze()
        freeze_young()  # one collection of everything, then the survivors frozen again
        took, took_cpu = 1000 * (time.perf_counter() - started), 1000 * (time.thread_time() - cpu)
        self.reclaims.append((why, took))
        self.closed_since, self.taken_apart_since, self.last_reclaim = 0, 0, self.clock()
        log.info("full reclaim in %.0f ms (%.0f ms of CPU): %d closed pages left behind, and what %d pages freed "
                 "by their own step left (%s, %d open)", took, took_cpu, closed, freed, why, self.open_sessions)


@dataclass
class CollectionTimer:
    """A `gc.callbacks` hook: one log line for each collection that held the server longer than `long_collection_ms`."""

    clock: Callable[[], float] = time.perf_counter
    started: float = 0.0
    longest_ms: float = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self.started = self.clock()
            return
        took = 1000 * (self.clock() - self.started)
        self.longest_ms = max(self.longest_ms, took)
        if took >= settings().long_collection_ms:
            log.info("a generation-%d collection paused the server %.0f ms", info.get("generation", -1), took)


def freeze_young() -> None:
    """Collect what was made since the last freeze, then move every surviving object out of the collector's
    sight (each open page first notes what its reclaim will start from, as that is frozen now too).

    All three generations: a page's build makes enough objects that some of its garbage reaches the oldest
    before the build ends, and garbage frozen is garbage kept. Since the last freeze emptied them, that is
    still only what was made since (the frozen heap is not walked)."""
    gc.collect()
    for page in list(_open_pages):
        page.note()
    gc.freeze()


def freeze_when_settled(tries: int = 0) -> None:
    """freeze_young, once no open page has a next-tick callback waiting (for at most SETTLE_TRIES rounds).

    A callback frozen while it waits stays, after it has run, in its cycle with Bokeh's wrapper and the
    page's Document, and keeps what it refers to (Panel's change handlers refer to the page's widgets).
    Called from the event loop itself, never from inside a session's callback, which would be frozen too.
    """
    global _freeze_scheduled_on
    if tries < SETTLE_TRIES and any(page.waiting() for page in list(_open_pages)):
        asyncio.get_running_loop().call_later(SETTLE_S, freeze_when_settled, tries + 1, context=Context())
        return
    _freeze_scheduled_on = None
    freeze_young()


def freeze_soon(loop: asyncio.AbstractEventLoop | None = None) -> None:
    """freeze_when_settled on the next round of `loop` (the running one by default), outside the callback this
    is called from (one at a time). Bokeh 3.10 runs a session's callbacks on worker threads: they name the
    loop serving their page, which the work is handed to."""
    global _freeze_scheduled_on
    loop = loop or running_loop()
    if loop is None:  # no loop (a test's page built by hand)
        freeze_young()
        return
    if _freeze_scheduled_on is loop:
        return  # one is on its way
    _freeze_scheduled_on = loop
    loop.call_soon_threadsafe(freeze_when_settled, context=Context())


reclaimer = Reclaimer()
_started = False
_freeze_scheduled_on: asyncio.AbstractEventLoop | None = None  # the loop a freeze is waiting on, if any


class OpenPage:
    """A served session's Document and, weakly, what else its reclaim must start from.

    Panel's and Bokeh's clean-up of a closed session cut its Document off from the rest of it: the roots
    are deleted, each model forgets its document, and the session's callbacks are dropped from it, each
    still holding the Document in the closure Bokeh wraps it in. Whatever of that was frozen would count
    as a reference from outside the walk and keep the page alive, so the walk starts from all of it:
    the models, the page's outermost Panel object (which reaches its widgets, param watchers and our
    views) and every session callback it had when anything was frozen (a callback made since is young,
    and the collector sees to it). Held weakly, so nothing the page dropped while open is kept for it.
    The page counts as freed once its outermost Panel object is gone.
    """

    def __init__(self, doc: Any, body: Any = None) -> None:
        self.doc: Any = doc  # strong while the page is open
        self.doc_ref: weakref.ref | None = None  # weak once it has closed
        self.reach: weakref.WeakSet = weakref.WeakSet()
        self.page_ref = weakref.ref(body if body is not None else doc)
        if body is not None:
            self.reach.add(body)

    def note(self) -> None:
        """Note the page's models and session callbacks as they are now (before anything is frozen)."""
        if self.doc is None:
            return
        try:
            self.reach.update(self.doc.models)
            self.reach.update(self.doc.session_callbacks)
        except AttributeError:  # closed meanwhile: Bokeh's destroy deletes its tables
            pass

    def waiting(self) -> bool:
        """A next-tick callback of this page is scheduled and has not run yet."""
        try:
            return self.doc is not None and any(isinstance(c, NextTickCallback) for c in self.doc.session_callbacks)
        except AttributeError:
            return False

    def closed(self) -> None:
        """The session has closed: hold the Document weakly from now on (the walk must see no hold of ours)."""
        _open_pages.discard(self)
        if self.doc is not None:
            self.doc_ref, self.doc = weakref.ref(self.doc), None

    def take(self) -> list[Any]:
        """The reclaim's starting points, for one attempt (this record keeps only weak references)."""
        doc = self.doc_ref() if self.doc_ref is not None else None
        return [obj for obj in (doc, *self.reach) if obj is not None]

    @property
    def freed(self) -> bool:
        """Its outermost Panel object is gone, and with it what it held: its widgets, views and models. (The
        emptied Document may outlive it a while, held by what Bokeh's server kept of the session's
        callbacks; a few hundred objects, left for the quiet-time reclaim.)"""
        return self.page_ref() is None


_open_pages: set[OpenPage] = set()


def track_page(body: Any = None) -> None:
    """Call while building each page (`body`, its outermost Panel object): in a session of the running
    server, take part in the above.

    The page is frozen after the tick it is built on, and again after everything its onload builds:
    onload callbacks run in the order they were registered and each schedules its work on the next
    tick, so the last one registered runs after the page's own (the figures). When the session
    closes, its own cycles are taken apart in a turn of the build queue.
    """
    import panel as pn

    from blocktrace.app.server.session_setup import for_a_browser

    doc = pn.state.curdoc
    if doc is None or not for_a_browser(doc.session_context):
        return  # Panel's start-up warm-up, a test's document, a notebook
    loop = serving_loop(doc)  # this thread's, or (Bokeh 3.10 builds pages on worker threads) the server's
    start(loop)
    reclaimer.session_opened()
    page = OpenPage(doc, body)
    _open_pages.add(page)
    doc.on_session_destroyed(lambda _context: _closed(page))
    doc.on_change(_browser_changed)
    doc.add_next_tick_callback(functools.partial(freeze_soon, loop))
    pn.state.onload(lambda: pn.state.execute(functools.partial(freeze_soon, loop), schedule=True))


def own_steps(enabled: bool | None = None, why_not: str | None = session_reclaim.WHY_NOT) -> bool:
    """Whether closed pages are taken apart in their own steps: the `session_reclaim` setting (`enabled`), on an
    interpreter session_reclaim supports (`why_not` says why not). The first time it is not, one log line."""
    if enabled is None:
        enabled = settings().session_reclaim
    reason = why_not if enabled else "switched off (BLOCKTRACE_SESSION_RECLAIM=0)"
    if reason is not None and reason not in _stood_down:
        _stood_down.add(reason)
        log.info("closed pages are not taken apart in their own steps: %s; the quiet-time full reclaim frees them",
                 reason)
    return reason is None


_stood_down: set[str] = set()  # the reasons already logged


def _closed(page: OpenPage) -> None:
    reclaimer.session_closed()
    page.closed()
    if not own_steps():
        reclaimer.left_behind()
        return
    try:
        asyncio.get_running_loop().create_task(take_apart_in_turn(page))
    except RuntimeError:  # no loop (a test closing a page by hand): the full reclaim will see to it
        reclaimer.left_behind()


async def take_apart_in_turn(page: OpenPage) -> None:
    """Once Bokeh has finished discarding the session, in turns of the build queue behind every page build
    waiting: its own cycles taken apart. Something still at work for it (a store call in flight, a callback
    about to run) may hold it a moment longer: then again `take_apart_retry` seconds later, up to
    `take_apart_tries` times; after that, the quiet-time reclaim is left to free it."""
    from blocktrace.explorables.components.build_turns import PACER

    numbers = settings()
    for attempt in range(1, numbers.take_apart_tries + 1):
        if attempt > 1:
            await asyncio.sleep(numbers.take_apart_retry)
        await PACER.turn_after_builds()
        roots = page.take()
        outcome = await session_reclaim.reclaim_in_steps(roots, PACER.turn_after_builds, shared=shared_types())
        if page.freed:
            reclaimer.session_taken_apart(outcome)
            log.info("a closed session's memory came back in %.0f ms (the longest step %.0f ms): %d of the %d "
                     "objects it reached freed", outcome.ms, outcome.longest_ms, outcome.freed, outcome.walked)
            return
    reclaimer.left_behind()
    log.info("a closed session's page is still held elsewhere (%d of %d objects walked freed%s): left for the "
             "quiet-time reclaim", outcome.freed, outcome.walked, ", past the limit" if outcome.aborted else "")


@functools.cache
def shared_types() -> tuple[type, ...]:
    """Objects every session uses, which a closed session's walk does not go into: Panel's designs (one per
    theme, holding every session's models), its per-process state, the server's and Bokeh's application
    contexts (which hold every session), the event loop's handles, futures and contexts, loggers, the store,
    Bokeh's property descriptors (each model's property containers name them), templates and patterns."""
    import contextvars
    import re

    import jinja2
    import tornado.web
    from bokeh.application import Application
    from bokeh.core.property.bases import Property
    from bokeh.core.property.descriptors import PropertyDescriptor
    from bokeh.server.contexts import ApplicationContext, BokehServerContext
    from panel.io.state import state
    from panel.theme.base import Design
    from sqlalchemy.engine import Engine

    from blocktrace.app.classroom.learner import Classroom

    return (Design, type(state), Application, ApplicationContext, BokehServerContext, tornado.web.Application,
            logging.Logger, Engine, Classroom, PropertyDescriptor, Property, re.Pattern, jinja2.Template,
            jinja2.Environment, contextvars.Context, asyncio.Handle, asyncio.Future)


def _browser_changed(event) -> None:
    if getattr(event, "setter", None) is not None:  # the server's own changes have no setter
        reclaimer.browser_changed()


def start(loop: asyncio.AbstractEventLoop | None = None) -> None:
    """In the serving process, once: the build queue's numbers and the thresholds set, the start-up heap frozen, the
    periodic checks, on `loop` (the loop serving the pages; without one, this thread's)."""
    global _started
    if _started:
        return
    _started = True

    from blocktrace.app.server.build_pacing import pace_from_settings

    pace_from_settings()  # done already under `blocktrace serve`; not under plain `panel serve`
    own_steps()  # says so now if closed pages will not be taken apart in their own steps
    numbers = settings()
    gc.set_threshold(numbers.young_collection_every, 10, 10)
    gc.callbacks.append(CollectionTimer())
    freeze_young()  # the start-up heap: imports and Panel's warm-up, never garbage
    checks = functools.partial(start_checks, numbers.memory_check_every, numbers.freeze_every)
    if loop is None:
        checks()
    else:  # Tornado's PeriodicCallback runs on the loop of the thread that starts it: the serving loop's own
        loop.call_soon_threadsafe(checks)


def start_checks(check_every_s: float, freeze_every_s: float) -> None:
    """The periodic reclaim check and freeze, on this thread's event loop."""
    from tornado.ioloop import PeriodicCallback

    PeriodicCallback(reclaimer.reclaim_if_due, check_every_s * 1000).start()
    PeriodicCallback(freeze_soon, freeze_every_s * 1000).start()
