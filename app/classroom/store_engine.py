"""Which database the classroom store talks to, how it connects, and which failures count as an outage.

One pooled SQLAlchemy engine for an SQLite file or PostgreSQL (psycopg 3). On SQLite every connection
uses write-ahead logging and full sync (a commit is on disk before it returns), and a writer takes the
write lock at BEGIN, where the busy timeout applies. ``available`` turns "the database is down, locked
too long, full or read-only" into ``StoreUnavailable`` and lets bugs (a typo in SQL) through. After a
failure that breaks an SQLite file under its connections, no pooled connection is reused: SQLite keeps
a connection it opened read-only read-only for good.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import URL, Connection, Engine, create_engine, event, exc
from sqlalchemy.engine import make_url

from blocktrace.app.settings import settings

__all__ = [
    "DB_FILE", "WRITE", "StoreUnavailable", "as_utc",
    "available", "default_url", "make_engine",
]

DB_FILE = "blocktrace.db"
WRITE = "blocktrace_write"  # execution option: this transaction will write (BEGIN IMMEDIATE on SQLite)


class StoreUnavailable(Exception):
    """The database cannot be reached or written just now: down, locked too long, full or read-only.

    The write that raised it may or may not have been committed (a connection can fail after
    the commit and before its acknowledgement): retry later with the same event id, as the
    ``Outbox`` does, and it is stored exactly once. The SQLAlchemy error is ``__cause__``.
    """


def default_url(data_dir: Path) -> str:
    """The app's default store: an SQLite file in ``data_dir`` (created, mode 0700, if missing)."""
    data_dir = Path(data_dir)
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    return f"sqlite:///{(data_dir / DB_FILE).resolve()}"


def make_engine(url: str | URL, pool_size: int = 5, max_overflow: int = 10) -> Engine:
    """A pooled, thread-safe engine for an SQLite file or PostgreSQL (psycopg 3) URL."""
    parsed = make_url(url)
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")  # `--db postgresql://...` means psycopg 3
    pool = dict(pool_size=pool_size, max_overflow=max_overflow, pool_timeout=settings().db_pool_timeout,
                pool_pre_ping=True)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if parsed.database in (None, "", ":memory:") or parsed.query.get("mode") == "memory":
            raise ValueError("the classroom store needs an SQLite file, not an in-memory database")
        engine = create_engine(parsed, **pool)  # sqlite_file.WatchedFile.watch adds what follows the file
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
        event.listen(engine, "handle_error", _drop_failed_connections)
        return engine
    if backend == "postgresql":
        return create_engine(parsed, connect_args={"connect_timeout": settings().db_connect_timeout}, **pool)
    raise ValueError(f"the classroom store supports sqlite and postgresql URLs, not {parsed.drivername}")


def as_utc(moment: datetime) -> datetime:
    """A time read back from the database, in UTC (SQLite gives it back without its zone)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


@contextmanager
def available(action: str) -> Iterator[None]:
    """Turn "the database is not there or cannot write" into StoreUnavailable; let bugs through."""
    try:
        yield
    except _UNAVAILABLE as error:
        if not _is_outage(error):
            raise
        raise StoreUnavailable(f"could not {action}: {getattr(error, 'orig', None) or error}") from error
    except exc.DBAPIError as error:
        if error.connection_invalidated:
            raise StoreUnavailable(f"could not {action}: the connection was lost ({error.orig})") from error
        raise


# Private API ------------------------------------------------------------------------------------

def _sqlite_connect(dbapi_connection: sqlite3.Connection, _record: object) -> None:
    # SQLAlchemy emits BEGIN itself (see _sqlite_begin): sqlite3's own transaction handling
    # would leave SELECTs and DDL outside transactions.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {settings().sqlite_busy_timeout_ms}")
        mode = _set_wal(cursor)
        if str(mode).lower() != "wal":
            raise sqlite3.OperationalError(f"SQLite could not use write-ahead logging here (journal mode {mode})")
        cursor.execute("PRAGMA synchronous = FULL")  # a commit is on disk before it returns
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()


def _set_wal(cursor: sqlite3.Cursor) -> str:
    """Switch to write-ahead logging, waiting out another process doing the same on a new file.

    Changing the journal mode needs a lock that SQLite's busy timeout does not wait for, so several
    workers (`--num-procs`) opening a new database at once would fail with "database is locked".
    """
    deadline = time.monotonic() + settings().sqlite_busy_timeout_ms / 1000
    delay = 0.01
    while True:
        try:
            return cursor.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


def _sqlite_begin(conn: Connection) -> None:
    # A writer takes the write lock at BEGIN, where busy_timeout applies; a deferred BEGIN that
    # reads and then writes can fail at once with SQLITE_BUSY when another writer got in between.
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(WRITE) else "BEGIN")


_UNAVAILABLE = (exc.OperationalError, exc.InterfaceError, exc.TimeoutError)
# sqlite3 raises OperationalError for a typo in SQL too; only these primary result codes mean
# the database is unavailable: BUSY, LOCKED, NOMEM, READONLY, IOERR, CORRUPT, FULL, CANTOPEN,
# PROTOCOL, NOLFS, NOTADB. (psycopg already keeps SQL mistakes out of OperationalError.)
_SQLITE_OUTAGES = {5, 6, 7, 8, 10, 11, 13, 14, 15, 22, 26}


def _is_outage(error: Exception) -> bool:
    orig = getattr(error, "orig", None)
    code = getattr(orig, "sqlite_errorcode", None)
    return code is None or code & 0xFF in _SQLITE_OUTAGES


# SQLite errors after which no pooled connection is trusted: SQLite opens a file it may not write
# read-only and stays so, and the other codes say the file or its disk failed under the connection.
_SQLITE_BROKEN = {8, 10, 11, 13, 14, 26}  # READONLY, IOERR, CORRUPT, FULL, CANTOPEN, NOTADB


def _drop_failed_connections(context: Any) -> None:
    """Treat a broken SQLite file like a lost server: SQLAlchemy then replaces every pooled connection."""
    code = getattr(context.original_exception, "sqlite_errorcode", None)
    if code is None or code & 0xFF not in _SQLITE_BROKEN:
        return
    if context.connection is not None:  # an invalidated connection is not rolled back: end its transaction here
        dbapi_connection = context.connection.connection.dbapi_connection
        if dbapi_connection is not None and dbapi_connection.in_transaction:
            try:
                dbapi_connection.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # closing it ends the transaction too
    context.is_disconnect = True  # and invalidate_pool_on_disconnect (the default) drops the pool
