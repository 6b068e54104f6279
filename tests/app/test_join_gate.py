"""Who may join which class, as a server process decides it: from the classes its store thread reads from the
class database (no database read on the event loop), the teacher's open-joining switch, and an LMS's signed launch."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocktrace.app.classroom.classroom import Classroom
from blocktrace.app.classroom.identity import CLASS_COOKIE, COOKIE_NAME, sign
from blocktrace.app.classroom.learner import identify
from blocktrace.app.classroom.store import EventStore, default_url
from blocktrace.app.lti.who import Launched, token
from tests.pg import free_port

SECRET = b"join-gate-secret" * 2
LEARNER = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def classroom(tmp_path: Path):
    store = EventStore(default_url(tmp_path))
    store.open_class("period3")  # the teacher opened it
    room = Classroom(store, SECRET)
    room.thread.submit(room.thread.read_classes)  # as classroom.current() does for a new process
    assert room.thread.classes_read.wait(30)
    yield room
    room.thread.drain()
    store.close()


def learner_class(room: Classroom, query: dict[str, str], cookie: str | None = None) -> str:
    cookies = {COOKIE_NAME: sign(LEARNER, SECRET), **({CLASS_COOKIE: cookie} if cookie else {})}
    return identify(cookies, query, SECRET, room.admits).class_code


def test_a_class_the_teacher_opened_is_joined_in_any_spelling_and_no_other(classroom: Classroom) -> None:
    """"Period3" joins the teacher's period3; a crafted link or cookie for a class nobody opened joins none."""
    assert learner_class(classroom, {"class": "Period3 "}) == "period3"
    assert learner_class(classroom, {"class": "chem7"}) == "default"
    assert learner_class(classroom, {}, cookie="chem7") == "default"
    assert learner_class(classroom, {"class": "chem7"}, cookie="PERIOD3") == "period3"  # the last good class kept


def test_the_teachers_switch_lets_students_start_classes_in_every_process(classroom: Classroom) -> None:
    """Open joining is kept in the class database: a process follows it from its next read of the classes."""
    classroom.store.set_open_joining(True)  # as another process's teacher's room would
    classroom.thread.submit(classroom.thread.read_classes)
    classroom.thread.drain()
    assert learner_class(classroom, {"class": "chem7"}) == "chem7"
    classroom.store.set_open_joining(False)
    classroom.thread.submit(classroom.thread.read_classes)
    classroom.thread.drain()
    assert learner_class(classroom, {"class": "chem7"}) == "default"


def test_an_lms_launch_lets_its_learner_into_its_class_before_any_read(classroom: Classroom) -> None:
    """A class named by a launch token this server signed is let in even before this process has read it."""
    launched = Launched(LEARNER, "lti-0123456789abcdef0123", False, "/")
    assert learner_class(classroom, {"lti": token(SECRET, launched)}, cookie=launched.class_code) == launched.class_code
    assert learner_class(classroom, {"lti": "forged"}, cookie=launched.class_code) == "default"


def test_with_the_database_down_at_start_a_kept_class_stays_and_a_new_code_waits() -> None:
    """Nothing read yet: the class the server put in the cookie before is kept; a new code is not let in."""
    store = EventStore(f"postgresql://blocktrace@127.0.0.1:{free_port()}/nothing")  # nothing listens there
    room = Classroom(store, SECRET)
    room.thread.submit(room.thread.read_classes)
    room.thread.drain()
    try:
        assert room.thread.classes is None
        assert learner_class(room, {}, cookie="period3") == "period3"
        assert learner_class(room, {"class": "period4"}) == "default"
    finally:
        store.close()


def test_each_worker_reads_the_class_list_as_its_server_starts(tmp_path: Path) -> None:
    """The server's load hook opens the process's classroom, whose store thread then reads the classes: a class
    the teacher opened is let in from the first page request, not after a first request has waited for the read."""
    from blocktrace.app.classroom import classroom
    from blocktrace.app.server.build_pacing import TakeTurns

    store = EventStore(default_url(tmp_path))
    store.open_class("period3")
    store.close()
    classroom.configure(classroom.ClassroomSettings(default_url(tmp_path), SECRET))
    opened = None
    try:
        TakeTurns().on_server_loaded(None)
        opened = classroom._classroom  # opened by the hook, before any page asked
        assert opened is not None and opened.thread.classes_read.wait(30)
        assert opened.admits("period3") and not opened.admits("chem7")
        assert classroom.current() is opened
    finally:
        classroom.configure(None)
        if opened is not None:
            opened.thread.drain()
            for sender in opened.senders:
                sender.stop()
            opened.store.close()
