"""The classroom event store: learners, events, final predictions and reveals, on SQLite or PostgreSQL.

One code path (SQLAlchemy Core) for both engines::

    store = EventStore(default_url(data_dir))         # or "postgresql+psycopg://user@host:5432/db"
    store.upgrade()                                   # optional: any first call upgrades the schema
    store.join("physics-3", learner_id, "Ada")
    store.record(new_event_id(), "physics-3", learner_id, "param", {"name": "mlp_scale", "value": 0.5},
                 lesson="transformer-block", explorable="transformer-block-trace")
    store.commit_prediction(new_event_id(), "physics-3", learner_id, "transformer-block-trace/prediction",
                            "keep-erase", "the update is zero", "transformer-block", "transformer-block-trace")

Rules the store keeps, whatever calls it:

- Every write is identified by an event id (a UUID the page makes once per user action and
  reuses on every retry). A write returns only after a durable commit, and a retried event
  id is stored once: ``record`` returns True when it stored the event, False when that id
  was already stored.
- A committed prediction is final: the ``predictions`` table has a UNIQUE constraint on
  (class, epoch, learner, question), so the database itself refuses a second one.
- A class has epochs. ``archive`` starts the next one: the class's live view (joined
  learners, predictions, reveals, summaries) starts empty, while every event stays in the
  ``events`` table and in ``export_csv``.
- When the database cannot be reached or written (down, locked for too long, disk full,
  read-only), calls raise ``StoreUnavailable``. Keep exploring, show a notice, and hand the
  writes to an ``Outbox``, which delivers them in order once the store is back.
- The store comes back by itself, without a restart: after a failure no pooled connection is
  reused (SQLite keeps a connection it opened read-only read-only for good), and an SQLite file
  deleted while serving is rebuilt from the copy a connection still has open (or, with none open,
  recreated with its schema) before anything is read or written; ``file_notice`` says which.
- Texts are cut to the lengths the pages allow (``MAX_TEXT``, ``MAX_NOTE``), and events larger
  than ``MAX_PAYLOAD`` are refused. The teacher's summary counts each learner once per question.

Event kinds and the payload keys the teacher's summary reads (other keys are kept as given):

=========== ===================================================================
kind        payload
=========== ===================================================================
prediction  written by ``commit_prediction`` only: {"question", "choice", "note"}
bet         free-form; a bet that must be final goes through ``commit_prediction``
param       {"name", "value"}: one event per burst (the page coalesces a drag)
claim       {"verdict": "too_early" | "too_late" | "right_on", ...}
checkpoint  {"checkpoint": id, "correct": bool, ...}
exercise    free-form (what the exercise runner reported)
explanation {"text": what the learner wrote}
=========== ===================================================================

Question ids are global (e.g. ``"transformer-block-trace/prediction"``), so
``distribution`` needs no lesson. Text comes back exactly as stored: escape it when rendering.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import re
import sqlite3
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypedDict

from sqlalchemy import URL, Connection, Engine, and_, create_engine, delete, event, exc, func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url

from blocktrace.app.classroom import schema, sqlite_file
from blocktrace.app.classroom.identity import clean_display_name, valid_class_code
from blocktrace.app.classroom.schema import class_epochs, classes, events, learners, paces, predictions, reveals
from blocktrace.app.classroom.sqlite_file import FILE_KEY, READ_ONLY_KEY, file_id

log = logging.getLogger("blocktrace.classroom")

DB_FILE = "blocktrace.db"
BUSY_TIMEOUT_MS = 10_000  # how long an SQLite writer waits for another's lock before giving up
POOL_TIMEOUT_S = 15  # how long a thread waits for a free pooled connection
CONNECT_TIMEOUT_S = 5  # PostgreSQL: an unreachable host fails after this, not after minutes
# Text limits, the same as the pages' (a test compares them): the server cuts longer text, since only
# a client that bypasses the page's own limit can send it, and refuses an event still too large.
MAX_TEXT = 2_000  # characters of any text in an event: an explanation (app/lessons/page.py), a typed value
MAX_NOTE = 500  # characters of a prediction's note (explorables/components/prediction.py)
MAX_PAYLOAD = 16_000  # characters of JSON per event, after cutting its texts
MAX_ITEMS = 200  # list items (cut) or keys (refused past it) at any level of a payload
PREDICTION = "prediction"

# question -> (the choice that names a misconception, its name for the teacher).
MISCONCEPTIONS: dict[str, tuple[str, str]] = {
    "transformer-block-trace/prediction": ("keep-both", "Replacing the residual stream is harmless"),
}

_KEY = re.compile(r"[A-Za-z0-9_.:/-]{1,80}")  # lesson, explorable, question, kind
_LEARNER = re.compile(r"[A-Za-z0-9_-]{1,64}")
_WRITE = "blocktrace_write"  # execution option: this transaction will write (BEGIN IMMEDIATE on SQLite)
CSV_COLUMNS = ("event_id", "created_at", "class_code", "epoch", "learner_id", "display_name",
               "lesson", "explorable", "kind", "payload")


class StoreUnavailable(Exception):
    """The database cannot be reached or written just now: down, locked too long, full or read-only.

    The write that raised it may or may not have been committed (a connection can fail after
    the commit and before its acknowledgement): retry later with the same event id, as the
    ``Outbox`` does, and it is stored exactly once. The SQLAlchemy error is ``__cause__``.
    """


@dataclass(frozen=True)
class StoredPrediction:
    """A learner's committed (final) answer to one question in the current epoch."""

    question: str
    choice: str
    note: str | None
    event_id: str
    created_at: datetime  # UTC


