"""The SQLite file under the classroom store: which file a connection has open, and rebuilding a deleted one.

On Linux a connection keeps a deleted file open: its writes succeed into a file nobody can open any
more, every reader of that connection sees the old counts, and a restart finds nothing. So the store
remembers, per connection, the file (device and inode) it opened, and ``WatchedFile`` compares it with
what the path names now before each transaction. A connection whose file was deleted still reads the
whole database (its write-ahead log is open too): ``rebuild`` copies it back to the path with SQLite's
backup API. A file deleted while no connection had it open cannot be rebuilt: the store starts a new,
empty one, and ``WatchedFile`` says so to the teacher.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, event

from blocktrace.app.classroom.store_engine import StoreUnavailable

__all__ = ["FILE_KEY", "READ_ONLY_KEY", "FileId", "WatchedFile", "file_id", "rebuild"]

log = logging.getLogger(__name__)

FileId = tuple[int, int]  # (st_dev, st_ino)
FILE_KEY = "blocktrace_file"  # key of the opened file's id in SQLAlchemy's per-connection info
READ_ONLY_KEY = "blocktrace_read_only"  # key of "the file was not writable when this connection opened it"


def file_id(path: str | Path) -> FileId | None:
    """The file the path names now, or None if there is none."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def rebuild(connection: sqlite3.Connection, path: str | Path) -> bool:
    """Copy the database open in ``connection`` to ``path``, which must not exist; False if another got there first.

    Waits for the write lock first, so every transaction begun on the old file before it is in
    the copy; a later one finds the file changed when it begins (the store checks) and is refused.
    The copy is written beside the path (mode 0600) and linked into place, so two processes
    rebuilding at once make one file and no reader ever sees a half-written one.
    """
    connection.execute("BEGIN IMMEDIATE")
    connection.execute("COMMIT")
    target = Path(path)  # its folder must exist: a folder that is gone may be a volume not mounted right now
    aside = target.with_name(f".{target.name}.rebuild-{uuid.uuid4().hex}")
    os.close(os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))  # an empty file is an empty database
    try:
        copy = sqlite3.connect(aside)
        try:
            connection.backup(copy)
        finally:
            copy.close()
        try:
            os.link(aside, target)
        except FileExistsError:
            return False
        return True
    finally:
        aside.unlink(missing_ok=True)


class WatchedFile:
    """The SQLite file at a path, watched for deletion or replacement while the server runs.

    ``watch(engine)`` makes every new connection remember the file it opened; ``connection`` then
    hands out only connections on the file the path names now, rebuilding a deleted file first from
    a connection that still has it. What happened goes to ``notify``, a sentence for the teacher.
    """

    def __init__(self, path: str | Path, notify: Callable[[str], None]):
        self.path = Path(path)
        self.schema_file: FileId | None = None  # the file the store last ensured its schema on
        self._notify = notify
        self._lock = threading.Lock()  # one rebuild at a time
        self._changes = 0  # how many changes of the file were noted
        self._replacement_seen: FileId | None = None

    def watch(self, engine: Engine) -> None:
        """Make each new connection of `engine` remember the file it opened and whether it could write it."""
        path = self.path

        def remember_file(_dbapi_connection: sqlite3.Connection, record: Any) -> None:
            record.info[FILE_KEY] = file_id(path)
            record.info[READ_ONLY_KEY] = not os.access(path, os.W_OK)  # then SQLite opened it read-only

        event.listen(engine, "connect", remember_file)

    def schema_is_current(self) -> bool:
        """True while the path names the file the schema was last ensured on."""
        return file_id(self.path) == self.schema_file

    def ensure_schema(self, ready: bool, upgrade: Callable[[], None]) -> None:
        """Unless the schema is `ready` on the file there now, run `upgrade` (which sets ``schema_file``);
        say so if the file was deleted with no copy open, so that it starts a new, empty one."""
        now = file_id(self.path)
        if ready and now == self.schema_file:
            return
        had_file, changes = self.schema_file, self._changes
        upgrade()
        if had_file is not None and now is None and self._changes == changes:
            # Deleted while no connection had it open: there was nothing to rebuild it from.
            self._note(f"The class database file {self.path} was deleted and no copy was open: the server "
                       "started a new, empty one. Answers saved before then are not in it (a backup of the file "
                       "would have them).")

    def holds(self, conn: Connection) -> bool:
        """True if `conn` has the file the path names now open."""
        return conn.info.get(FILE_KEY) == file_id(self.path)

    def connection(self, engine: Engine, write: bool, attempts: int) -> Connection:
        """A pooled connection on the file the path names now.

        For a write, not one that SQLite opened read-only (it does so, silently and for good, when
        the file could not be opened for writing): a fresh one, once the file is writable again.
        """
        for _attempt in range(attempts):  # each pooled one may be stale
            conn = engine.connect()
            if write and conn.info.get(READ_ONLY_KEY):
                conn.invalidate()
                conn.close()
                if not os.access(self.path, os.W_OK):
                    raise StoreUnavailable(f"the database file {self.path} is read-only")
                continue
            if self.holds(conn):
                return conn
            try:
                self._changed(conn)
            except BaseException:
                conn.close()  # kept in the pool: it may be the only copy of a deleted file
                raise
            conn.invalidate()  # the next checkout opens the file at the path
            conn.close()
        raise StoreUnavailable("could not open the database file: it keeps changing")

    def _changed(self, stale: Connection) -> None:
        """The file under ``stale`` is no longer the one at the path: rebuild it if it was deleted."""
        with self._lock:
            self.schema_file = None  # check the schema of whatever file is there now
            when = datetime.now(UTC).strftime("%H:%M UTC")
            now = file_id(self.path)
            if now is not None:  # replaced: use the file there now
                if now != self._replacement_seen:
                    self._replacement_seen = now
                    self._note(f"The class database file {self.path} was replaced at about {when} (rebuilt by "
                               "another server process after it was deleted, or restored from a backup); the "
                               "server now uses the file that is there.")
                return
            try:
                rebuilt = rebuild(stale.connection.dbapi_connection, self.path)
            except (OSError, sqlite3.Error) as error:
                self._note(f"The class database file {self.path} was deleted or moved at about {when} and cannot "
                           f"be rebuilt ({error}): answers wait in the server's memory.")
                raise StoreUnavailable(f"the database file {self.path} was deleted and could not be rebuilt: "
                                       f"{error}") from error
            if rebuilt:
                self._note(f"The class database file {self.path} was deleted at about {when}; the server rebuilt "
                           "it from the copy it still had open, so nothing saved was lost.")

    def _note(self, notice: str) -> None:
        self._changes += 1
        log.warning("%s", notice)
        self._notify(notice)
