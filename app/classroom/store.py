"""The classroom event store's reads and writes: learners, events, final predictions, reveals and pacing.

One code path (SQLAlchemy Core) for both engines::

    store = EventStore(default_url(data_dir))         # or "postgresql+psycopg://user@host:5432/db"
    store.upgrade()                                   # optional: any first call upgrades the schema
    store.join("physics-3", learner_id, "Ada")
    store.record(new_event_id(), "physics-3", learner_id, "param", {"name": "mlp_scale", "value": 0.5},
                 lesson="transformer-block", explorable="transformer-block-trace")
    store.commit_prediction(new_event_id(), "physics-3", learner_id, "transformer-block-trace/prediction",
                            "keep-erase", "the update is zero", "transformer-block", "transformer-block-trace")

The store's other rooms: ``store_validation`` (what a write may hold), ``store_engine`` (connecting,
and which failures are an outage), ``sqlite_file`` (a deleted SQLite file rebuilt), ``schema`` (tables and
migrations), ``class_summary`` (the teacher's counts) and ``export`` (the CSV). The names other modules
import from here stay here (``__all__``).

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
race        {"question", "setup": {URL key: value}, "outcome": choice or None}: the race a committed
            prediction is for, held (None) or decided; written by the server only (app/classroom/race.py)
=========== ===================================================================

Question ids are global (e.g. ``"transformer-block-trace/prediction"``), so
``distribution`` needs no lesson. Text comes back exactly as stored: escape it when rendering.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import URL, Connection, case, delete, func, select, update
from sqlalchemy.dialects import postgresql, sqlite

from blocktrace.app.classroom import schema
from blocktrace.app.classroom.class_summary import (
    DISCUSSED_KINDS,
    MISCONCEPTIONS,
    STEPS,
    Misconception,
    Summary,
    learner_label,
    summarize,
)
from blocktrace.app.classroom.export import CSV_COLUMNS, events_csv
from blocktrace.app.classroom.identity import clean_display_name
from blocktrace.app.classroom.schema import (
    class_epochs,
    classes,
    deliveries,
    events,
    learners,
    lti_links,
    lti_values,
    options,
    paces,
    predictions,
    reveals,
)
from blocktrace.app.classroom.sqlite_file import FILE_KEY, WatchedFile
from blocktrace.app.classroom.store_engine import (
    DB_FILE,
    WRITE,
    StoreUnavailable,
    as_utc,
    available,
    default_url,
    make_engine,
)
from blocktrace.app.classroom.store_validation import (
    MAX_ITEMS,
    MAX_NOTE,
    MAX_PAYLOAD,
    MAX_TEXT,
    PREDICTION,
    check_class_code,
    check_key,
    check_learner_id,
    check_prediction,
    check_record,
    new_event_id,
    payload_json,
)

__all__ = [
    # this module's own
    "OPEN_JOINING", "RECENT_LIMIT", "RESUME_LIMIT", "EventStore", "Joining", "Pace", "StoredEvent", "StoredPrediction",
    # kept importable from here (their rooms are named above)
    "CSV_COLUMNS", "DB_FILE", "MAX_ITEMS", "MAX_NOTE", "MAX_PAYLOAD", "MAX_TEXT", "MISCONCEPTIONS", "STEPS",
    "Misconception", "StoreUnavailable", "Summary", "check_prediction", "check_record", "default_url",
    "new_event_id",
]

RESUME_LIMIT = 2000  # newest events read back for one learner and lesson: a page restores from these
RECENT_LIMIT = 1000  # newest exercise results a process reads on each refresh
OPEN_JOINING = "open_joining"  # the option: may a student start a class with a code no class has (True/False)


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


@dataclass(frozen=True)
class Joining:
    """What deciding who may join which class needs: every class this server has, and whether students may start
    one with any code (the teacher's option; off until the teacher turns it on)."""

    classes: frozenset[str]
    open: bool


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
        self._writer = self.engine.execution_options(**{WRITE: True})
        self._insert = postgresql.insert if self.engine.dialect.name == "postgresql" else sqlite.insert
        self._schema_lock = threading.Lock()
        self._ready = False
        self.file_notice: str | None = None  # for the teacher: what happened to the database file, and when
        self._file: WatchedFile | None = None  # the SQLite file, watched for deletion (None on PostgreSQL)
        if self.engine.dialect.name == "sqlite":
            self._file = WatchedFile(self.engine.url.database, self._file_changed)
            self._file.watch(self.engine)

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
        if self._file is not None:
            self._file.schema_file = on_file
        self._ready = version == schema.SCHEMA_VERSION
        return version

    def schema_version(self) -> int:
        """The schema version of the database (0 if it is empty)."""
        with self._read("read the schema version", ensure_schema=False) as conn:
            return schema.current_version(conn)

    def _ensure_schema(self) -> None:
        if self._ready and (self._file is None or self._file.schema_is_current()):
            return
        with self._schema_lock:
            if self._file is not None:
                self._file.ensure_schema(self._ready, self.upgrade)
            elif not self._ready:
                self.upgrade()

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
        with available(action):
            engine = self._writer if write else self.engine
            conn = engine.connect() if self._file is None else \
                self._file.connection(engine, write, attempts=self._most_connections + 2)
            with conn, conn.begin():
                if write and self._file is not None and not self._file.holds(conn):
                    # Deleted or replaced between the checkout and the write lock: write nothing there.
                    raise StoreUnavailable(f"could not {action}: the database file changed; retry")
                yield conn

    def _file_changed(self, notice: str) -> None:
        self.file_notice = notice

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
        check_class_code(class_code)
        check_learner_id(learner_id)
        if display_name is not None and clean_display_name(display_name) != display_name:
            raise ValueError("pass the display name through identity.clean_display_name first")
        with self._write("join the class") as conn:
            epoch = self._epoch_for_write(conn, class_code)
            self._join(conn, class_code, epoch, learner_id, display_name)

    # LTI launches (app/lti/launch_store.py) ----------------------------------------------------

    def lti_put(self, key: str, value: str, seconds: float) -> None:
        """Keep `value` (JSON text) under `key` for `seconds`, replacing what was there; drop expired values."""
        now = _now()
        stmt = self._insert(lti_values).values(key=key, value=value, expires_at=now + timedelta(seconds=seconds))
        with self._write("keep an LTI launch's value") as conn:
            conn.execute(delete(lti_values).where(lti_values.c.expires_at < now))
            conn.execute(stmt.on_conflict_do_update(index_elements=["key"], set_={
                "value": stmt.excluded.value, "expires_at": stmt.excluded.expires_at}))

    def lti_get(self, key: str) -> str | None:
        """The value kept under `key`, unless it has expired."""
        with self._read("read an LTI launch's value") as conn:
            return conn.execute(select(lti_values.c.value).where(
                lti_values.c.key == key, lti_values.c.expires_at >= _now())).scalar()

    def lti_take(self, key: str) -> bool:
        """Remove the value under `key`: True for the one caller that removed it before it expired (a nonce is
        used once, however many processes see the same launch at once)."""
        with self._write("use an LTI nonce") as conn:
            taken = conn.execute(delete(lti_values).where(lti_values.c.key == key)
                                 .returning(lti_values.c.expires_at)).first()
        return taken is not None and as_utc(taken[0]) >= _now()

    def lti_link(self, class_code: str, learner_id: str, link: Mapping[str, Any]) -> None:
        """Keep where this learner's scores go (the newest launch's), replacing what was kept."""
        check_class_code(class_code)
        check_learner_id(learner_id)
        stmt = self._insert(lti_links).values(class_code=class_code, learner_id=learner_id,
                                              link=json.dumps(dict(link), sort_keys=True), updated_at=_now())
        with self._write("keep a learner's LMS link") as conn:
            conn.execute(stmt.on_conflict_do_update(index_elements=["class_code", "learner_id"], set_={
                "link": stmt.excluded.link, "updated_at": stmt.excluded.updated_at}))

    def lti_links(self) -> list[tuple[str, str, dict[str, Any]]]:
        """Every kept link: (class, learner, link)."""
        with self._read("read the LMS links") as conn:
            rows = conn.execute(select(lti_links.c.class_code, lti_links.c.learner_id, lti_links.c.link)).all()
        return [(row.class_code, row.learner_id, json.loads(row.link)) for row in rows]

    def lesson_events(self, class_code: str, learner_ids: Sequence[str]) -> list[tuple[str, str, str, Any]]:
        """(learner, lesson, kind, payload) of these learners' events in lessons, this epoch of the class."""
        with self._read("read the learners' lesson events") as conn:
            rows = conn.execute(
                select(events.c.learner_id, events.c.lesson, events.c.kind, events.c.payload)
                .where(events.c.class_code == class_code, events.c.epoch == self._epoch(conn, class_code),
                       events.c.learner_id.in_(list(learner_ids)), events.c.lesson.is_not(None))).all()
        out = []
        for row in rows:
            try:
                out.append((row.learner_id, row.lesson, row.kind, json.loads(row.payload)))
            except ValueError:
                continue
        return out

    def events_after(self, after: datetime, limit: int = 5000) -> list[dict[str, Any]]:
        """Events stored after `after` (any class, any epoch), oldest first, with the learner's display name."""
        with self._read("read the newest events") as conn:
            rows = conn.execute(
                select(events.c.id, events.c.created_at, events.c.class_code, events.c.epoch, events.c.learner_id,
                       events.c.lesson, events.c.explorable, events.c.kind, events.c.payload,
                       learners.c.display_name)
                .join(learners, (learners.c.class_code == events.c.class_code) & (learners.c.epoch == events.c.epoch)
                      & (learners.c.id == events.c.learner_id), isouter=True)
                .where(events.c.created_at > after).order_by(events.c.created_at, events.c.id).limit(limit)).all()
        out = []
        for row in rows:
            try:
                payload = json.loads(row.payload)
            except ValueError:
                continue
            out.append({"id": row.id, "created_at": as_utc(row.created_at), "class_code": row.class_code,
                        "learner_id": row.learner_id, "lesson": row.lesson, "explorable": row.explorable,
                        "kind": row.kind, "payload": payload, "name": row.display_name})
        return out

    def enqueue(self, kind: str, items: Sequence[tuple[str, Mapping[str, Any]]], now: datetime | None = None) -> int:
        """Keep deliveries (id, payload) until they are sent, due from `now`; an id already kept is not kept again.
        How many are new."""
        now = now or _now()
        added = 0
        with self._write("keep deliveries") as conn:
            for delivery_id, payload in items:
                stmt = self._insert(deliveries).values(
                    id=delivery_id, kind=kind, payload=json.dumps(dict(payload), sort_keys=True), created_at=now,
                    attempts=0, next_at=now).on_conflict_do_nothing(index_elements=["id"]).returning(deliveries.c.id)
                added += conn.execute(stmt).first() is not None
        return added

    def claim_deliveries(self, kind: str, limit: int, lease_s: float,
                         now: datetime | None = None) -> list[tuple[str, int, dict[str, Any]]]:
        """Up to `limit` deliveries of `kind` due now, oldest first, each held for `lease_s` (another process
        does not take it meanwhile): (id, attempts so far, payload)."""
        now = now or _now()
        with self._write("claim deliveries") as conn:
            rows = conn.execute(select(deliveries.c.id, deliveries.c.attempts, deliveries.c.payload).where(
                deliveries.c.kind == kind, deliveries.c.delivered_at.is_(None), deliveries.c.next_at <= now)
                .order_by(deliveries.c.created_at, deliveries.c.id).limit(limit)).all()
            if rows:
                conn.execute(update(deliveries).where(deliveries.c.id.in_([r.id for r in rows]))
                             .values(next_at=now + timedelta(seconds=lease_s)))
        return [(row.id, row.attempts, json.loads(row.payload)) for row in rows]

    def delivered(self, delivery_id: str, now: datetime | None = None) -> None:
        with self._write("mark a delivery sent") as conn:
            conn.execute(update(deliveries).where(deliveries.c.id == delivery_id).values(
                delivered_at=now or _now(), attempts=deliveries.c.attempts + 1, last_error=None))

    def retry_later(self, delivery_id: str, error: str, next_at: datetime) -> None:
        with self._write("put a delivery back") as conn:
            conn.execute(update(deliveries).where(deliveries.c.id == delivery_id).values(
                next_at=next_at, attempts=deliveries.c.attempts + 1, last_error=error[:500]))

    def delivery_counts(self, kind: str, prefix: str = "") -> tuple[int, int]:
        """(waiting, of them failed at least once) for deliveries of `kind` not sent yet (ids starting `prefix`)."""
        with self._read("count deliveries") as conn:
            waiting, failed = conn.execute(select(
                func.count(), func.coalesce(func.sum(case((deliveries.c.attempts > 0, 1), else_=0)), 0))
                .where(deliveries.c.kind == kind, deliveries.c.delivered_at.is_(None),
                       deliveries.c.id.startswith(prefix, autoescape=True))).one()
        return int(waiting), int(failed)

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
        check_class_code(class_code)
        check_learner_id(learner_id)
        lesson_is = events.c.lesson.is_(None) if lesson is None else events.c.lesson == check_key(lesson, "a lesson")
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
        return self.commit_predictions([dict(event_id=event_id, class_code=class_code, learner_id=learner_id,
                                             question=question, choice=choice, note=note, lesson=lesson,
                                             explorable=explorable)])[0]

    def commit_predictions(self, items: Sequence[Mapping[str, Any]]) -> list[bool]:
        """``commit_prediction`` for each item (its keyword arguments), all in one transaction: one durable
        commit for a class that commits at once. Each is stored or refused on its own (a savepoint each),
        in order, so a refused one leaves nothing of itself and takes nothing from the others."""
        checked = [check_prediction(**item) for item in items]
        stored: list[bool] = []
        with self._write("commit predictions") as conn:
            for args in checked:
                try:
                    with conn.begin_nested():
                        self._commit_one(conn, args)
                except _Refused:
                    stored.append(False)
                else:
                    stored.append(True)
        return stored

    def _commit_one(self, conn: Connection, args: Mapping[str, Any]) -> None:
        """Write one checked prediction and its event; _Refused if an answer or the event is already there."""
        payload = payload_json({"question": args["question"], "choice": args["choice"], "note": args["note"]})
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
            raise _Refused  # the savepoint rolls back the event inserted above

    def prediction(self, class_code: str, learner_id: str, question: str) -> StoredPrediction | None:
        """The learner's committed prediction for a question in the current epoch, or None."""
        with self._read("read a prediction") as conn:
            row = conn.execute(select(predictions).where(
                predictions.c.class_code == class_code, predictions.c.epoch == self._epoch(conn, class_code),
                predictions.c.learner_id == learner_id, predictions.c.question == question,
            )).one_or_none()
        if row is None:
            return None
        return StoredPrediction(row.question, row.choice, row.note, row.event_id, as_utc(row.created_at))

    def reveal(self, class_code: str, question: str) -> None:
        """Reveal a question's class distribution to the learners who committed (idempotent)."""
        check_class_code(class_code)
        check_key(question, "question")
        with self._write("reveal a question") as conn:
            epoch = self._epoch_for_write(conn, class_code)
            conn.execute(self._insert(reveals).values(
                class_code=class_code, epoch=epoch, question=question, revealed_at=_now(),
            ).on_conflict_do_nothing(index_elements=["class_code", "epoch", "question"]))

    def unreveal(self, class_code: str, question: str) -> None:
        """Take a reveal back: learners' pages stop showing the class's answers (idempotent)."""
        check_class_code(class_code)
        check_key(question, "question")
        with self._write("hide a question again") as conn:
            epoch = self._epoch(conn, class_code)
            conn.execute(delete(reveals).where(reveals.c.class_code == class_code, reveals.c.epoch == epoch,
                                               reveals.c.question == question))

    # Pacing ------------------------------------------------------------------------------------

    def set_pace(self, class_code: str, lesson: str, *, hold: str | None | bool = False,
                 pushed: Mapping[str, Any] | None | bool = False) -> int:
        """Hold the class at a step of a lesson (None: release) and/or push an explorable state to every
        screen (None: stop showing it); False leaves that part as it is. Returns the pace's new version."""
        check_class_code(class_code)
        check_key(lesson, "a lesson")
        if hold not in (False, None) and hold not in STEPS:
            raise ValueError(f"a class is held at one of {', '.join(STEPS)}")
        with self._write("pace the class") as conn:
            epoch = self._epoch_for_write(conn, class_code)
            where = (paces.c.class_code == class_code, paces.c.epoch == epoch, paces.c.lesson == lesson)
            row = conn.execute(select(paces.c.hold, paces.c.pushed, paces.c.version).where(*where)).one_or_none()
            old_hold, old_pushed, version = (row.hold, row.pushed, row.version) if row else (None, None, 0)
            values = {"hold": old_hold if hold is False else hold,
                      "pushed": old_pushed if pushed is False else (None if pushed is None else payload_json(pushed)),
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
        return [(as_utc(row.created_at), row.class_code, row.learner_id, payload)
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

    def open_class(self, class_code: str) -> bool:
        """Make the class if this server does not have it yet (the teacher opened it, or an LMS launched it);
        True if it was made now. Students may then join it."""
        check_class_code(class_code)
        with self._write("open a class") as conn:
            if self._epoch(conn, class_code) is not None:
                return False
            self._create_class(conn, class_code)
            return True

    def joining(self) -> Joining:
        """Every class code the store has, and whether students may start a class (one read, for a process)."""
        with self._read("read the classes") as conn:
            codes = frozenset(conn.execute(select(classes.c.code)).scalars())
            value = conn.execute(select(options.c.value).where(options.c.name == OPEN_JOINING)).scalar()
        return Joining(codes, value is not None and json.loads(value) is True)

    def set_open_joining(self, allowed: bool) -> None:
        """Let students start a class with a code no class has (True), or only join classes this server has."""
        stmt = self._insert(options).values(name=OPEN_JOINING, value=json.dumps(bool(allowed)), changed_at=_now())
        with self._write("set who may start a class") as conn:
            conn.execute(stmt.on_conflict_do_update(index_elements=["name"], set_={
                "value": stmt.excluded.value, "changed_at": stmt.excluded.changed_at}))

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
                       events.c.kind.in_(DISCUSSED_KINDS))
                .order_by(events.c.created_at, events.c.id)
            ).all()
            activity = conn.execute(
                select(events.c.learner_id, events.c.kind, func.max(events.c.created_at))
                .where(events.c.class_code == class_code, events.c.epoch == epoch, events.c.lesson == lesson)
                .group_by(events.c.learner_id, events.c.kind)
            ).all()
        return summarize(class_code, epoch, lesson, names, [tuple(row) for row in answers], revealed,
                         [tuple(row) for row in discussed], [tuple(row) for row in activity],
                         MISCONCEPTIONS if misconceptions is None else misconceptions)

    def export_csv(self, class_code: str | None = None) -> str:
        """Every event of every epoch (of one class, or of all), oldest first, as CSV text.

        Columns: ``CSV_COLUMNS``. Cells that a spreadsheet would run as a formula start with "'".
        """
        with self._read("export the events") as conn:
            return events_csv(conn, class_code)

    def archive(self, class_code: str) -> int:
        """Start the class's next epoch and return it: its live view empties, its history stays.

        A class nobody has joined yet is created and archived too, so this always starts a new epoch.
        """
        check_class_code(class_code)
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


# Private API ------------------------------------------------------------------------------------

class _Refused(Exception):
    """Raised inside a write transaction to roll it back and report False."""


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