@dataclass(frozen=True)
class StoredEvent:
    """One of a learner's events, as a page reads it back to resume where they were."""

    kind: str  # "checkpoint", "explanation", "exercise", "claim", "param", ...
    explorable: str | None
    payload: dict[str, Any]


@dataclass(frozen=True)
class Pace:
    """How the teacher paces one lesson of a class: the step it is held at, the state shown to everyone."""

    hold: str | None  # a lesson step (STEPS); None: free
    pushed: dict[str, Any] | None  # {"explorable": id, "state": {query key: value}}; None: nothing pushed
    version: int  # grows with each change


RESUME_LIMIT = 2000  # newest events read back for one learner and lesson: a page restores from these
RECENT_LIMIT = 1000  # newest exercise results a process reads on each refresh


class Misconception(TypedDict):
    name: str  # e.g. "Replacing the residual stream is harmless"
    question: str
    choice: str
    learners: list[str]  # display names (or learner ids), sorted


class RosterEntry(TypedDict):
    label: str  # the display name, or an anonymous label from the learner id ("Student 3f9a1c")
    committed: bool  # a prediction committed in this lesson
    done: list[str]  # of STEPS, in order: the lesson's steps this learner has done
    current: str  # the first step not done yet, or "done"
    last_active: datetime | None  # their newest event in this lesson (UTC), None if none yet
    exercise: str | None  # their latest exercise result: "passed", "3 of 12 tests pass", ...; None: none yet


STEPS = ("predict", "experiment", "implement", "explain")  # a lesson's steps, as the lesson page counts them
STEP_KINDS = {PREDICTION: "predict", "param": "experiment", "experiment": "experiment", "claim": "experiment",
              "exercise": "implement", "explanation": "explain"}


def exercise_words(payload: Mapping[str, Any]) -> str:
    """An exercise result in a few words for the teacher."""
    if not payload.get("checked"):
        return "reported passing (not checked)" if payload.get("passed") is True else "reported failing"
    if payload.get("passed") is True:
        return "passed (checked)"
    if payload.get("tests_passed") == payload.get("tests_total"):
        return "tests pass, numbers wrong"
    return f"{payload.get('tests_passed')} of {payload.get('tests_total')} tests pass"


def learner_label(learner_id: str, display_name: str | None) -> str:
    """How the teacher sees a learner: their name, or a short label that names no one."""
    return display_name or f"Student {learner_id[:6]}"


class Summary(TypedDict):
    class_code: str
    epoch: int | None  # None for a class nobody has joined yet
    lesson: str
    joined: int  # learners who joined the class this epoch
    committed: int  # learners who committed at least one prediction in this lesson
    distributions: dict[str, dict[str, int]]  # question -> choice -> count, this lesson
    revealed: list[str]  # questions revealed to the class this epoch
    claims: dict[str, int]  # divergence-claim verdict -> learners (each learner's latest claim per explorable)
    checkpoints: dict[str, dict[str, int]]  # checkpoint -> {"correct": n, "incorrect": m}, each learner's latest
    roster: list[RosterEntry]  # every learner of the class this epoch, by label
    explanations: list[tuple[str, str]]  # (display name or learner id, latest text), one per learner, oldest first
    misconceptions: list[Misconception]  # for questions of this lesson that have predictions


def new_event_id() -> str:
    """A fresh event id (UUID text). Make one per user action and reuse it on every retry."""
    return str(uuid.uuid4())


def default_url(data_dir: Path) -> str:
    """The app's default store: an SQLite file in ``data_dir`` (created, mode 0700, if missing)."""
    data_dir = Path(data_dir)
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    return f"sqlite:///{(data_dir / DB_FILE).resolve()}"


# Validation, shared by the store and the Outbox (which checks before it queues anything) ---------

def _event_id(value: object) -> str:
    if isinstance(value, str):
        try:
            return str(uuid.UUID(value))  # one spelling per id, so a retry matches its first try
        except ValueError:
            pass
    raise ValueError(f"an event id must be a UUID, not {value!r}")


def _class_code(value: object) -> str:
    if not valid_class_code(value):
        raise ValueError(f"not a class code (1-24 of A-Z a-z 0-9 _ -): {value!r}")
    return value  # type: ignore[return-value]


def _learner_id(value: object) -> str:
    if not (isinstance(value, str) and _LEARNER.fullmatch(value)):
        raise ValueError(f"not a learner id (1-64 of A-Z a-z 0-9 _ -): {value!r}")
    return value


