"""The store thread: calls run in order off the caller's thread; outages are answers; hangs are noticed;
a handler's awaited write lands after the writes queued before it."""

from __future__ import annotations

import asyncio
import csv
import io
import threading
from datetime import UTC, datetime, timedelta

import pytest

from blocktrace.app.classroom.classroom import ClassroomSettings, configure, current
from blocktrace.app.classroom.outbox import Outbox
from blocktrace.app.classroom.schema import SCHEMA_VERSION
from blocktrace.app.classroom.store import EventStore, StoreUnavailable, new_event_id
from blocktrace.app.classroom.store_thread import StoreThread
from blocktrace.app.settings import settings


def make(tmp_path, refresh_s: float = 3600.0) -> tuple[EventStore, StoreThread]:
    store = EventStore(f"sqlite:///{tmp_path / 'class.db'}")
    store.upgrade()
    return store, StoreThread(Outbox(store), refresh_s=refresh_s)


def test_calls_run_in_order_on_another_thread_and_answer_back(tmp_path):
    """Submitted calls run one at a time, in order, off the caller's thread, each answered back."""
    store, worker = make(tmp_path)
    seen: list[tuple[str, object]] = []
    caller = threading.get_ident()
    for i in range(20):
        worker.submit(lambda i=i: (i, threading.get_ident() != caller), lambda result: seen.append(result))
    assert worker.drain()
    assert seen == [(i, True) for i in range(20)]


def test_an_outage_or_a_bug_is_an_answer_and_later_calls_still_run(tmp_path):
    """A StoreUnavailable or a bug in one call is its answer and does not stop the calls after it."""
    store, worker = make(tmp_path)
    answers: list[object] = []

    def outage():
        raise StoreUnavailable("down")

    def bug():
        raise KeyError("oops")

    for call in (outage, bug, lambda: "fine"):
        worker.submit(call, answers.append)
    assert worker.drain()
    assert isinstance(answers[0], StoreUnavailable) and isinstance(answers[1], KeyError) and answers[2] == "fine"


def hung(tmp_path) -> tuple[StoreThread, list[float], threading.Event]:
    """A store thread on a clock the test moves, busy in a call that returns once `release` is set."""
    now = [0.0]
    worker = StoreThread(Outbox(EventStore(f"sqlite:///{tmp_path / 'class.db'}")), refresh_s=3600.0,
                         clock=lambda: now[0])
    running, release = threading.Event(), threading.Event()
    worker.submit(lambda: (running.set(), release.wait(10)))
    assert running.wait(10)
    return worker, now, release


def test_a_call_that_does_not_return_counts_as_stalled_after_a_while(tmp_path):
    """A call running past `store_stalled_after` makes stalled() true, and it is false again once it returns."""
    worker, now, release = hung(tmp_path)
    assert not worker.stalled()
    now[0] = settings().store_stalled_after + 0.1
    assert worker.stalled()
    release.set()
    assert worker.drain()
    assert not worker.stalled()


def test_the_refresh_reads_every_revealed_question_once_for_the_process(tmp_path):
    """The periodic refresh copies every revealed question's distribution for the pages to read."""
    store, worker = make(tmp_path, refresh_s=0.05)
    store.join("c1", "l1")
    assert store.commit_prediction(new_event_id(), "c1", "l1", "q", "A", None, "lesson", "x")
    store.reveal("c1", "q")
    refreshed = threading.Event()
    original = worker._refresh

    def refresh():
        original()
        refreshed.set()

    worker._refresh = refresh
    worker.submit(lambda: None)
    assert refreshed.wait(10)
    assert worker.reveals == {("c1", "q"): {"A": 1}}


def test_an_exercise_result_taken_by_another_process_reaches_this_one(tmp_path):
    """With --num-procs the report and the student's open lesson page may be in different processes: each
    process's refresh reads the newest results from the database, newest per learner and exercise."""
    store, here = make(tmp_path)
    elsewhere = EventStore(f"sqlite:///{tmp_path / 'class.db'}")  # another process's connection to the same file
    first = {"id": "ex", "passed": False, "tests_passed": 3, "tests_total": 12}
    second = {"id": "ex", "passed": True, "tests_passed": 12, "tests_total": 12}
    elsewhere.record("a" * 32, "p3", "0" * 32, "exercise", first, "lesson", None)
    elsewhere.record("b" * 32, "p3", "0" * 32, "exercise", second, "lesson", None)
    elsewhere.record("c" * 32, "p3", "1" * 32, "checkpoint", {"checkpoint": "q", "answer": 1}, "lesson", None)
    assert here.result("p3", "0" * 32, "ex") is None
    here._refresh()
    assert here.result("p3", "0" * 32, "ex") == second, "the newer of the two"
    assert here.result("p3", "1" * 32, "ex") is None, "only exercise results"
    early = datetime.now(UTC) - timedelta(hours=1)
    here.took_result(("p3", "0" * 32, "ex"), early, first)  # an older result arriving late changes nothing
    assert here.result("p3", "0" * 32, "ex") == second
    store.archive("p3")  # a new epoch: last lesson's results are not this one's
    fresh = StoreThread(Outbox(store), refresh_s=3600.0)
    fresh._refresh()
    assert fresh.result("p3", "0" * 32, "ex") is None
    elsewhere.close()


class SwitchableStore(EventStore):
    """A SQLite store whose learner writes fail while `down`, as a database that went away does."""

    down = False

    def record(self, *args, **kwargs):
        if self.down:
            raise StoreUnavailable("the database cannot be reached (test)")
        return super().record(*args, **kwargs)


