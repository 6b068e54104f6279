"""A prediction is final, and unlocks the experiment, only once the class store has it; one session's
store work is bounded.

The session's recorder runs on the real store thread over a real SQLite store; a stand-in for the
session's Bokeh document collects what the recorder hands back to the event loop, and the test runs
those callbacks itself, as the loop would.
"""

from __future__ import annotations

import csv
import html
import io
import json
import threading
import time
from collections.abc import Callable

import pytest

from blocktrace.app.classroom.identity import COOKIE_NAME, sign
from blocktrace.app.classroom.learner import Classroom, SessionRecorder, identify
from blocktrace.app.classroom.store import EventStore, StoreUnavailable
from blocktrace.app.server.session_setup import attach_explorable, learner_bar, question_id
from blocktrace.app.settings import settings
from blocktrace.explorables.components.prediction import (
    NOT_SAVED,
    SAVING,
    SAVING_DELAYED,
    Prediction,
    PredictionGate,
)
from blocktrace.explorables.transformer_block_trace.view import TraceExplorable

CLASS, LEARNER, EXPLORABLE = "final", "0123456789abcdef0123456789abcdef", "transformer-block-trace"
FINAL = "Your prediction (final)"
DEADLINE_S = 20.0


class SessionDocument:
    """What the recorder uses of a session's document: next-tick and timeout callbacks, run by the test."""

    def __init__(self) -> None:
        self.ticks: list[Callable[[], None]] = []
        self.timeouts: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def add_next_tick_callback(self, callback: Callable[[], None]) -> None:
        with self._lock:
            self.ticks.append(callback)

    def add_timeout_callback(self, callback: Callable[[], None], _ms: int) -> None:
        self.timeouts.append(callback)

    def run_ticks(self) -> int:
        with self._lock:
            ticks, self.ticks = self.ticks, []
        for tick in ticks:
            tick()
        return len(ticks)

    def run_until(self, condition: Callable[[], bool]) -> None:
        """Run the answers coming back from the store thread until `condition()` holds (bounded)."""
        deadline = time.monotonic() + DEADLINE_S
        while not condition():
            assert time.monotonic() < deadline, "the store thread did not answer in time"
            if not self.run_ticks():
                time.sleep(0.01)

    def fire_timeouts(self) -> None:
        timeouts, self.timeouts = self.timeouts, []
        for timeout in timeouts:
            timeout()


class SwitchableStore(EventStore):
    """A SQLite store that can be made unreachable, as a database that went away is."""

    down = False

    def _check(self) -> None:
        if self.down:
            raise StoreUnavailable("the database cannot be reached (test)")

    def commit_prediction(self, *args, **kwargs):
        self._check()
        return super().commit_prediction(*args, **kwargs)

    def commit_predictions(self, *args, **kwargs):
        self._check()
        return super().commit_predictions(*args, **kwargs)

    def prediction(self, *args, **kwargs):
        self._check()
        return super().prediction(*args, **kwargs)

    def record(self, *args, **kwargs):
        self._check()
        return super().record(*args, **kwargs)

    def join(self, *args, **kwargs):
        self._check()
        return super().join(*args, **kwargs)

    def display_name(self, *args, **kwargs):
        self._check()
        return super().display_name(*args, **kwargs)


def open_classroom(store: EventStore):
    """A classroom over `store` (upgraded), for a fixture: drained and closed after the test."""
    store.upgrade()
    room = Classroom(store, b"secret" * 6)
    yield room
    room.thread.drain()
    store.close()


@pytest.fixture
def classroom(tmp_path):
    yield from open_classroom(SwitchableStore(f"sqlite:///{tmp_path / 'class.db'}"))


def session(classroom: Classroom) -> tuple[TraceExplorable, SessionRecorder, SessionDocument]:
    doc = SessionDocument()
    learner = identify({COOKIE_NAME: sign(LEARNER, classroom.secret)}, {"class": CLASS}, classroom.secret)
    recorder = SessionRecorder(classroom, learner, doc=doc)
    explorable = TraceExplorable(query={}, predict=True)
    attach_explorable(explorable, EXPLORABLE, recorder)
    doc.run_until(lambda: recorder.in_flight == 0 and not doc.ticks)  # the restore read: nothing stored yet
    return explorable, recorder, doc


def commit(explorable: TraceExplorable, choice: str) -> None:
    gate = explorable.gate
    gate._choice.value = gate.prediction.choices[choice]
    gate._button.clicks += 1


