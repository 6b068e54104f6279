"""The SQLite store recovers by itself: a deleted file, a read-only or full file system, without a restart.

Each test breaks the database under a store that has pooled connections, as a serving process has,
checks that writes are refused (so the outbox keeps them and the pages say so) rather than lost or
written where nobody will find them, then fixes the cause and checks that the queued writes land,
once each, through fresh connections, and that a new store on the path (a restart) sees all of it.
"""

from __future__ import annotations

import csv
import io
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import event

from blocktrace.app.classroom import sqlite_file
from blocktrace.app.classroom.outbox import Outbox
from blocktrace.app.classroom.schema import SCHEMA_VERSION
from blocktrace.app.classroom.store import DB_FILE, EventStore, StoreUnavailable, default_url, new_event_id
from tests.mounts import read_only, small_disk

CLASS = "physics-3"
LESSON = "transformer-block"
QUESTION = "transformer-block-trace/prediction"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    folder.mkdir(mode=0o700)
    return folder


@pytest.fixture
def store(data_dir: Path) -> Iterator[EventStore]:
    with EventStore(default_url(data_dir)) as opened:
        opened.upgrade()
        yield opened


def stored_ids(url: str) -> list[str]:
    """The event ids in the database at ``url``, as a freshly started server would read them."""
    with EventStore(url) as fresh:
        return [row["event_id"] for row in csv.DictReader(io.StringIO(fresh.export_csv()))]


def delete_database(data_dir: Path) -> None:
    for path in data_dir.glob(DB_FILE + "*"):
        path.unlink()


def record(target: EventStore | Outbox, n: int, learner: str = "ada") -> tuple[str, bool | None]:
    event_id = new_event_id()
    return event_id, target.record(event_id, CLASS, learner, "param", {"n": n}, LESSON)


def test_a_deleted_file_is_rebuilt_from_the_open_copy(store: EventStore, data_dir: Path):
    """`rm blocktrace.db*` while serving: the next call rebuilds the file from the copy still open; nothing is lost."""
    before = [record(store, n)[0] for n in range(5)]
    assert store.commit_prediction(new_event_id(), CLASS, "ada", QUESTION, "keep-erase", None, LESSON, None)
    delete_database(data_dir)
    assert not (data_dir / DB_FILE).exists()

    after, stored = record(store, 5)
    assert stored is True
    assert (data_dir / DB_FILE).exists()
    assert (data_dir / DB_FILE).stat().st_mode & 0o777 == 0o600
    assert "rebuilt it from the copy it still had open" in store.file_notice
    ids = stored_ids(store.engine.url.render_as_string())  # what a restart would find
    assert set(before) | {after} <= set(ids) and len(ids) == 7  # the five, the prediction and the new one
    assert store.summary(CLASS, LESSON)["distributions"] == {QUESTION: {"keep-erase": 1}}
    with sqlite3.connect(data_dir / DB_FILE) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    raw.close()


def test_a_deleted_file_stops_the_old_counts_before_the_teacher_reads_them(store: EventStore, data_dir: Path):
    """The teacher's summary is never read from a file that is no longer at the path."""
    record(store, 0, learner="ada")
    delete_database(data_dir)
    (data_dir / DB_FILE).write_bytes(b"")  # someone put an empty file there: an empty database
    assert store.summary(CLASS, LESSON)["joined"] == 0  # the file at the path, not the deleted one
    assert stored_ids(store.engine.url.render_as_string()) == []


def test_a_deleted_file_with_no_copy_open_is_recreated_with_its_schema(store: EventStore, data_dir: Path):
    """With no connection open there is nothing to rebuild from: a new file with the full schema, and a notice."""
    record(store, 0)
    store.close()
    delete_database(data_dir)
    event_id, stored = record(store, 1)
    assert stored is True
    assert store.schema_version() == SCHEMA_VERSION
    assert stored_ids(store.engine.url.render_as_string()) == [event_id]
    assert "no copy was open" in store.file_notice


def test_a_file_that_cannot_be_rebuilt_yet_keeps_every_write(store: EventStore, data_dir: Path, monkeypatch):
    """Deleted while the disk is full: writes are refused and queued; once a rebuild works, all of them land."""
    outbox = Outbox(store)
    first, _ = record(outbox, 0)
    delete_database(data_dir)
    real_rebuild = sqlite_file.rebuild

    def no_space(*_args) -> bool:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sqlite_file, "rebuild", no_space)
    queued = [record(outbox, n) for n in range(1, 4)]
    assert [stored for _, stored in queued] == [None] * 3
    with pytest.raises(StoreUnavailable, match="deleted and could not be rebuilt"):
        store.summary(CLASS, LESSON)  # the teacher is told, not shown the deleted file's counts
    assert outbox.flush() == 3
    assert "cannot be rebuilt" in store.file_notice

    monkeypatch.setattr(sqlite_file, "rebuild", real_rebuild)
    assert outbox.flush() == 0
    assert stored_ids(store.engine.url.render_as_string()) == [first, *(event_id for event_id, _ in queued)]


