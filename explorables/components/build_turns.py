"""Page builds take turns, so students already on their pages are answered in between.

Building a session is synchronous Python on the event loop: about 170 ms for the block-trace page's
document and 80 ms for each of its figures on a quiet 2-core machine. When 30 students reload at once
(or a script asks for page after page), the builds used to run back to back and every other student's
slider change waited behind all of them: seconds.

Here every build step of the process waits for its turn in one queue: a session's document (Bokeh's
`on_session_created` hook, which may delay a session's creation), the page content built once the browser
has loaded it, and each figure drawn after load. One step runs at a time. After each, the loop is left
to everything else for GAP_S (while more steps wait: for as long as the step took, if longer), and on
while it is still behind (its own timer fires more than BEHIND_S late while the loop's thread was busy
for at least BUSY_SHARE of the rest: a timer late only because other programs had the CPU is no reason
to wait), at most MAX_REST_S after the step. So students already on their pages go first: a student's
change waits for about one build step, however many pages are being built, and the pages being built
take longer to arrive. A page built on a quiet server waits GAP_S between its steps. (An idle probe, two
callbacks in a row, was tried instead of the late timer: it took rounds between a message's own awaits
for idle, and the staying students' longest waits doubled; benchmarks/classroom.py.)

A closed page's reclaim (app/server/session_memory.py) walks in steps of this queue too, behind every page
build waiting (`turn(after_builds=True)`): a student opening a page goes before the memory of one who left.
A step handed to a Document whose session is destroyed before the step runs ends its turn as Bokeh reports
the session destroyed (`on_session_destroyed`), and one whose session went while it waited ends it as it
begins, not STUCK_S later.

Only public hooks are used (a Bokeh lifecycle handler, `Document.add_next_tick_callback`), so this holds
with and without `--no-tuning`. The session hook is app/server/build_pacing.py, which also sets the process's
PACER to the server's settings (`BLOCKTRACE_BUILD_GAP` and the others, app/settings.py) as it starts; the
numbers below are their defaults, and a Pacer made here without arguments uses them.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import itertools
import logging
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from blocktrace.explorables.components.weak_callbacks import weakly

__all__ = ["PACER", "Pacer", "in_turn", "running_loop", "serving_loop"]

log = logging.getLogger(__name__)

GAP_S = 0.02  # after each build step, the loop's own for at least this long ...
SHARE = 1.0  # ... or, while other steps wait, this share of the time the step took, if longer
BEHIND_S = 0.01  # a rest whose timer fires this late means the loop still has other work waiting: rest on ...
BUSY_SHARE = 0.2  # ... if the loop's thread was busy for this share of the rest (else other programs were)
MAX_REST_S = 0.5  # however busy the loop, the next step starts this long after the last one at the latest
STUCK_S = 5.0  # a step not reported done after this long (a waiter that never resumes) frees the queue
NUMBERS = ("gap_s", "stuck_s", "share", "behind_s", "max_rest_s", "busy_share")  # what `Pacer.configure` sets

Start = Callable[[Callable[[], None]], None]  # begins a step, given the function that ends its turn


class Pacer:
    """One queue of build steps per process, run one at a time with a gap between them."""

    def __init__(self, gap_s: float = GAP_S, stuck_s: float = STUCK_S, share: float = SHARE,
                 behind_s: float = BEHIND_S, max_rest_s: float = MAX_REST_S, busy_share: float = BUSY_SHARE,
                 cpu_clock: Callable[[], float] = time.thread_time):
        self.cpu_clock = cpu_clock  # the loop thread's CPU time: whether a late rest was the loop's own doing
        self.gap_s, self.stuck_s, self.share = gap_s, stuck_s, share
        self.behind_s, self.max_rest_s, self.busy_share = behind_s, max_rest_s, busy_share
        self._began = 0.0  # when the running step was given its turn, on the loop's clock
        self._queue: deque[Start] = deque()  # page builds, first come first served ...
        self._after_builds: deque[Start] = deque()  # ... and then, once none waits, closed pages' reclaim steps
        self._turn = 0  # the turn running (>0), resting after it (<0), or none (0)
        self._turns = 0
        self.steps = 0  # steps begun, for tests and logs
        self._steps: dict[int, Callable[[], None]] = {}  # steps handed to a document, not run yet
        self._keys = itertools.count()

    def configure(self, **numbers: float) -> None:
        """Set some of the numbers it was made with (NUMBERS), for its next steps: the server's settings."""
        unknown = set(numbers) - set(NUMBERS)
        if unknown:
            raise TypeError(f"Pacer has no number {', '.join(sorted(unknown))}")
        for name, value in numbers.items():
            setattr(self, name, value)

    @property
    def waiting(self) -> int:
        return len(self._queue) + len(self._after_builds)

    async def turn(self, after_builds: bool = False) -> None:
        """Wait for this coroutine's turn; the synchronous work it does next, up to its next await, is the step.
        With `after_builds`, the turn comes only once no page build step waits (a closed page's reclaim)."""
        loop = asyncio.get_running_loop()
        ready = loop.create_future()

        def start(done: Callable[[], None]) -> None:
            if ready.done():  # the waiter gave up (its request went away)
                done()
                return
            ready.set_result(None)  # wakes the waiter on the loop's next round ...
            loop.call_soon(done, context=contextvars.Context())  # ... and this runs right after its step

        self._enqueue(start, after_builds)
        await ready

    async def turn_after_builds(self) -> None:
        """turn(after_builds=True): the pause between a closed page's reclaim steps (session_memory.py)."""
        await self.turn(after_builds=True)

    def step(self, doc: Any, work: Callable[[], None]) -> None:
        """Run `work()` in `doc`'s session (a next-tick callback, under its lock) when its turn comes."""

        def start(done: Callable[[], None]) -> None:
            if _session_gone(doc):  # destroyed while the step waited: its callbacks would never run
                done()
                return
            key = next(self._keys)
            doc_ref = weakref.ref(doc)

            def run() -> None:
                self._steps.pop(key, None)
                _forget_destroyed(doc_ref(), release)
                try:
                    work()
                finally:
                    done()

            def release(_session_context: Any) -> None:
                """The session was destroyed before the step ran: the queue goes on at once."""
                self._steps.pop(key, None)
                done()

            # Held here, not by the document's callback (weak_callbacks.py): a step whose session closes
            # first is let go (when Bokeh reports the session destroyed, or by the stuck-step timer) instead
            # of staying with the closed page's callbacks.
            self._steps[key] = run
            asyncio.get_running_loop().call_later(self.stuck_s, self._steps.pop, key, None)
            try:
                doc.add_next_tick_callback(weakly(run))
            except (RuntimeError, AttributeError):  # the session is gone
                self._steps.pop(key, None)
                done()
                return
            with contextlib.suppress(AttributeError):  # a document served by no session (a test's)
                doc.on_session_destroyed(release)

        self._enqueue(start)

    def _enqueue(self, start: Start, after_builds: bool = False) -> None:
        (self._after_builds if after_builds else self._queue).append(start)
        self._next()

    def _next(self) -> None:
        if self._turn != 0:
            return
        loop = asyncio.get_running_loop()
        while self._queue or self._after_builds:
            start = (self._queue or self._after_builds).popleft()
            self._turns += 1
            self._turn = turn = self._turns
            done = functools.partial(self._done, loop, turn)
            loop.call_later(self.stuck_s, done, context=contextvars.Context())
            self.steps += 1
            self._began = loop.time()
            try:
                start(done)
                return
            except Exception:  # a step that cannot begin must not stop every later one
                log.exception("a page build step could not begin")
                self._turn = 0

    def _done(self, loop: asyncio.AbstractEventLoop, turn: int) -> None:
        if self._turn != turn:
            return  # already done (this is the stuck-step timer of a step that finished)
        self._turn = -turn
        now = loop.time()
        rest = max(self.gap_s, self.share * (now - self._began)) if self.waiting else self.gap_s
        self._rest(loop, turn, rest, now + self.max_rest_s)

    def _rest(self, loop: asyncio.AbstractEventLoop, turn: int, for_s: float, latest: float) -> None:
        began = loop.time()
        # In a context of its own: the next step must not start inside the context of the session whose
        # step just ended (Panel reads the current document from it first).
        loop.call_later(for_s, self._rested, loop, turn, began, began + for_s, latest, self.cpu_clock(),
                        context=contextvars.Context())

    def _rested(self, loop: asyncio.AbstractEventLoop, turn: int, began: float, due: float, latest: float,
                cpu_began: float) -> None:
        if self._turn != -turn:
            return
        now = loop.time()
        # Late, and because the loop had work of its own (its thread used the CPU for much of the rest), not
        # because other programs on the machine had the CPU: it is still catching up, others first.
        busy = self.cpu_clock() - cpu_began >= self.busy_share * (now - began)
        if now - due > self.behind_s and busy and now < latest:
            self._rest(loop, turn, self.gap_s, latest)
            return
        self._turn = 0
        self._next()


