"""What one session sends to the classroom store, and what it reads back from it.

Everything a learner commits goes through `SessionRecorder`: a prediction is final (on the page too)
only once the store has it; parameter changes are coalesced (a slider drag is one event); one
session's store calls are bounded; when the database cannot be reached, events wait in the process's
outbox and a notice says so.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import panel as pn

from blocktrace.app.classroom.identity import clean_display_name
from blocktrace.app.classroom.store import StoreUnavailable, check_prediction, check_record, new_event_id
from blocktrace.app.classroom.teacher_view import bars
from blocktrace.app.settings import settings
from blocktrace.explorables.components.build_turns import serving_loop
from blocktrace.explorables.components.updates import LiveHTML
from blocktrace.explorables.components.weak_callbacks import weakly

if TYPE_CHECKING:  # only named in annotations: learner.py imports this module
    from blocktrace.app.classroom.classroom import Classroom
    from blocktrace.app.classroom.learner import Learner

__all__ = [
    "SessionRecorder", "Slot", "newest_per_slot",
    "slot_key",
]

log = logging.getLogger(__name__)
Together = tuple[Callable[[list[Any]], list[Any]], Callable[[Any], Any]]  # (group, convert): see _run


REVEALED_CAPTION = "The class answered (revealed by your teacher)"

Slot = tuple[str, str | None, str | None]  # (kind, explorable, what in it: checkpoint, parameter, ...)


def slot_key(payload: dict[str, Any]) -> str | None:
    """Which of a page's questions or controls an event is about (events of one slot replace each other)."""
    for key in ("checkpoint", "name", "id", "question"):
        if payload.get(key) is not None:
            return str(payload[key])
    return None


def newest_per_slot(events: list) -> list:
    """Of stored events (oldest first), each slot's newest, in the order those were made."""
    newest: dict[Slot, Any] = {}
    for event in events:
        slot = (event.kind, event.explorable, slot_key(event.payload))
        newest.pop(slot, None)
        newest[slot] = event
    return list(newest.values())