def stored_answers(classroom: Classroom) -> list[tuple[str, int]]:
    """(checkpoint, answer) of every stored checkpoint event, in the order stored."""
    rows = csv.DictReader(io.StringIO(classroom.store.export_csv(CLASS)))
    payloads = [json.loads(r["payload"]) for r in rows if r["kind"] == "checkpoint"]
    return [(p["checkpoint"], p["answer"]) for p in payloads]


def summary(explorable: TraceExplorable) -> str:
    return explorable.gate._summary.object


def test_without_a_classroom_a_commit_is_final_at_once() -> None:
    """No store configured: the prediction is final, and the experiment unlocked, the moment it is committed."""
    prediction = Prediction({"a": "Answer A", "b": "Answer B"})
    gate = PredictionGate(prediction, "Which?")
    assert prediction.commit("a") is None
    assert prediction.committed and prediction.unlocked and not prediction.saving
    assert FINAL in gate._summary.object


def test_a_classroom_page_that_records_nothing_never_calls_a_commit_final() -> None:
    """A page over its address's new-learner limit stores nothing: its commit unlocks the experiment but is
    shown as not saved, never as final."""
    explorable = TraceExplorable()
    recorder = SessionRecorder(None, None)
    recorder.unrecorded = True  # as start_session makes it for such a page
    attach_explorable(explorable, EXPLORABLE, recorder)
    commit(explorable, "keep-erase")
    assert explorable.state.prediction.unlocked
    assert FINAL not in summary(explorable) and NOT_SAVED in html.unescape(summary(explorable))


def test_a_commit_is_saving_until_the_store_answers_then_final(classroom) -> None:
    """Between Commit and the store's answer the gate says saving and the experiment stays locked."""
    explorable, recorder, doc = session(classroom)
    prediction = explorable.gate.prediction
    commit(explorable, "keep-erase")
    assert prediction.saving and not prediction.committed and not prediction.unlocked
    assert SAVING in summary(explorable) and FINAL not in summary(explorable)
    assert not explorable.gate._form.visible  # locked: the answer cannot be changed while it is saved
    assert explorable.state.prediction.commit("keep-both") is not None  # a second press changes nothing
    doc.run_until(lambda: prediction.committed)
    assert prediction.unlocked and not prediction.saving and FINAL in summary(explorable)
    assert classroom.store.prediction(CLASS, LEARNER, question_id(EXPLORABLE)).choice == "keep-erase"


def test_an_unreachable_store_keeps_the_gate_saving_never_final_until_it_is_back(classroom) -> None:
    """The store is down: the gate says not saved yet and stays locked; once it is back the retry makes it final."""
    explorable, recorder, doc = session(classroom)
    prediction = explorable.gate.prediction
    classroom.store.down = True
    commit(explorable, "keep-both")
    doc.run_until(lambda: prediction.delayed)
    assert SAVING_DELAYED in summary(explorable) and FINAL not in summary(explorable)
    assert not prediction.unlocked and recorder.notice.visible
    for _ in range(3):  # retries while it is down answer "still pending", and are tried again
        doc.run_until(lambda: len(doc.timeouts) == 1)
        doc.fire_timeouts()
        doc.run_until(lambda: recorder.in_flight == 0 and not doc.ticks)
        assert not prediction.committed and prediction.delayed
    classroom.store.down = False
    classroom.thread.submit(classroom.outbox.flush)  # what the store thread does every few seconds
    assert classroom.thread.drain()
    doc.fire_timeouts()
    doc.run_until(lambda: prediction.committed)
    assert FINAL in summary(explorable) and prediction.unlocked and not recorder.notice.visible
    stored = classroom.store.prediction(CLASS, LEARNER, question_id(EXPLORABLE))
    assert stored.choice == "keep-both"
    assert classroom.store.distribution(CLASS, question_id(EXPLORABLE)) == {"keep-both": 1}  # stored once


def test_an_answer_stored_earlier_is_what_becomes_final(classroom) -> None:
    """The store refuses a second commit (another tab committed first): the stored answer is shown as final."""
    explorable, recorder, doc = session(classroom)
    assert classroom.store.commit_prediction("00000000-0000-4000-8000-000000000001", CLASS, LEARNER,
                                             question_id(EXPLORABLE), "zero-both", "first tab", None, EXPLORABLE)
    commit(explorable, "keep-erase")
    prediction = explorable.gate.prediction
    doc.run_until(lambda: prediction.committed)
    assert prediction.choice == "zero-both" and prediction.note == "first tab"
    assert "it stands" in summary(explorable)