def test_two_processes_on_a_deleted_file_rebuild_it_once(data_dir: Path):
    """Two server processes (two stores, two pools) on one folder: one rebuilds, the other follows; none lost."""
    url = default_url(data_dir)
    with EventStore(url) as one, EventStore(url) as two:
        written = [record(one, 0)[0], record(two, 1)[0]]
        delete_database(data_dir)
        for n in range(2, 8):
            event_id, stored = record(one if n % 2 else two, n)
            assert stored is True
            written.append(event_id)
        notices = sorted(s.file_notice for s in (one, two))
        assert "rebuilt it from the copy" in notices[0] and "was replaced" in notices[1]  # one rebuilt, one followed
    assert sorted(stored_ids(url)) == sorted(written)


def test_a_read_only_file_system_then_writable_again(store: EventStore, data_dir: Path):
    """A read-only volume: writes queue; once it is writable, they land without a restart (no read-only pool)."""
    outbox = Outbox(store)
    first, _ = record(outbox, 0)
    other = sqlite3.connect(data_dir / DB_FILE)  # another server process on the folder keeps its journal files
    try:
        other.execute("SELECT count(*) FROM events").fetchone()
        store.close()  # the store's next connections are opened on the read-only volume: SQLite opens them read-only
        with read_only(data_dir):
            queued = [record(outbox, n)[0] for n in range(1, 4)]
            assert outbox.pending == 3
            assert outbox.flush() == 3
            assert store.summary(CLASS, LESSON)["joined"] == 1  # reading works: those connections are pooled
    finally:
        other.close()
    assert outbox.flush() == 0
    assert record(outbox, 4)[1] is True
    assert stored_ids(store.engine.url.render_as_string())[:4] == [first, *queued]


def test_starting_on_a_read_only_folder_then_writable(data_dir: Path):
    """A server started on a read-only data folder (no database yet) writes once the folder is writable."""
    url = default_url(data_dir)
    with EventStore(url) as store:
        outbox = Outbox(store)
        with read_only(data_dir):
            with pytest.raises(StoreUnavailable):
                store.upgrade()
            queued = [record(outbox, n)[0] for n in range(3)]
            assert outbox.flush() == 3
        assert outbox.flush() == 0
        assert stored_ids(url) == queued


def test_a_full_disk_then_space_again(tmp_path: Path):
    """A real full disk (tmpfs): writes queue, the page is told; once space is freed they land, no restart."""
    folder = tmp_path / "small"
    with small_disk(folder, 4 * 1024 * 1024) as filler:
        data_dir = folder / "data"
        url = default_url(data_dir)
        with EventStore(url) as store:
            outbox = Outbox(store)
            first, _ = record(outbox, 0)
            filler()
            big = {"text": "x" * 1900}
            ids = []
            for _ in range(200):  # past the free pages SQLite already had
                event_id = new_event_id()
                ids.append(event_id)
                if outbox.record(event_id, CLASS, "ada", "explanation", big, LESSON) is None:
                    break
            assert outbox.pending == 1, "the disk never filled up"
            ids.append(record(outbox, 1)[0])
            assert outbox.flush() == 2
            filler.release()
            assert outbox.flush() == 0
            assert record(outbox, 2)[1] is True
            assert stored_ids(url)[: len(ids) + 1] == [first, *ids]
            os.sync()


def test_pooled_connections_opened_while_full_are_not_kept(store: EventStore):
    """A connection that failed for lack of space is dropped, so one opened while full does not outlive it."""
    full = [True]

    def limit_pages(dbapi_connection: sqlite3.Connection, _record: object) -> None:
        if full[0]:
            pages = dbapi_connection.execute("PRAGMA page_count").fetchone()[0]
            dbapi_connection.execute(f"PRAGMA max_page_count = {pages}")  # this connection may not grow the file

    event.listen(store.engine, "connect", limit_pages)
    store.close()
    outbox = Outbox(store)
    big = {"parts": ["x" * 2000] * 7}  # as large as an event may be
    assert outbox.record(new_event_id(), CLASS, "ada", "explanation", big, LESSON) is None
    assert outbox.flush() == 1
    full[0] = False  # space is back; no store.close(): the pool must not hand back the limited connection
    assert outbox.flush() == 0