def test_an_awaited_write_runs_on_the_store_thread_and_returns_once_committed(tmp_path):
    """`write` runs the call on the store thread and gives back its result after the commit, as a new
    connection reads it."""
    store, worker = make(tmp_path)
    ran_on: list[str] = []

    def archive(code: str) -> int:
        ran_on.append(threading.current_thread().name)
        return store.archive(code)

    assert asyncio.run(worker.write(archive, "p3")) == 2
    assert ran_on == ["blocktrace-store"]
    elsewhere = EventStore(f"sqlite:///{tmp_path / 'class.db'}")
    assert elsewhere.epoch("p3") == 2
    elsewhere.close()


def test_an_awaited_write_raises_what_the_call_raised(tmp_path):
    """A handler awaiting `write` gets the store's ValueError or StoreUnavailable as an exception, not a result."""
    store, worker = make(tmp_path)
    with pytest.raises(ValueError, match="not a class code"):
        asyncio.run(worker.write(store.archive, "no spaces allowed"))

    def outage() -> None:
        raise StoreUnavailable("down")

    with pytest.raises(StoreUnavailable, match="down"):
        asyncio.run(worker.write(outage))
    assert asyncio.run(worker.write(store.epoch, "p3")) is None, "the thread still serves later writes"


def test_a_teacher_write_lands_after_the_learner_writes_queued_before_it(tmp_path):
    """While learners' events wait in the outbox, an awaited archive is refused and not queued; once the
    database is back it runs after them, so they stay in the epoch they were made in."""
    store = SwitchableStore(f"sqlite:///{tmp_path / 'class.db'}")
    store.upgrade()
    worker = StoreThread(Outbox(store), refresh_s=3600.0)
    store.down = True
    assert worker.outbox.record(new_event_id(), "p3", "ada", "explanation", {"text": "before"}, "lesson") is None
    with pytest.raises(StoreUnavailable, match="1 earlier write still waits"):
        asyncio.run(worker.write(store.archive, "p3"))
    assert worker.outbox.pending == 1 and store.epoch("p3") is None, "the archive neither ran nor queued"

    store.down = False
    assert asyncio.run(worker.write(store.archive, "p3")) == 2
    assert worker.outbox.pending == 0
    rows = list(csv.DictReader(io.StringIO(store.export_csv("p3"))))
    assert [(row["epoch"], row["payload"]) for row in rows] == [("1", '{"text":"before"}')], \
        "in the epoch it was made in"
    assert store.learner_count("p3") == 0, "the archive came after it: the new epoch starts empty"


def test_a_worker_s_classroom_checks_its_schema_on_the_store_thread(tmp_path, monkeypatch):
    """The first `current()` of a process (called on the event loop) leaves the schema upgrade to the store
    thread, so the loop never waits for the database."""
    ran_on: list[str] = []
    upgrade = EventStore.upgrade

    def recorded(store: EventStore, *args, **kwargs) -> int:
        ran_on.append(threading.current_thread().name)
        return upgrade(store, *args, **kwargs)

    monkeypatch.setattr(EventStore, "upgrade", recorded)
    configure(ClassroomSettings(db_url=f"sqlite:///{tmp_path / 'class.db'}", secret=b"s" * 32))
    try:
        room = current()
        assert room is not None and current() is room, "one classroom per process"
        assert room.thread.drain()
        assert ran_on and set(ran_on) == {"blocktrace-store"}, "(the thread's first refresh may upgrade first)"
        assert room.store.schema_version() == SCHEMA_VERSION
    finally:
        configure(None)
        room.store.close()


def test_an_awaited_write_is_refused_at_once_while_a_call_hangs(tmp_path):
    """While the store thread is stuck in a call (a database that does not answer), a teacher's form or a report
    is told so at once instead of waiting behind it, and nothing of it runs later."""
    worker, now, release = hung(tmp_path)
    now[0] = settings().store_stalled_after + 0.1
    ran: list[str] = []
    with pytest.raises(StoreUnavailable, match="not answering"):
        asyncio.run(worker.write(lambda: ran.append("archive")))
    release.set()
    assert worker.drain()
    assert ran == []
    worker.outbox.store.close()


def test_calls_submitted_together_share_one_group_call_ahead_of_the_waiting_ones(tmp_path):
    """Items submitted together while the thread is busy go into one call of their group, before the calls
    that were already waiting; each gets its own result, in order."""
    _store, worker = make(tmp_path)
    running, release = threading.Event(), threading.Event()
    worker.submit(lambda: (running.set(), release.wait(10)))
    assert running.wait(10)
    order: list[object] = []
    groups: list[list[int]] = []

    def group(items: list[int]) -> list[int]:
        groups.append(list(items))
        order.append("group")
        return [item * 10 for item in items]

    worker.submit(lambda: order.append("waiting"))
    answers: list[tuple[int, int]] = []
    for item in range(5):
        worker.submit_together(group, item, lambda result, item=item: answers.append((item, result)))
    release.set()
    assert worker.drain()
    assert groups == [[0, 1, 2, 3, 4]]
    assert order == ["group", "waiting"]
    assert answers == [(i, i * 10) for i in range(5)]
    worker.submit_together(group, 7, lambda result: answers.append((7, result)))  # a quiet thread: a group of one
    assert worker.drain()
    assert groups[-1] == [7] and answers[-1] == (7, 70)


def test_a_group_that_fails_answers_each_item_with_the_error(tmp_path):
    _store, worker = make(tmp_path)
    running, release = threading.Event(), threading.Event()
    worker.submit(lambda: (running.set(), release.wait(10)))
    assert running.wait(10)

    def group(items: list[int]) -> list[int]:
        raise StoreUnavailable("the database cannot be reached (test)")

    answers: list[object] = []
    for item in range(3):
        worker.submit_together(group, item, answers.append)
    release.set()
    assert worker.drain()
    assert len(answers) == 3 and all(isinstance(a, StoreUnavailable) for a in answers)
