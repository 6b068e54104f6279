"""Which file an SQLite connection has open, and rebuilding a deleted database from a connection that still has it.

On Linux a connection keeps a deleted file open: its writes succeed into a file nobody can open any
more, every reader of that connection sees the old counts, and a restart finds nothing. So the store
remembers, per connection, the file (device and inode) it opened, and compares it with what the path
names now before each transaction. A connection whose file was deleted still reads the whole database
(its write-ahead log is open too): ``rebuild`` copies it back to the path with SQLite's backup API.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from pathlib import Path

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