class SessionRecorder:
    """One session's link to the store. With no classroom configured, it records nothing.

    Every store call runs on the process's store thread; answers come back to this session's
    document as next-tick callbacks, so the page is only ever changed under its document's lock (on the
    event loop; Bokeh 3.10 runs them on a worker thread that holds it). The store thread hands each answer
    to the loop that serves the session first (found even when the page is built on a worker thread, see
    `serving_loop`), and the loop adds the callback: Bokeh's
    `add_next_tick_callback` marks the current document on a process-wide stack while it runs, and from
    another thread that mark could land inside a callback of a different session, which then took that
    session's stylesheet models for its own (a RuntimeError: a model in two documents).

    One session never has more than `session_store_calls` (app/settings.py) calls waiting on that thread: past it, each
    event waits here instead, only the newest per slot (one checkpoint, one parameter, the
    name), and an event identical to the one its slot sent last is not sent again. So a button
    pressed 3,000 times costs a handful of writes, and other students' commits are not queued
    behind them.
    """

    def __init__(self, classroom: Classroom | None, learner: Learner | None, lesson: str | None = None,
                 doc: Any = None):
        self.classroom, self.learner, self.lesson = classroom, learner, lesson
        self.notice = LiveHTML("", sizing_mode="stretch_width", visible=False)
        self.unrecorded = False  # a classroom page that records nothing (its address made too many learners)
        self._pending_params: dict[tuple[str, str], Any] = {}
        self._generation = 0
        if doc is None and getattr(pn.state.curdoc, "session_context", None) is not None:
            doc = pn.state.curdoc
        self._doc = doc  # this session's document (None outside a session: answers are handled at once)
        self._loop = serving_loop(doc) if doc is not None else None  # the event loop that serves it
        self._lock = threading.Lock()  # guards the bookkeeping below, touched by the loop and the store thread
        self._in_flight = 0
        self._waiting: dict[Slot, Callable[[], None]] = {}  # slot -> the submission of its newest event
        self._last: dict[Slot, str] = {}  # slot -> what it last sent (or has waiting)
        self._stored: dict[Slot, str] = {}  # slot -> what the store last confirmed for it (read on the loop)
        self._timers: set[Callable[[], None]] = set()  # what waits on a timeout of the document (see _later)
        # Called in this session with the name the store holds once the page has joined (the learner bar's field
        # shows it, on every page and after a reload); set by the learner bar.
        self.on_name: Callable[[str | None], None] | None = None

    @property
    def active(self) -> bool:
        return self.classroom is not None and self.learner is not None

    @property
    def in_flight(self) -> int:
        """Store calls of this session submitted and not answered yet."""
        return self._in_flight

    def _run(self, call: Callable[[], Any], then: Callable[[Any], None] | None = None, first: bool = False,
             together: Together | None = None) -> None:
        """`call()` on the store thread, then `then(result)` in this session (at once without a session).

        With `first`, ahead of the store thread's waiting calls (StoreThread.submit). With `together`, a pair
        (group, convert): `call` is not called but is an item for `group` (StoreThread.submit_together), and
        `convert(result)`, on the store thread, makes that item's result what `then` gets."""
        with self._lock:
            self._in_flight += 1
        self._submit(call, then, first, together)

    def _submit(self, call: Any, then: Callable[[Any], None] | None, first: bool = False,
                together: Together | None = None) -> None:
        doc, loop = self._doc, self._loop

        def in_session(result: Any) -> None:  # on the event loop
            try:
                doc.add_next_tick_callback(lambda: then(result))
            except (RuntimeError, AttributeError):  # the page was closed meanwhile (Bokeh took its document
                pass  # apart): nobody is left to tell

        def done(result: Any) -> None:  # on the store thread
            self._finished()
            if then is None:
                return
            if doc is None:
                then(result)
                return
            if loop is None:  # a document served by no loop here (tests): straight to it
                in_session(result)
                return
            try:
                loop.call_soon_threadsafe(in_session, result)
            except RuntimeError:  # the loop has closed: the server is stopping
                pass

        if together is None:
            self.classroom.thread.submit(call, done, first)
            return
        group, convert = together
        self.classroom.thread.submit_together(group, call, lambda result: done(convert(result)))

    def _finished(self) -> None:
        """One call answered: the oldest waiting slot may go now."""
        with self._lock:
            self._in_flight -= 1
            if not self._waiting or self._in_flight >= settings().session_store_calls:
                return
            send = self._waiting.pop(next(iter(self._waiting)))
            self._in_flight += 1
        send()

    def _send_once(self, slot: Slot, content: str, call: Callable[[], Any],
                   then: Callable[[Any], None] | None) -> bool:
        """Submit now, or wait here (the newest per slot) while `session_store_calls` calls are out; drop a repeat.

        False for a dropped repeat."""
        with self._lock:
            if self._last.get(slot) == content:
                return False  # the same as this slot's last event: nothing new to store
            self._last[slot] = content
            if self._in_flight >= settings().session_store_calls:
                self._waiting.pop(slot, None)  # the newer event replaces it, and goes to the back
                self._waiting[slot] = lambda: self._submit(call, then)
                if len(self._waiting) > settings().session_waiting_slots:
                    dropped = next(iter(self._waiting))
                    del self._waiting[dropped]
                    self._last.pop(dropped, None)
                    log.warning("a session has %d kinds of events waiting; the oldest is dropped",
                                settings().session_waiting_slots)
                return True
            self._in_flight += 1
        self._submit(call, then)
        return True

    def _forget(self, slot: Slot, content: str) -> None:
        """An event of this slot was lost: the same event may be sent again."""
        with self._lock:
            if self._last.get(slot) == content:
                del self._last[slot]

    def _later(self, callback: Callable[[], None], ms: int) -> None:
        """Run `callback` in this session after `ms` (nothing outside a session)."""
        if self._doc is None:
            return

        def fire() -> None:
            self._timers.discard(fire)
            callback()

        self._timers.add(fire)  # held here while it waits: the document's timeout calls it weakly
        try:
            self._doc.add_timeout_callback(weakly(fire), ms)
        except (RuntimeError, AttributeError):  # the page is gone
            self._timers.discard(fire)

    # --- writing ----------------------------------------------------------------------------

    def _deliver(self, result: Any) -> Any:
        """Show or clear the "not being saved" notice from the outbox's answer (None: queued)."""
        self._show_unsaved(result is None or isinstance(result, Exception))
        return result

    def refresh_notice(self) -> None:
        """Called every few seconds: the notice shows while writes wait or the database does not answer."""
        if not self.active:
            return
        unsaved = self.classroom.outbox.pending > 0 or self.classroom.thread.stalled()
        if unsaved != self.notice.visible:
            self._show_unsaved(unsaved)

    def _show_unsaved(self, unsaved: bool) -> None:
        self.notice.object = ('<p class="bt-notice" role="status">Your progress is not being saved right now '
                              "(the class database cannot be reached). Keep exploring: it will be saved as soon "
                              "as the connection is back.</p>") if unsaved else ""
        self.notice.visible = unsaved

    def emit(self, kind: str, payload: dict[str, Any], explorable: str | None = None,
             saved: Callable[[], None] | None = None) -> None:
        """Store an event; later `saved()` in this session once the store has committed it (or had it already)."""
        if not self.active:
            return
        outbox, learner = self.classroom.outbox, self.learner
        explorable = explorable or payload.get("explorable")
        check_record(new_event_id(), learner.class_code, learner.id, kind, payload, self.lesson,
                     explorable)  # a bad call fails here, in the caller
        payload = dict(payload)
        slot = (kind, explorable, slot_key(payload))
        content = json.dumps(payload, sort_keys=True, default=str)

        def record() -> bool | None:
            try:  # the event id is made when it goes: one that waited is still one event
                result = outbox.record(new_event_id(), learner.class_code, learner.id, kind, payload,
                                       lesson=self.lesson, explorable=explorable)
            except StoreUnavailable:  # the outbox itself is full: this event is lost, and the page says so
                self._forget(slot, content)
                result = None
            if result is None:
                log.warning("the store is unavailable: a %r event waits in the outbox", kind)
            return result

        def delivered(result: Any) -> None:
            self._deliver(result)
            if result is not None and not isinstance(result, Exception):
                self._stored[slot] = content
                if saved is not None:
                    saved()

        if not self._send_once(slot, content, record, delivered) and saved is not None \
                and self._stored.get(slot) == content:
            saved()  # a repeat of what the store already has

    def join(self, display_name: str | None = None, done: Callable[[bool], None] | None = None) -> str | None:
        """Register the learner (and a display name); returns an error message for a refused name.

        Later `done(True)` once the store has it, `done(False)` if it could not be written (in this session), and
        `on_name(the name stored)` once it is stored.
        """
        if not self.active:
            return None
        name = None
        if display_name:
            name = clean_display_name(display_name)
            if name is None:
                return "Names are 1 to 40 ordinary characters."
        store, learner = self.classroom.store, self.learner

        def join() -> str | None:
            kept = name or store.display_name(learner.class_code, learner.id)  # a new page keeps the old name
            store.join(learner.class_code, learner.id, kept)
            return kept

        def joined(result: Any) -> None:
            failed = isinstance(result, Exception)
            if failed:
                self._forget(("join", None, None), name or "")
            self._show_unsaved(failed)
            if done is not None:
                done(not failed)
            if not failed and self.on_name is not None:
                self.on_name(result)

        self._send_once(("join", None, None), name or "", join, joined)
        return None

    def commit_prediction(self, question: str, choice: str, note: str, explorable: str,
                          answer: Callable[[str, Any], None]) -> None:
        """Store a commit; later `answer(status, row)`, in this session, once or more.

        "stored": durably written (the row when known). "refused": another answer was stored
        first (its row), or none is stored and the store refused this one (None). "pending":
        the store did not take it yet; it is retried every `commit_retry_ms` and answered again.
        """
        if not self.active:
            answer("stored", None)
            return
        outbox, store, learner = self.classroom.outbox, self.classroom.store, self.learner
        event_id = new_event_id()
        check_prediction(event_id, learner.class_code, learner.id, question, choice, note or None,
                         self.lesson, explorable)

        def stored_row() -> tuple[str, Any]:
            row = store.prediction(learner.class_code, learner.id, question)
            return ("stored" if row is not None and row.event_id == event_id else "refused"), row

        item = dict(event_id=event_id, class_code=learner.class_code, learner_id=learner.id, question=question,
                    choice=choice, note=note or None, lesson=self.lesson, explorable=explorable)

        def outcome(result: Any) -> Any:  # on the store thread: what the outbox answered for this commit
            if isinstance(result, StoreUnavailable):  # the outbox is full: not queued; the retry writes it later
                result = None
            if isinstance(result, Exception):
                return result
            if result is None:
                return "pending", None
            if result:
                return "stored", None
            try:
                return stored_row()  # refused: an earlier answer stands (or this very one, from an earlier try)
            except StoreUnavailable as error:
                return error
            except Exception as error:  # a bug: logged; the answer stays pending and is tried again
                log.exception("reading the prediction that stands failed")
                return error

        def commit() -> Any:
            try:
                return outcome(outbox.commit_prediction(**item))
            except StoreUnavailable as error:
                return outcome(error)

        def retry() -> tuple[str, Any]:
            status, row = stored_row()  # a StoreUnavailable here is an answer: still pending
            if row is not None:
                return status, row
            if outbox.pending:  # this commit may still wait in the outbox, which delivers it in order
                return "pending", None
            return commit()  # not stored and not queued (the outbox was full): write it now, same event id

        def answered(result: Any) -> None:
            status, row = ("pending", None) if isinstance(result, Exception) else result
            self._show_unsaved(status == "pending")
            if status == "pending":
                self._later(lambda: self._run(retry, answered, first=True), settings().commit_retry_ms)
            answer(status, row)

        # The student's controls stay locked until it is stored: it goes first, with the commits waiting beside it.
        self._run(item, answered, together=(outbox.commit_predictions, outcome))

    def restore_prediction(self, question: str, found: Callable[[Any], None]) -> None:
        """Later `found(row)` with this learner's stored prediction, if they committed one before."""
        if not self.active:
            return
        store, learner = self.classroom.store, self.learner

        def read() -> Any:
            return store.prediction(learner.class_code, learner.id, question)

        def answered(result: Any) -> None:
            if isinstance(result, Exception):
                self._show_unsaved(True)
            elif result is not None:
                found(result)

        self._run(read, answered)

    def restore_events(self, found: Callable[[list], None]) -> None:
        """Later `found(events)` with this learner's stored events on this page's lesson, oldest first."""
        if not self.active:
            return
        store, learner, lesson = self.classroom.store, self.learner, self.lesson

        def read() -> Any:
            return store.learner_events(learner.class_code, learner.id, lesson)

        def answered(result: Any) -> None:
            if isinstance(result, Exception):
                self._show_unsaved(True)
            elif result:
                found(result)

        self._run(read, answered)

    def remember(self, events: list) -> None:
        """Stored events a page has put back: sending the same again would store nothing new."""
        with self._lock:
            for e in events:
                payload = dict(e.payload)
                slot = (e.kind, e.explorable, slot_key(payload))
                self._last[slot] = self._stored[slot] = json.dumps(payload, sort_keys=True, default=str)

    def parameter_changed(self, explorable: str, name: str, value: Any) -> None:
        """Coalesce: only the last value of a burst is recorded, `coalesce_ms` after the burst ends."""
        if not self.active:
            return
        self._pending_params[(explorable, name)] = value
        self._generation += 1
        generation = self._generation
        doc = pn.state.curdoc
        if doc is None or doc.session_context is None:
            self.flush_parameters()
            return
        doc.add_timeout_callback(functools.partial(weakly(self._flush_if_latest), generation),
                                 settings().coalesce_ms)

    def _flush_if_latest(self, generation: int) -> None:
        if generation == self._generation:  # no change came after the one that scheduled this
            self.flush_parameters()

    def flush_parameters(self) -> None:
        pending, self._pending_params = self._pending_params, {}
        for (explorable, name), value in pending.items():
            self.emit("param", {"name": name, "value": value}, explorable)

    # --- reading for the learner ------------------------------------------------------------

    def class_answers_html(self, question: str, choices: dict[str, str], mine: str | None = None) -> str:
        """The class's answers as bars once the teacher has revealed them, the learner's own (`mine`) marked
        (callers show it only after a commit).

        Read from the process's copy of every revealed question, which the store thread refreshes.
        """
        if not self.active:
            return ""
        counts = self.classroom.thread.reveals.get((self.learner.class_code, question))
        if counts is None:
            return ""
        return f'<div class="bt-class-answers">{bars(counts, choices, REVEALED_CAPTION, mine)}</div>'  # a narrow column
