"""The one thread of a server process that talks to the classroom database.

Sessions hand it calls (through the outbox, so an outage queues them) and get each answer back
later; the event loop that serves every student never waits for the database. A database that
hangs without answering holds up this thread only: students keep exploring, their events wait in
order, and `stalled()` lets the pages say that progress is not being saved.

Between calls, every `store_refresh` seconds (app/settings.py), the thread retries the outbox and reads which questions
teachers have revealed and which classes the server has (one read per process instead of one per page).

Calls run in the order submitted, except for students' commits of their predictions (their controls stay
locked until the store has them): those go before every other call still waiting, and all the commits
waiting when the thread comes to them are written in one transaction, with one durable commit
(`submit_together`). A class told "commit now" sends them within a second or two, while the thread is
behind with the reads and event writes of pages still opening; one at a time, behind those, the 100
commits of benchmarks/classroom.py took 8-15 ms each and the last waited 1.5 s.

A request handler that must answer a person only once a write is stored (the teacher's forms, the
report of `blocktrace check`) awaits `write`: the write runs on this thread after every write queued
before it, and is not queued itself when the database is down (the person is told to try again).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from blocktrace.app.classroom.outbox import Outbox
from blocktrace.app.classroom.store_engine import StoreUnavailable
from blocktrace.app.settings import settings

__all__ = ["StoreThread"]

log = logging.getLogger(__name__)
T = TypeVar("T")


Reveals = dict[tuple[str, str], dict[str, int]]
ResultKey = tuple[str, str, str]  # (class, learner, exercise)


class StoreThread:
    """Runs store calls one at a time, in the order submitted (those marked `first` ahead), off the event loop."""

    def __init__(self, outbox: Outbox, refresh_s: float | None = None, clock: Callable[[], float] = time.monotonic):
        self.outbox = outbox
        self.refresh_s = settings().store_refresh if refresh_s is None else refresh_s
        self.clock = clock
        self.reveals: Reveals = {}  # replaced whole by the thread, read by the pages
        self.paces: dict = {}  # (class, lesson) -> Pace, replaced whole by the thread, read by the pages
        # Every class code the store has (None until read once) and whether students may start one: who may join
        # which class is decided from these (join.admits), on the event loop, with no database read.
        self.classes: frozenset[str] | None = None
        self.open_joining = False
        self.classes_read = threading.Event()  # set once the classes have been read
        # The newest exercise result of each learner, whichever process took it: (stored at, result).
        self._results: OrderedDict[ResultKey, tuple[datetime, dict[str, Any]]] = OrderedDict()
        self._results_lock = threading.Lock()
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()  # (call, done), in order; None: look at _first
        self._first: queue.SimpleQueue = queue.SimpleQueue()  # (call, done) to run before the next of _jobs
        self._together: dict[Callable[[list[Any]], list[Any]], list[tuple[Any, Callable[[Any], None]]]] = {}
        self._together_lock = threading.Lock()
        self._busy_since: float | None = None
        self._started = False
        self._start_lock = threading.Lock()
        self._next_refresh = 0.0

    def submit(self, call: Callable[[], Any], done: Callable[[Any], None] | None = None, first: bool = False) -> None:
        """Run `call()` on the thread; then `done(result)`, on the thread (a StoreUnavailable is a result).

        With `first`, before every waiting call submitted without it (someone is waiting on this one)."""
        self._ensure_started()
        if first:
            self._first.put((call, done))
            self._jobs.put(None)  # wakes the thread if it waits for work
        else:
            self._jobs.put((call, done))

    def submit_together(self, group: Callable[[list[Any]], list[Any]], item: Any, done: Callable[[Any], None]) -> None:
        """Like `submit(..., first=True)`, for calls that share one trip to the database: every item waiting for
        the same `group` when the thread comes to them goes into one `group(items)`, which returns a result for
        each, in order; each `done` gets its item's result (or, if `group` raised, the exception), on the thread."""
        with self._together_lock:
            waiting = self._together.setdefault(group, [])
            waiting.append((item, done))
            if len(waiting) > 1:
                return  # the call that writes this group is already waiting: this item goes with it
        self.submit(functools.partial(self._run_together, group), first=True)

    def _run_together(self, group: Callable[[list[Any]], list[Any]]) -> None:
        with self._together_lock:
            batch = self._together.pop(group, [])
        results = self._guarded(lambda: group([item for item, _done in batch]))
        for i, (_item, done) in enumerate(batch):
            try:
                done(results if isinstance(results, Exception) else results[i])
            except Exception:
                log.exception("a store callback failed")

    async def write(self, call: Callable[..., T], *args: Any) -> T:
        """`call(*args)` run on this thread, awaited on the event loop: its result once it has returned (a store
        write returns after its durable commit), or its exception raised here.

        It runs after every call submitted before it, and after the outbox has delivered the writes queued
        while the database was down (it would otherwise overtake them: an archive would put them in the
        next epoch). While some still wait, the database fails or a call on this thread has hung, StoreUnavailable
        is raised here and nothing is queued: the handler answers that the database cannot be reached, and the
        person retries.
        """
        if self.stalled():  # it would wait behind the call that hangs: the person hears so now, and retries
            raise StoreUnavailable("the class database is not answering")
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[T] = loop.create_future()

        def run() -> tuple[bool, Any]:  # on this thread
            try:
                waiting = self.outbox.flush()
                if waiting:
                    verb = "write still waits" if waiting == 1 else "writes still wait"
                    raise StoreUnavailable(f"{waiting} earlier {verb} for the database")
                return True, call(*args)
            except Exception as error:  # the caller's to handle (a bug there is its 500 and traceback)
                return False, error

        def settle(outcome: tuple[bool, Any]) -> None:  # on the event loop
            if answer.done():  # the awaiting request was cancelled
                return
            ok, value = outcome
            if ok:
                answer.set_result(value)
            else:
                answer.set_exception(value)

        def done(outcome: tuple[bool, Any]) -> None:  # on this thread
            try:
                loop.call_soon_threadsafe(settle, outcome)
            except RuntimeError:  # the loop has closed: the server is stopping
                pass

        self.submit(run, done)
        return await answer

    def stalled(self) -> bool:
        started = self._busy_since
        return started is not None and self.clock() - started >= settings().store_stalled_after

    def drain(self, timeout: float = 10.0) -> bool:
        """Wait until every call submitted so far has run (for tests and shutdown); False on timeout."""
        finished = threading.Event()
        self.submit(lambda: None, lambda _result: finished.set())
        return finished.wait(timeout)

    def _ensure_started(self) -> None:
        if self._started:
            return
        with self._start_lock:
            if not self._started:
                threading.Thread(target=self._run, name="blocktrace-store", daemon=True).start()
                self._started = True

    def _run(self) -> None:
        while True:
            wait = max(0.0, self._next_refresh - self.clock())
            try:
                job = self._jobs.get(timeout=wait) if wait > 0 else self._jobs.get_nowait()
            except queue.Empty:
                self._guarded(self._refresh)
                self._next_refresh = self.clock() + self.refresh_s
                continue
            while True:  # the calls marked first, all of them, before the one taken
                try:
                    self._call(*self._first.get_nowait())
                except queue.Empty:
                    break
            if job is not None:
                self._call(*job)

    def _call(self, call: Callable[[], Any], done: Callable[[Any], None] | None) -> None:
        result = self._guarded(call)
        if done is not None:
            try:
                done(result)
            except Exception:
                log.exception("a store callback failed")

    def _guarded(self, call: Callable[[], Any]) -> Any:
        self._busy_since = self.clock()
        try:
            return call()
        except StoreUnavailable as error:
            return error
        except Exception as error:  # a bug in one call must not stop every later one
            log.exception("a classroom store call failed")
            return error
        finally:
            self._busy_since = None

    def result(self, class_code: str, learner: str, exercise: str) -> dict[str, Any] | None:
        """The newest exercise result known here for a learner (the lesson page polls this; no database read)."""
        with self._results_lock:
            found = self._results.get((class_code, learner, exercise))
        return None if found is None else found[1]

    def took_result(self, key: ResultKey, stored_at: datetime, result: dict[str, Any]) -> None:
        """A result stored at `stored_at`: kept unless a newer one for the same learner and exercise is."""
        with self._results_lock:
            known = self._results.get(key)
            if known is not None and known[0] > stored_at:
                return
            self._results.pop(key, None)
            self._results[key] = (stored_at, result)
            while len(self._results) > settings().results_kept:
                self._results.popitem(last=False)

    def read_classes(self) -> None:
        """Read the classes and the open-joining option now (on this thread)."""
        joining = self.outbox.store.joining()
        self.classes, self.open_joining = joining.classes, joining.open
        self.classes_read.set()

    def opened(self, code: str) -> None:
        """A class just made (the teacher opened it): known in this process at once, not at the next read.

        Called on this thread, after the write, so a read of the classes in flight cannot undo it."""
        if self.classes is not None and code not in self.classes:
            self.classes = self.classes | {code}

    def _refresh(self) -> None:
        self.outbox.flush()
        self.read_classes()
        self.reveals = self.outbox.store.revealed_distributions()
        self.paces = self.outbox.store.current_paces()
        for stored_at, code, learner, result in self.outbox.store.recent_results(settings().results_window):
            self.took_result((code, learner, result["id"]), stored_at, result)