def _session_gone(doc: Any) -> bool:
    """`doc` was served and its session has been destroyed (Bokeh's `Document.destroy` drops its context)."""
    return hasattr(doc, "session_context") and doc.session_context is None


def _forget_destroyed(doc: Any, callback: Callable[[Any], None]) -> None:
    """Take `callback` back from `doc`'s session-destroyed hooks (Bokeh's public set of them), if it is there."""
    with contextlib.suppress(AttributeError):
        doc.session_destroyed_callbacks.discard(callback)


PACER = Pacer()


def in_turn(work: Callable[[], None]) -> None:
    """Run `work` as a build step of the current session, in its turn; at once outside a served session."""
    import panel as pn

    doc = pn.state.curdoc
    context = getattr(doc, "session_context", None)
    if context is None or getattr(context, "server_context", None) is None or running_loop() is None:
        work()
        return
    PACER.step(doc, work)


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, if any (Bokeh 3.9 builds a served session on it)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def serving_loop(doc: Any) -> asyncio.AbstractEventLoop | None:
    """The event loop that serves `doc`'s session (None outside a served session).

    On that loop's own thread it is the running loop. Bokeh 3.10 builds a session's document, and runs its
    callbacks, on worker threads (`asyncio.to_thread`), where no loop runs: there it is the loop of the
    session's application (Bokeh's public `ApplicationContext.io_loop`), which work for the loop is handed to
    with `call_soon_threadsafe`.
    """
    loop = running_loop()
    if loop is not None:
        return loop
    context = getattr(doc, "session_context", None)
    application = getattr(getattr(context, "server_context", None), "application_context", None)
    io_loop = getattr(application, "io_loop", None)
    io_loop = getattr(io_loop, "asyncio_loop", io_loop)  # a Tornado IOLoop, or already asyncio's loop
    return io_loop if isinstance(io_loop, asyncio.AbstractEventLoop) else None