def test_check_answer_pressed_3000_times_queues_a_bounded_number_of_writes(classroom) -> None:
    """A session's store calls stay under `session_store_calls` while the store is busy; the newest answer still
    lands."""
    _explorable, recorder, doc = session(classroom)
    running, release = threading.Event(), threading.Event()
    classroom.thread.submit(lambda: (running.set(), release.wait(DEADLINE_S)))
    assert running.wait(DEADLINE_S)
    submitted = []
    real_submit = classroom.thread.submit
    classroom.thread.submit = lambda call, done=None, first=False: (submitted.append(call),
                                                                    real_submit(call, done, first))
    try:
        for press in range(3000):
            recorder.emit("checkpoint", {"checkpoint": "q1", "answer": press % 2, "correct": press % 2 == 1})
            recorder.emit("checkpoint", {"checkpoint": "q2", "answer": 1, "correct": True})  # the same each time
            assert recorder.in_flight <= settings().session_store_calls
    finally:
        release.set()
    doc.run_until(lambda: recorder.in_flight == 0)
    classroom.thread.submit = real_submit
    assert len(submitted) <= settings().session_store_calls + 2  # one waiting per checkpoint after the bound
    answers = stored_answers(classroom)
    assert len(answers) == len(submitted)
    assert [a for q, a in answers if q == "q2"] == [1]  # an identical answer is stored once
    assert [a for q, a in answers if q == "q1"][-1] == 1  # the last press (an odd one) is the one stored last


def test_a_repeated_identical_answer_is_not_queued_again(classroom) -> None:
    """Pressing "Check answer" again on the same answer sends nothing new; a different answer is sent."""
    _explorable, recorder, doc = session(classroom)
    for _ in range(50):
        recorder.emit("checkpoint", {"checkpoint": "q1", "answer": 2, "correct": False})
    recorder.emit("checkpoint", {"checkpoint": "q1", "answer": 0, "correct": True})
    doc.run_until(lambda: recorder.in_flight == 0)
    assert stored_answers(classroom) == [("q1", 2), ("q1", 0)]


def test_a_name_says_saved_only_once_the_store_has_it(classroom) -> None:
    """"Save name": "Saving…", then "Saved." once stored; with the store down, "Not saved yet", never "Saved."."""
    _, recorder, doc = session(classroom)
    _info, name, save, message, _notice = learner_bar(recorder).objects
    classroom.store.down = True
    name.value = "Ada"
    save.clicks += 1
    assert "Saving" in message.object
    doc.run_until(lambda: "Not saved yet" in message.object)
    assert "Saved." not in message.object
    classroom.store.down = False
    save.clicks += 1
    doc.run_until(lambda: "Saved." in message.object)
    assert classroom.store.display_name(CLASS, LEARNER) == "Ada"


@pytest.mark.parametrize("built_on", ["the loop", "a worker thread"])
def test_store_answers_reach_the_session_document_from_the_event_loop_thread_only(classroom, built_on) -> None:
    """A served session gets each store answer through the loop that serves it: the store thread never calls
    into the Bokeh document itself (Bokeh marks the current document on a process-wide stack there, which a
    callback of another session running at that moment would take for its own). Bokeh 3.9 builds the
    session on that loop; Bokeh 3.10 builds it on a worker thread, where no loop runs, and the loop is the one
    of the session's application."""
    import asyncio

    from bokeh.application import Application
    from bokeh.server.contexts import ApplicationContext, BokehServerContext, BokehSessionContext
    from tornado.ioloop import IOLoop

    callers: list[str] = []

    class ThreadNoting(SessionDocument):
        def add_next_tick_callback(self, callback: Callable[[], None]) -> None:
            callers.append(threading.current_thread().name)
            super().add_next_tick_callback(callback)

    async def main() -> None:
        doc = ThreadNoting()
        application = ApplicationContext(Application(), io_loop=IOLoop.current())  # held: the context is weak
        doc.session_context = BokehSessionContext("a-session", BokehServerContext(application), doc)
        learner = identify({COOKIE_NAME: sign(LEARNER, classroom.secret)}, {"class": CLASS}, classroom.secret)
        if built_on == "the loop":
            recorder = SessionRecorder(classroom, learner, doc=doc)
        else:
            recorder = await asyncio.to_thread(SessionRecorder, classroom, learner, None, doc)
        answers: list[object] = []
        for n in range(5):
            recorder._run(lambda n=n: n, answers.append)
        deadline = time.monotonic() + DEADLINE_S
        while len(answers) < 5:
            assert time.monotonic() < deadline, "the store thread did not answer in time"
            if not doc.run_ticks():
                await asyncio.sleep(0.01)  # lets the loop run the hand-offs from the store thread
        assert answers == [0, 1, 2, 3, 4]

    asyncio.run(main())
    assert callers == [threading.main_thread().name] * 5
