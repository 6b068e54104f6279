"""What the teacher's dashboard says about the class database: writes waiting and why, a hung database,
a deleted file; nothing once all is saved again."""

from __future__ import annotations

import threading
from pathlib import Path

from blocktrace.app.classroom.learner import Classroom
from blocktrace.app.classroom.store import EventStore, default_url, new_event_id
from blocktrace.app.classroom.store_status import store_notices, store_status_html
from blocktrace.app.settings import settings
from tests.mounts import read_only

CLASS = "physics-3"


def make_classroom(data_dir: Path) -> Classroom:
    store = EventStore(default_url(data_dir))
    store.upgrade()
    return Classroom(store, b"s" * 32)


def test_waiting_writes_are_counted_with_their_reason_until_saved(tmp_path: Path):
    """A read-only disk: the dashboard says how many actions wait and why; once they are saved it says nothing."""
    data_dir = tmp_path / "data"
    classroom = make_classroom(data_dir)
    assert store_notices(classroom) == [] and store_status_html(classroom) == ""
    classroom.store.close()  # its next connections are opened on the read-only volume
    with read_only(data_dir):
        for n in range(2):
            assert classroom.outbox.record(new_event_id(), CLASS, "ada", "param", {"n": n}) is None
        [notice] = store_notices(classroom)
        assert classroom.outbox.last_error.startswith("could not record an event")
        assert notice.startswith(f"2 learner actions not saved yet ({classroom.outbox.last_error}).")
        assert "a restart of the server now would lose them" in notice
    assert classroom.outbox.flush() == 0
    assert store_notices(classroom) == []
    classroom.store.close()


def test_a_hung_database_and_a_deleted_file_are_told_escaped(tmp_path: Path):
    """A store call that does not return is told; the file notice is shown as text, never as HTML."""
    now = [0.0]
    classroom = make_classroom(tmp_path / "data")
    classroom.thread.clock = lambda: now[0]
    running, release = threading.Event(), threading.Event()
    classroom.thread.submit(lambda: (running.set(), release.wait(10)))
    assert running.wait(10)
    now[0] = settings().store_stalled_after + 1
    classroom.store.file_notice = "The file <b>x</b> was deleted"
    try:
        notices = store_notices(classroom)
        assert notices[0].startswith("The class database is not answering")
        assert notices[-1] == "The file <b>x</b> was deleted"
        html = store_status_html(classroom)
        assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>" not in html and 'role="alert"' in html
    finally:
        release.set()
        assert classroom.thread.drain()
        classroom.store.close()