def _key(value: object, what: str, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not (isinstance(value, str) and _KEY.fullmatch(value)):
        raise ValueError(f"not a {what} (1-80 of A-Z a-z 0-9 _ . : / -): {value!r}")
    return value


def _text(value: object, what: str, max_len: int, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > max_len or "\x00" in value:
        raise ValueError(f"{what} must be 1-{max_len} characters of text without NUL")
    return value


def _cut(text: str, max_len: int, what: str) -> str:
    if len(text) <= max_len:
        return text
    log.warning("cut %s of %d characters to the %d the page allows", what, len(text), max_len)
    return text[:max_len]


def _limited(value: object, what: str, depth: int = 0) -> object:
    """The payload value with every text cut to MAX_TEXT and every list to MAX_ITEMS items.

    ValueError for a mapping of more than MAX_ITEMS keys or more than 8 levels (no page sends one).
    """
    if isinstance(value, str):
        return _cut(value, MAX_TEXT, f"a text in {what}")
    if depth >= 8 and isinstance(value, Mapping | list | tuple):
        raise ValueError(f"{what} must have at most 8 levels")
    if isinstance(value, Mapping):
        if len(value) > MAX_ITEMS:
            raise ValueError(f"{what} must have at most {MAX_ITEMS} keys per level")
        return {_cut(str(key), 80, f"a key in {what}"): _limited(item, what, depth + 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        if len(value) > MAX_ITEMS:
            log.warning("cut a list in %s of %d items to %d", what, len(value), MAX_ITEMS)
            value = value[:MAX_ITEMS]
        return [_limited(item, what, depth + 1) for item in value]
    return value


def _payload(value: object, what: str = "an event") -> str:
    if not isinstance(value, Mapping):
        raise TypeError(f"an event payload must be a mapping, not {type(value).__name__}")
    text = json.dumps(_limited(value, what), sort_keys=True, separators=(",", ":"), allow_nan=False,
                      ensure_ascii=False)
    if len(text) > MAX_PAYLOAD:
        raise ValueError(f"an event payload must be at most {MAX_PAYLOAD} characters of JSON, not {len(text)}")
    return text


def check_record(event_id: str, class_code: str, learner_id: str, kind: str, payload: Mapping[str, Any],
                 lesson: str | None = None, explorable: str | None = None) -> dict[str, Any]:
    """The arguments of ``EventStore.record`` validated and normalised; ValueError/TypeError if unusable."""
    if kind == PREDICTION:
        raise ValueError("predictions are final: store them with commit_prediction, not record")
    return dict(event_id=_event_id(event_id), class_code=_class_code(class_code), learner_id=_learner_id(learner_id),
                kind=_key(kind, "kind"), payload=_payload(payload, f"a {kind!r} event"),
                lesson=_key(lesson, "lesson", True),
                explorable=_key(explorable, "explorable", True))


def check_prediction(event_id: str, class_code: str, learner_id: str, question: str, choice: str,
                     note: str | None, lesson: str | None, explorable: str | None) -> dict[str, Any]:
    """The arguments of ``EventStore.commit_prediction`` validated; ValueError if unusable."""
    return dict(event_id=_event_id(event_id), class_code=_class_code(class_code), learner_id=_learner_id(learner_id),
                question=_key(question, "question"), choice=_text(choice, "a choice", schema.KEY_LEN),
                note=_note(note), lesson=_key(lesson, "lesson", True),
                explorable=_key(explorable, "explorable", True))


def _note(value: object) -> str | None:
    """A prediction's note: None when empty, cut to MAX_NOTE; ValueError if not text."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or "\x00" in value:
        raise ValueError("a note must be text without NUL")
    return _cut(value, MAX_NOTE, "a prediction's note")


# Engines -------------------------------------------------------------------------------------

def _sqlite_connect(dbapi_connection: sqlite3.Connection, _record: object) -> None:
    # SQLAlchemy emits BEGIN itself (see _sqlite_begin): sqlite3's own transaction handling
    # would leave SELECTs and DDL outside transactions.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
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
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
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
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(_WRITE) else "BEGIN")


def make_engine(url: str | URL, pool_size: int = 5, max_overflow: int = 10) -> Engine:
    """A pooled, thread-safe engine for an SQLite file or PostgreSQL (psycopg 3) URL."""
    parsed = make_url(url)
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")  # `--db postgresql://...` means psycopg 3
    pool = dict(pool_size=pool_size, max_overflow=max_overflow, pool_timeout=POOL_TIMEOUT_S, pool_pre_ping=True)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if parsed.database in (None, "", ":memory:") or parsed.query.get("mode") == "memory":
            raise ValueError("the classroom store needs an SQLite file, not an in-memory database")
        engine = create_engine(parsed, **pool)
        path = parsed.database

        def remember_file(_dbapi_connection: sqlite3.Connection, record: Any) -> None:
            record.info[FILE_KEY] = file_id(path)  # the file this connection opened (see sqlite_file)
            record.info[READ_ONLY_KEY] = not os.access(path, os.W_OK)  # then SQLite opened it read-only

        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "connect", remember_file)
        event.listen(engine, "begin", _sqlite_begin)
        event.listen(engine, "handle_error", _drop_failed_connections)
        return engine
    if backend == "postgresql":
        return create_engine(parsed, connect_args={"connect_timeout": CONNECT_TIMEOUT_S}, **pool)
    raise ValueError(f"the classroom store supports sqlite and postgresql URLs, not {parsed.drivername}")


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


@contextmanager
def _available(action: str) -> Iterator[None]:
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


class _Refused(Exception):
    """Raised inside a write transaction to roll it back and report False."""


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _oldest_first(rows: list) -> list[tuple[Any, dict[str, Any]]]:
    """Rows read newest first, oldest first, each with its payload read back (a row whose payload is not
    a JSON object is left out)."""
    found = []
    for row in reversed(rows):
        try:
            payload = json.loads(row.payload)
        except ValueError:
            continue
        if isinstance(payload, dict):
            found.append((row, payload))
    return found


def _now() -> datetime:
    return datetime.now(UTC)


def _csv_cell(value: object) -> object:
    # A spreadsheet would run a cell starting with = + - @ as a formula (CSV injection).
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


class EventStore:
    """Learners, events, final predictions and reveals of every class, in one database.

    Safe to share between threads (a pooled engine; each call runs in its own transaction)
    and between processes or machines on the same database. Every method may raise
    ``StoreUnavailable``; argument errors raise ValueError or TypeError. ``engine`` is the
    SQLAlchemy engine, for tests and maintenance scripts.
    """

    def __init__(self, url: str | URL, *, pool_size: int = 5, max_overflow: int = 10):
        self.engine = make_engine(url, pool_size=pool_size, max_overflow=max_overflow)
        self._most_connections = pool_size + max_overflow
        self._writer = self.engine.execution_options(**{_WRITE: True})
        self._insert = postgresql.insert if self.engine.dialect.name == "postgresql" else sqlite.insert
        self._schema_lock = threading.Lock()
        self._ready = False
        sqlite_path = self.engine.url.database if self.engine.dialect.name == "sqlite" else None
        self._path = Path(sqlite_path) if sqlite_path else None  # the SQLite file, watched for deletion
        self._schema_file: sqlite_file.FileId | None = None  # the file the schema was last ensured on
        self._file_lock = threading.Lock()  # one rebuild at a time
        self._file_changes = 0
        self._replacement_seen: sqlite_file.FileId | None = None
        self.file_notice: str | None = None  # for the teacher: what happened to the database file, and when

    def __repr__(self) -> str:
        return f"EventStore({self.engine.url.render_as_string(hide_password=True)!r})"

    def __enter__(self) -> EventStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the pooled connections (a later call opens new ones)."""
        self.engine.dispose()

    # Schema and transactions ------------------------------------------------------------------

    def upgrade(self, target: int = schema.SCHEMA_VERSION) -> int:
        """Create the schema, or upgrade it forward to ``target``; return the version now in force.

        Any other method calls this once first, so calling it is only needed to fail fast at start.
        Raises ``schema.SchemaTooNew`` for a database from a newer blocktrace.
        """
        with self._transaction("upgrade the database schema", write=True) as conn:
            version = schema.upgrade(conn, target)
            on_file = conn.info.get(FILE_KEY)
        self._schema_file = on_file
        self._ready = version == schema.SCHEMA_VERSION
        return version

    def schema_version(self) -> int:
        """The schema version of the database (0 if it is empty)."""
        with self._read("read the schema version", ensure_schema=False) as conn:
            return schema.current_version(conn)

    def _ensure_schema(self) -> None:
        if self._ready and (self._path is None or file_id(self._path) == self._schema_file):
            return
        with self._schema_lock:
            now = file_id(self._path) if self._path is not None else None
            if self._ready and (self._path is None or now == self._schema_file):
                return
            had_file, changes = self._schema_file, self._file_changes
            self.upgrade()
            if had_file is not None and now is None and self._file_changes == changes:
                # Deleted while no connection had it open: there was nothing to rebuild it from.
                self._note_file_change(f"The class database file {self._path} was deleted and no copy was open: "
                                       "the server started a new, empty one. Answers saved before then are not in "
                                       "it (a backup of the file would have them).")

    @contextmanager
    def _write(self, action: str) -> Iterator[Connection]:
        self._ensure_schema()
        with self._transaction(action, write=True) as conn:
            yield conn

    @contextmanager
    def _read(self, action: str, ensure_schema: bool = True) -> Iterator[Connection]:
        if ensure_schema:
            self._ensure_schema()
        with self._transaction(action, write=False) as conn:
            yield conn

    @contextmanager
    def _transaction(self, action: str, write: bool) -> Iterator[Connection]:
        """One transaction on a connection to the database as it is now (the file at the path, on SQLite).

        After a failure (read-only, full, I/O error, lost server) the pool is replaced (see
        ``_drop_failed_connections``), so the next call opens a fresh connection, which notices that
        the permissions, the space or the server are back.
        """
        with _available(action):
            conn = self._current_connection(self._writer if write else self.engine, write)
            with conn, conn.begin():
                if write and self._path is not None and conn.info.get(FILE_KEY) != file_id(self._path):
                    # Deleted or replaced between the checkout and the write lock: write nothing there.
                    raise StoreUnavailable(f"could not {action}: the database file changed; retry")
                yield conn

    def _current_connection(self, engine: Engine, write: bool) -> Connection:
        """A pooled connection on the file the path names now (any connection on PostgreSQL).

        For a write, not one that SQLite opened read-only (it does so, silently and for good, when
        the file could not be opened for writing): a fresh one, once the file is writable again.
        """
        for _attempt in range(self._most_connections + 2):  # each pooled one may be stale
            conn = engine.connect()
            if self._path is None:
                return conn
            if write and conn.info.get(READ_ONLY_KEY):
                conn.invalidate()
                conn.close()
                if not os.access(self._path, os.W_OK):
                    raise StoreUnavailable(f"the database file {self._path} is read-only")
                continue
            if conn.info.get(FILE_KEY) == file_id(self._path):
                return conn
            try:
                self._file_changed(conn)
            except BaseException:
                conn.close()  # kept in the pool: it may be the only copy of a deleted file
                raise
            conn.invalidate()  # the next checkout opens the file at the path
            conn.close()
        raise StoreUnavailable("could not open the database file: it keeps changing")

    def _file_changed(self, stale: Connection) -> None:
        """The file under ``stale`` is no longer the one at the path: rebuild it if it was deleted."""
        with self._file_lock:
            self._schema_file = None  # check the schema of whatever file is there now
            when = _now().strftime("%H:%M UTC")
            now = file_id(self._path)
            if now is not None:  # replaced: use the file there now
                if now != self._replacement_seen:
                    self._replacement_seen = now
                    self._note_file_change(f"The class database file {self._path} was replaced at about {when} "
                                           "(rebuilt by another server process after it was deleted, or restored "
                                           "from a backup); the server now uses the file that is there.")
                return
            try:
                rebuilt = sqlite_file.rebuild(stale.connection.dbapi_connection, self._path)
            except (OSError, sqlite3.Error) as error:
                self._note_file_change(f"The class database file {self._path} was deleted or moved at about {when} "
                                       f"and cannot be rebuilt ({error}): answers wait in the server's memory.")
                raise StoreUnavailable(f"the database file {self._path} was deleted and could not be rebuilt: "
                                       f"{error}") from error
            if rebuilt:
                self._note_file_change(f"The class database file {self._path} was deleted at about {when}; the "
                                       "server rebuilt it from the copy it still had open, so nothing saved "
                                       "was lost.")

    def _note_file_change(self, notice: str) -> None:
        self._file_changes += 1
        self.file_notice = notice
        log.warning("%s", notice)

    def _epoch(self, conn: Connection, class_code: str) -> int | None:
        return conn.execute(select(classes.c.epoch).where(classes.c.code == class_code)).scalar()

    def _epoch_for_write(self, conn: Connection, class_code: str) -> int:
        """The class's current epoch, creating the class at epoch 1 if it is new.

        On PostgreSQL the class row is share-locked until commit, so an ``archive`` waits for
        writes in flight and no write lands in an epoch that has just been archived.
        """
        current = select(classes.c.epoch).where(classes.c.code == class_code).with_for_update(read=True)
        epoch = conn.execute(current).scalar()
        if epoch is None:
            self._create_class(conn, class_code)
            epoch = conn.execute(current).scalar_one()
        return epoch

    def _create_class(self, conn: Connection, class_code: str) -> None:
        """Create the class at epoch 1 unless it exists (also when another transaction creates it meanwhile)."""
        now = _now()
        conn.execute(self._insert(classes).values(code=class_code, epoch=1, created_at=now)
                     .on_conflict_do_nothing(index_elements=["code"]))
        conn.execute(self._insert(class_epochs).values(class_code=class_code, epoch=1, started_at=now)
                     .on_conflict_do_nothing(index_elements=["class_code", "epoch"]))

    def _join(self, conn: Connection, class_code: str, epoch: int, learner_id: str, name: str | None) -> None:
        stmt = self._insert(learners).values(class_code=class_code, epoch=epoch, id=learner_id,
                                             display_name=name, created_at=_now())
        keys = ["class_code", "epoch", "id"]
        if name is None:
            conn.execute(stmt.on_conflict_do_nothing(index_elements=keys))
        else:
            conn.execute(stmt.on_conflict_do_update(index_elements=keys,
                                                    set_={"display_name": stmt.excluded.display_name}))

    def _insert_event(self, conn: Connection, epoch: int, args: Mapping[str, Any], kind: str, payload: str) -> bool:
        stmt = self._insert(events).values(
            id=args["event_id"], created_at=_now(), class_code=args["class_code"], epoch=epoch,
            learner_id=args["learner_id"], lesson=args["lesson"], explorable=args["explorable"],
            kind=kind, payload=payload,
        ).on_conflict_do_nothing(index_elements=["id"]).returning(events.c.id)
        return conn.execute(stmt).first() is not None  # RETURNING yields no row when the id was already there

    # Learners and events ----------------------------------------------------------------------

    def join(self, class_code: str, learner_id: str, display_name: str | None = None) -> None:
        """Add a learner to the class's current epoch; a name given replaces the one stored.

        ``display_name`` must already be clean (``identity.clean_display_name``); it is stored
        as given, not escaped.
        """
        _class_code(class_code)
        _learner_id(learner_id)
        if display_name is not None and clean_display_name(display_name) != display_name:
            raise ValueError("pass the display name through identity.clean_display_name first")
        with self._write("join the class") as conn:
            epoch = self._epoch_for_write(conn, class_code)
            self._join(conn, class_code, epoch, learner_id, display_name)

    def learner_count(self, class_code: str) -> int:
        """How many learners joined the class's current epoch."""
        with self._read("count the class") as conn:
            epoch = self._epoch(conn, class_code)
            return conn.execute(select(func.count()).select_from(learners).where(
                learners.c.class_code == class_code, learners.c.epoch == epoch)).scalar_one()

    def display_name(self, class_code: str, learner_id: str) -> str | None:
        """The name the learner gave in this class's current epoch, if any."""
        with self._read("read a display name") as conn:
            epoch = self._epoch(conn, class_code)
            return conn.execute(select(learners.c.display_name).where(
                learners.c.class_code == class_code, learners.c.epoch == epoch, learners.c.id == learner_id,
            )).scalar()

    def record(self, event_id: str, class_code: str, learner_id: str, kind: str, payload: Mapping[str, Any],
               lesson: str | None = None, explorable: str | None = None) -> bool:
        """Store one learner event durably; True if stored now, False if this event id was already stored.

        Returns only after the commit is durable. The learner is joined to the class if needed.
        Predictions go through ``commit_prediction`` instead (ValueError here).
        """
        args = check_record(event_id, class_code, learner_id, kind, payload, lesson, explorable)
        with self._write("record an event") as conn:
            epoch = self._epoch_for_write(conn, args["class_code"])
            self._join(conn, args["class_code"], epoch, args["learner_id"], None)
            return self._insert_event(conn, epoch, args, args["kind"], args["payload"])

    def learner_events(self, class_code: str, learner_id: str, lesson: str | None,
                       limit: int = RESUME_LIMIT) -> list[StoredEvent]:
        """The learner's newest events in one lesson (None: the explorables' own pages), oldest first.

        Predictions are read with ``prediction``; at most ``limit`` rows are read.
        """
        _class_code(class_code)
        _learner_id(learner_id)
        lesson_is = events.c.lesson.is_(None) if lesson is None else events.c.lesson == _key(lesson, "a lesson")
        with self._read("read a learner's events") as conn:
            rows = conn.execute(
                select(events.c.kind, events.c.explorable, events.c.payload)
                .where(events.c.class_code == class_code, events.c.epoch == self._epoch(conn, class_code),
                       events.c.learner_id == learner_id, lesson_is, events.c.kind != PREDICTION)
                .order_by(events.c.created_at.desc(), events.c.id.desc()).limit(limit)
            ).all()
        return [StoredEvent(row.kind, row.explorable, payload) for row, payload in _oldest_first(rows)]

    # Predictions and reveals ------------------------------------------------------------------

    def commit_prediction(self, event_id: str, class_code: str, learner_id: str, question: str, choice: str,
                          note: str | None, lesson: str | None, explorable: str | None) -> bool:
        """Commit a learner's final answer to a question, with its 'prediction' event, in one transaction.

        True if stored now. False if refused: the learner already has a prediction for this
        question in this epoch (the UNIQUE constraint decides, also between processes), or
        this event id was already stored (a retry). ``prediction()`` tells which answer stands.
        """
        args = check_prediction(event_id, class_code, learner_id, question, choice, note, lesson, explorable)
        payload = _payload({"question": args["question"], "choice": args["choice"], "note": args["note"]})
        try:
            with self._write("commit a prediction") as conn:
                epoch = self._epoch_for_write(conn, args["class_code"])
                self._join(conn, args["class_code"], epoch, args["learner_id"], None)
                if not self._insert_event(conn, epoch, args, PREDICTION, payload):
                    raise _Refused
                stored = conn.execute(self._insert(predictions).values(
                    class_code=args["class_code"], epoch=epoch, learner_id=args["learner_id"],
                    question=args["question"], choice=args["choice"], note=args["note"],
                    event_id=args["event_id"], created_at=_now(),
                ).on_conflict_do_nothing(index_elements=["class_code", "epoch", "learner_id", "question"])
                  .returning(predictions.c.event_id))
                if stored.first() is None:
                    raise _Refused  # rolls back the event inserted above
        except _Refused:
            return False
        return True

    def prediction(self, class_code: str, learner_id: str, question: str) -> StoredPrediction | None:
        """The learner's committed prediction for a question in the current epoch, or None."""
        with self._read("read a prediction") as conn:
            row = conn.execute(select(predictions).where(
                predictions.c.class_code == class_code, predictions.c.epoch == self._epoch(conn, class_code),
                predictions.c.learner_id == learner_id, predictions.c.question == question,
            )).one_or_none()
        if row is None:
            return None
        return StoredPrediction(row.question, row.choice, row.note, row.event_id, _utc(row.created_at))

    def reveal(self, class_code: str, question: str) -> None:
        """Reveal a question's class distribution to the learners who committed (idempotent)."""
        _class_code(class_code)
        _key(question, "question")
        with self._write("reveal a question") as conn:
            epoch = self._epoch_for_write(conn, class_code)
            conn.execute(self._insert(reveals).values(
                class_code=class_code, epoch=epoch, question=question, revealed_at=_now(),
            ).on_conflict_do_nothing(index_elements=["class_code", "epoch", "question"]))

    def unreveal(self, class_code: str, question: str) -> None:
        """Take a reveal back: learners' pages stop showing the class's answers (idempotent)."""
        _class_code(class_code)
        _key(question, "question")
        with self._write("hide a question again") as conn:
            epoch = self._epoch(conn, class_code)
            conn.execute(delete(reveals).where(reveals.c.class_code == class_code, reveals.c.epoch == epoch,
                                               reveals.c.question == question))

    # Pacing ------------------------------------------------------------------------------------

    def set_pace(self, class_code: str, lesson: str, *, hold: str | None | bool = False,
                 pushed: Mapping[str, Any] | None | bool = False) -> int:
        """Hold the class at a step of a lesson (None: release) and/or push an explorable state to every
        screen (None: stop showing it); False leaves that part as it is. Returns the pace's new version."""
        _class_code(class_code)
        _key(lesson, "a lesson")
        if hold not in (False, None) and hold not in STEPS:
            raise ValueError(f"a class is held at one of {', '.join(STEPS)}")
        with self._write("pace the class") as conn:
            epoch = self._epoch_for_write(conn, class_code)
            where = (paces.c.class_code == class_code, paces.c.epoch == epoch, paces.c.lesson == lesson)
            row = conn.execute(select(paces.c.hold, paces.c.pushed, paces.c.version).where(*where)).one_or_none()
            old_hold, old_pushed, version = (row.hold, row.pushed, row.version) if row else (None, None, 0)
            values = {"hold": old_hold if hold is False else hold,
                      "pushed": old_pushed if pushed is False else (None if pushed is None else _payload(pushed)),
                      "version": version + 1, "changed_at": _now()}
            if row is None:
                conn.execute(paces.insert().values(class_code=class_code, epoch=epoch, lesson=lesson, **values))
            else:
                conn.execute(update(paces).where(*where).values(**values))
            return version + 1

    def pace(self, class_code: str, lesson: str) -> Pace | None:
        """One lesson's pacing in the class's current epoch, or None if the teacher never paced it."""
        return self.current_paces().get((class_code, lesson))

    def current_paces(self) -> dict[tuple[str, str], Pace]:
        """Every class's pacing in its current epoch, by (class, lesson): one read for a server process."""
        with self._read("read the paces") as conn:
            rows = conn.execute(
                select(paces.c.class_code, paces.c.lesson, paces.c.hold, paces.c.pushed, paces.c.version)
                .join(classes, (classes.c.code == paces.c.class_code) & (classes.c.epoch == paces.c.epoch))
            ).all()
        found = {}
        for row in rows:
            try:
                pushed = json.loads(row.pushed) if row.pushed else None
            except ValueError:
                pushed = None
            found[(row.class_code, row.lesson)] = Pace(row.hold, pushed if isinstance(pushed, dict) else None,
                                                       row.version)
        return found

    def recent_results(self, seconds: float,
                       limit: int = RECENT_LIMIT) -> list[tuple[datetime, str, str, dict[str, Any]]]:
        """Exercise results stored in the last `seconds`, in classes' current epochs, oldest first, as
        (stored at, class, learner, result): how every server process learns of a result another one took."""
        since = _now() - timedelta(seconds=seconds)
        with self._read("read the newest exercise results") as conn:
            rows = conn.execute(
                select(events.c.created_at, events.c.class_code, events.c.learner_id, events.c.payload)
                .join(classes, (classes.c.code == events.c.class_code) & (classes.c.epoch == events.c.epoch))
                .where(events.c.kind == "exercise", events.c.created_at >= since)
                .order_by(events.c.created_at.desc(), events.c.id.desc()).limit(limit)
            ).all()
        return [(_utc(row.created_at), row.class_code, row.learner_id, payload)
                for row, payload in _oldest_first(rows) if isinstance(payload.get("id"), str)]

    def is_revealed(self, class_code: str, question: str) -> bool:
        """True once the teacher has revealed the question in the class's current epoch."""
        with self._read("read a reveal") as conn:
            return self._is_revealed(conn, class_code, self._epoch(conn, class_code), question)

    def _is_revealed(self, conn: Connection, class_code: str, epoch: int | None, question: str) -> bool:
        return conn.execute(select(func.count()).select_from(reveals).where(
            reveals.c.class_code == class_code, reveals.c.epoch == epoch, reveals.c.question == question,
        )).scalar_one() > 0

    def distribution(self, class_code: str, question: str) -> dict[str, int]:
        """How many learners committed each choice for a question in the current epoch (largest first).

        For the teacher. A learner's page shows ``visible_distribution`` instead.
        """
        with self._read("read a distribution") as conn:
            return self._distribution(conn, class_code, self._epoch(conn, class_code), question)

    def _distribution(self, conn: Connection, class_code: str, epoch: int | None, question: str) -> dict[str, int]:
        rows = conn.execute(select(predictions.c.choice, func.count()).where(
            predictions.c.class_code == class_code, predictions.c.epoch == epoch, predictions.c.question == question,
        ).group_by(predictions.c.choice)).all()
        return dict(sorted(((choice, count) for choice, count in rows), key=lambda item: (-item[1], item[0])))

    def visible_distribution(self, class_code: str, learner_id: str, question: str) -> dict[str, int] | None:
        """The class distribution as this learner may see it: only once revealed and they have committed."""
        with self._read("read a distribution") as conn:
            epoch = self._epoch(conn, class_code)
            committed = conn.execute(select(func.count()).select_from(predictions).where(
                predictions.c.class_code == class_code, predictions.c.epoch == epoch,
                predictions.c.learner_id == learner_id, predictions.c.question == question,
            )).scalar_one() > 0
            if not (committed and self._is_revealed(conn, class_code, epoch, question)):
                return None
            return self._distribution(conn, class_code, epoch, question)

    def revealed_distributions(self) -> dict[tuple[str, str], dict[str, int]]:
        """Every question revealed in its class's current epoch, with the class distribution.

        One read for a whole server process: each page then shows a distribution only to a learner
        whose own prediction for that question is committed (as ``visible_distribution`` does).
        """
        with self._read("read the revealed questions") as conn:
            current = conn.execute(
                select(reveals.c.class_code, reveals.c.question, reveals.c.epoch)
                .join(classes, (classes.c.code == reveals.c.class_code) & (classes.c.epoch == reveals.c.epoch))
            ).all()
            return {(code, question): self._distribution(conn, code, epoch, question)
                    for code, question, epoch in current}

    # The teacher ------------------------------------------------------------------------------

    def class_codes(self) -> list[str]:
        """Every class the store knows, sorted."""
        with self._read("list the classes") as conn:
            return list(conn.execute(select(classes.c.code).order_by(classes.c.code)).scalars())

    def epoch(self, class_code: str) -> int | None:
        """The class's current epoch (1 until the first archive), or None for an unknown class."""
        with self._read("read a class") as conn:
            return self._epoch(conn, class_code)

    def summary(self, class_code: str, lesson: str,
                misconceptions: Mapping[str, tuple[str, str]] | None = None) -> Summary:
        """What the teacher's dashboard shows for one lesson of a class, current epoch only.

        ``misconceptions`` maps question -> (choice, name); by default ``MISCONCEPTIONS``.
        Each is listed for questions of this lesson that have predictions, with the learners
        whose committed choice is that one.
        """
        named = MISCONCEPTIONS if misconceptions is None else misconceptions
        with self._read("read the class summary") as conn:
            epoch = self._epoch(conn, class_code)
            names = {learner: learner_label(learner, name) for learner, name in conn.execute(
                select(learners.c.id, learners.c.display_name).where(
                    learners.c.class_code == class_code, learners.c.epoch == epoch))}
            answers = conn.execute(
                select(predictions.c.learner_id, predictions.c.question, predictions.c.choice)
                .join(events, events.c.id == predictions.c.event_id)
                .where(predictions.c.class_code == class_code, predictions.c.epoch == epoch, events.c.lesson == lesson)
            ).all()
            revealed = sorted(conn.execute(select(reveals.c.question).where(
                reveals.c.class_code == class_code, reveals.c.epoch == epoch)).scalars())
            discussed = conn.execute(
                select(events.c.learner_id, events.c.kind, events.c.payload)
                .where(events.c.class_code == class_code, events.c.epoch == epoch, events.c.lesson == lesson,
                       events.c.kind.in_(("claim", "checkpoint", "explanation", "exercise")))
                .order_by(events.c.created_at, events.c.id)
            ).all()
            activity = conn.execute(
                select(events.c.learner_id, events.c.kind, func.max(events.c.created_at))
                .where(events.c.class_code == class_code, events.c.epoch == epoch, events.c.lesson == lesson)
                .group_by(events.c.learner_id, events.c.kind)
            ).all()

        distributions: dict[str, Counter[str]] = {}
        for _learner, question, choice in answers:
            distributions.setdefault(question, Counter())[choice] += 1
        # Each learner counts once per question: their latest claim in an explorable, their latest
        # answer to a checkpoint, their latest explanation (pressing "Check answer" again changes the
        # answer shown, not how many answered). Later rows replace earlier ones.
        latest_claims: dict[tuple[str, str], str] = {}
        latest_checks: dict[tuple[str, str], bool] = {}
        latest_texts: dict[str, str] = {}
        latest_exercise: dict[str, str] = {}
        for learner, kind, payload_text in discussed:
            try:
                payload = json.loads(payload_text)
            except ValueError:
                continue  # not written by this store; nothing to count
            if not isinstance(payload, dict):
                continue
            if kind == "claim" and isinstance(payload.get("verdict"), str):
                latest_claims[(learner, str(payload.get("explorable")))] = payload["verdict"]
            elif kind == "checkpoint" and isinstance(payload.get("correct"), bool) \
                    and isinstance(payload.get("checkpoint"), str):
                latest_checks[(learner, str(payload.get("checkpoint")))] = payload["correct"]
            elif kind == "exercise":
                latest_exercise[learner] = exercise_words(payload)
            elif kind == "explanation" and isinstance(payload.get("text"), str) and payload["text"].strip():
                latest_texts.pop(learner, None)  # re-inserted: the list follows each learner's latest one
                latest_texts[learner] = payload["text"]
        claims = Counter(latest_claims.values())
        checkpoints: dict[str, dict[str, int]] = {}
        for (_learner, checkpoint), correct in sorted(latest_checks.items(), key=lambda item: item[0][1]):
            counts = checkpoints.setdefault(checkpoint, {"correct": 0, "incorrect": 0})
            counts["correct" if correct else "incorrect"] += 1
        steps: dict[str, set[str]] = {}
        last: dict[str, datetime] = {}
        for learner, kind, moment in activity:
            if kind in STEP_KINDS:
                steps.setdefault(learner, set()).add(STEP_KINDS[kind])
            moment = _utc(moment)
            last[learner] = max(last.get(learner, moment), moment)
        roster = []
        for learner, label in sorted(names.items(), key=lambda item: (item[1].casefold(), item[0])):
            done = [step for step in STEPS if step in steps.get(learner, ())]
            roster.append(RosterEntry(label=label, committed="predict" in done, done=done,
                                      current=next((s for s in STEPS if s not in done), "done"),
                                      last_active=last.get(learner), exercise=latest_exercise.get(learner)))
        explanations = [(names.get(learner, learner), text) for learner, text in latest_texts.items()]
        found: list[Misconception] = [
            Misconception(name=name, question=question, choice=choice, learners=sorted(
                names.get(learner, learner) for learner, q, c in answers if q == question and c == choice))
            for question, (choice, name) in named.items() if question in distributions
        ]
        return Summary(
            class_code=class_code, epoch=epoch, lesson=lesson, joined=len(names),
            committed=len({learner for learner, _q, _c in answers}),
            distributions={q: dict(sorted(c.items(), key=lambda item: (-item[1], item[0])))
                           for q, c in sorted(distributions.items())},
            revealed=revealed, claims=dict(sorted(claims.items())), checkpoints=checkpoints,
            explanations=explanations, misconceptions=found, roster=roster,
        )

    def export_csv(self, class_code: str | None = None) -> str:
        """Every event of every epoch (of one class, or of all), oldest first, as CSV text.

        Columns: ``CSV_COLUMNS``. Cells that a spreadsheet would run as a formula start with "'".
        """
        query = (
            select(events.c.id, events.c.created_at, events.c.class_code, events.c.epoch, events.c.learner_id,
                   learners.c.display_name, events.c.lesson, events.c.explorable, events.c.kind, events.c.payload)
            .select_from(events.outerjoin(learners, and_(
                learners.c.class_code == events.c.class_code, learners.c.epoch == events.c.epoch,
                learners.c.id == events.c.learner_id)))
            .order_by(events.c.created_at, events.c.id)
        )
        if class_code is not None:
            query = query.where(events.c.class_code == class_code)
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(CSV_COLUMNS)
        with self._read("export the events") as conn:
            for row in conn.execute(query):
                cells = list(row)
                cells[1] = _utc(cells[1]).isoformat()
                writer.writerow([_csv_cell(cell) for cell in cells])
        return out.getvalue()

    def archive(self, class_code: str) -> int:
        """Start the class's next epoch and return it: its live view empties, its history stays.

        A class nobody has joined yet is created and archived too, so this always starts a new epoch.
        """
        _class_code(class_code)
        with self._write("archive the class") as conn:
            # No share lock first (as _epoch_for_write takes): two archives at once would deadlock.
            self._create_class(conn, class_code)
            now = _now()
            epoch = conn.execute(update(classes).where(classes.c.code == class_code)
                                 .values(epoch=classes.c.epoch + 1).returning(classes.c.epoch)).scalar_one()
            conn.execute(update(class_epochs).where(class_epochs.c.class_code == class_code,
                                                    class_epochs.c.epoch == epoch - 1).values(archived_at=now))
            conn.execute(class_epochs.insert().values(class_code=class_code, epoch=epoch, started_at=now))
        return epoch

    def health(self) -> bool:
        """True if the database answers a query now (it says nothing about free disk space)."""
        try:
            with self._read("check the database") as conn:
                conn.execute(select(1)).scalar_one()
        except StoreUnavailable:
            return False
        return True
