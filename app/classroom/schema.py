"""The classroom tables and the forward-only migrations that create and upgrade them.

Every database records which migrations it has had in ``schema_version`` (one row per
version). ``upgrade`` runs the missing ones in order, inside one transaction that holds a
lock, so two app processes starting together upgrade once and a failed step leaves the
database as it was (SQLite and PostgreSQL both have transactional DDL).

Adding a version: append ``(N, function)`` to ``MIGRATIONS`` and change the ``Table``
definitions below to the new shape. Never edit a migration that has shipped: a database
created today runs migration 1 and then every later one, exactly like an old database.
Version 1 builds its tables from ``_v1_tables`` (a frozen copy of the shape at version 1);
when a later migration changes a table's columns, give the module-level tables their own
definitions and leave ``_v1_tables`` as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy import (
    Column,
    Connection,
    DateTime,
    ForeignKey,
    ForeignKeyConstraint,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
    inspect,
    select,
    text,
)

__all__ = [
    "CODE_LEN", "ID_LEN", "KEY_LEN", "MIGRATIONS", "NAME_LEN", "SCHEMA_VERSION", "SchemaTooNew", "class_epochs",
    "classes", "current_version", "deliveries", "events", "learners", "lti_links", "lti_values", "metadata",
    "options", "paces", "predictions", "reveals", "schema_version", "upgrade",
]

# Column widths, enforced in Python too (SQLite ignores VARCHAR lengths, PostgreSQL refuses).
CODE_LEN = 24  # class code
ID_LEN = 64  # learner id, event id
NAME_LEN = 40  # display name
KEY_LEN = 80  # lesson, explorable, question, choice, kind
LTI_KEY_LEN = 200  # an LTI launch's stored value: a nonce or state with its prefixes

# Any fixed 64-bit number: the PostgreSQL advisory lock that serialises concurrent upgrades.
_UPGRADE_LOCK = 0x626C6F636B747261  # "blocktra"


def _now() -> datetime:
    return datetime.now(UTC)


def _v1_tables(metadata: MetaData) -> dict[str, Table]:
    """The tables as they were at schema version 1 (frozen: see the module docstring)."""
    classes = Table(
        "classes", metadata,
        Column("code", String(CODE_LEN), primary_key=True),
        Column("epoch", Integer, nullable=False),  # the current epoch; archive() starts the next one
        Column("created_at", DateTime(timezone=True), nullable=False),
    )
    class_epochs = Table(
        "class_epochs", metadata,  # one row per epoch: the archive history of a class
        Column("class_code", String(CODE_LEN), ForeignKey("classes.code"), nullable=False),
        Column("epoch", Integer, nullable=False),
        Column("started_at", DateTime(timezone=True), nullable=False),
        Column("archived_at", DateTime(timezone=True), nullable=True),  # NULL while current
        PrimaryKeyConstraint("class_code", "epoch"),
    )
    learners = Table(
        "learners", metadata,  # who joined a class in an epoch, and the name they gave
        Column("class_code", String(CODE_LEN), nullable=False),
        Column("epoch", Integer, nullable=False),
        Column("id", String(ID_LEN), nullable=False),
        Column("display_name", String(NAME_LEN), nullable=True),  # as given; escaped by whoever renders it
        Column("created_at", DateTime(timezone=True), nullable=False),
        PrimaryKeyConstraint("class_code", "epoch", "id"),
        ForeignKeyConstraint(["class_code", "epoch"], ["class_epochs.class_code", "class_epochs.epoch"]),
    )
    events = Table(
        "events", metadata,
        Column("id", String(ID_LEN), primary_key=True),  # a UUID chosen by the client: the idempotency key
        Column("created_at", DateTime(timezone=True), nullable=False),
        Column("class_code", String(CODE_LEN), nullable=False),
        Column("epoch", Integer, nullable=False),
        Column("learner_id", String(ID_LEN), nullable=False),
        Column("lesson", String(KEY_LEN), nullable=True),
        Column("explorable", String(KEY_LEN), nullable=True),
        Column("kind", String(KEY_LEN), nullable=False),
        Column("payload", Text, nullable=False),  # JSON text
        ForeignKeyConstraint(["class_code", "epoch"], ["class_epochs.class_code", "class_epochs.epoch"]),
    )
    predictions = Table(
        "predictions", metadata,
        Column("class_code", String(CODE_LEN), nullable=False),
        Column("epoch", Integer, nullable=False),
        Column("learner_id", String(ID_LEN), nullable=False),
        Column("question", String(KEY_LEN), nullable=False),
        Column("choice", String(KEY_LEN), nullable=False),
        Column("note", Text, nullable=True),
        Column("event_id", String(ID_LEN), ForeignKey("events.id"), primary_key=True),
        Column("created_at", DateTime(timezone=True), nullable=False),
        # The rule "a committed prediction is final" lives in the database, whatever route writes.
        UniqueConstraint("class_code", "epoch", "learner_id", "question", name="uq_predictions_once"),
    )
    reveals = Table(
        "reveals", metadata,
        Column("class_code", String(CODE_LEN), nullable=False),
        Column("epoch", Integer, nullable=False),
        Column("question", String(KEY_LEN), nullable=False),
        Column("revealed_at", DateTime(timezone=True), nullable=False),
        PrimaryKeyConstraint("class_code", "epoch", "question"),
        ForeignKeyConstraint(["class_code", "epoch"], ["class_epochs.class_code", "class_epochs.epoch"]),
    )
    return {t.name: t for t in (classes, class_epochs, learners, events, predictions, reveals)}


metadata = MetaData()
schema_version = Table(
    "schema_version", metadata,
    Column("version", Integer, primary_key=True),
    Column("applied_at", DateTime(timezone=True), nullable=False),
)  # never changes shape: every version of blocktrace reads it
_tables = _v1_tables(metadata)


def _v3_paces(metadata: MetaData) -> Table:
    """The teacher's pacing of a lesson in a class's epoch: the step the class is held at, the pushed state."""
    return Table(
        "paces", metadata,
        Column("class_code", String(CODE_LEN), nullable=False),
        Column("epoch", Integer, nullable=False),
        Column("lesson", String(KEY_LEN), nullable=False),
        Column("hold", String(KEY_LEN), nullable=True),  # a lesson step; None: the class moves freely
        Column("pushed", Text, nullable=True),  # JSON {"explorable": …, "state": {key: value}}; None: nothing
        Column("version", Integer, nullable=False),  # grows with every change: pages apply a push once
        Column("changed_at", DateTime(timezone=True), nullable=False),
        PrimaryKeyConstraint("class_code", "epoch", "lesson"),
        ForeignKeyConstraint(["class_code", "epoch"], ["class_epochs.class_code", "class_epochs.epoch"]),
    )


paces = _v3_paces(metadata)


def _v5_lti_values(metadata: MetaData) -> Table:
    """What an LTI launch keeps between its requests (app/lti/launch_store.py): each value until it expires."""
    return Table(
        "lti_values", metadata,
        Column("key", String(LTI_KEY_LEN), primary_key=True),
        Column("value", Text, nullable=False),  # JSON text
        Column("expires_at", DateTime(timezone=True), nullable=False, index=True),
    )


lti_values = _v5_lti_values(metadata)


def _v6_lti_links(metadata: MetaData) -> Table:
    """Where a learner's scores go: the LMS user and course service an LTI launch named (app/lti/grades.py)."""
    return Table(
        "lti_links", metadata,
        Column("class_code", String(CODE_LEN), nullable=False),
        Column("learner_id", String(ID_LEN), nullable=False),
        Column("link", Text, nullable=False),  # JSON: issuer, client id, the LMS's user id, line items URL, scopes
        Column("updated_at", DateTime(timezone=True), nullable=False),
        PrimaryKeyConstraint("class_code", "learner_id"),
    )


def _v6_deliveries(metadata: MetaData) -> Table:
    """What the server must send elsewhere (a score to an LMS), kept until it is sent: retried, never lost."""
    return Table(
        "deliveries", metadata,
        Column("id", String(LTI_KEY_LEN), primary_key=True),  # what it is: the same delivery is kept once
        Column("kind", String(KEY_LEN), nullable=False),
        Column("payload", Text, nullable=False),  # JSON
        Column("created_at", DateTime(timezone=True), nullable=False),
        Column("attempts", Integer, nullable=False),
        Column("next_at", DateTime(timezone=True), nullable=False, index=True),  # not tried before this
        Column("delivered_at", DateTime(timezone=True), nullable=True),
        Column("last_error", Text, nullable=True),
    )


lti_links = _v6_lti_links(metadata)
deliveries = _v6_deliveries(metadata)


def _v8_options(metadata: MetaData) -> Table:
    """The classroom's own options, set from the teacher's room, shared by every process on the database."""
    return Table(
        "options", metadata,
        Column("name", String(KEY_LEN), primary_key=True),  # e.g. "open_joining"
        Column("value", Text, nullable=False),  # JSON
        Column("changed_at", DateTime(timezone=True), nullable=False),
    )


options = _v8_options(metadata)
classes = _tables["classes"]
class_epochs = _tables["class_epochs"]
learners = _tables["learners"]
events = _tables["events"]
predictions = _tables["predictions"]
reveals = _tables["reveals"]


def _create_v1(conn: Connection) -> None:
    """Version 1: the six classroom tables."""
    frozen = MetaData()
    _v1_tables(frozen)
    frozen.create_all(conn)


def _add_dashboard_indexes(conn: Connection) -> None:
    """Version 2: indexes for the teacher dashboard's per-lesson and per-question queries."""
    # Plain DDL, identical in SQLite and PostgreSQL, so this step never changes with the models.
    conn.execute(text("CREATE INDEX ix_events_lesson ON events (class_code, epoch, lesson, kind)"))
    conn.execute(text("CREATE INDEX ix_predictions_question ON predictions (class_code, epoch, question)"))


def _add_paces(conn: Connection) -> None:
    """Version 3: the paces table (holding a class at a step, pushing a state to every screen)."""
    frozen = MetaData()
    _v1_tables(frozen)
    _v3_paces(frozen).create(conn)


def _add_recent_index(conn: Connection) -> None:
    """Version 4: an index for the newest events of one kind (each process reads new exercise results)."""
    conn.execute(text("CREATE INDEX ix_events_kind_time ON events (kind, created_at)"))


def _add_lti_values(conn: Connection) -> None:
    """Version 5: the lti_values table (an LTI launch's nonce, used once, and what it keeps between requests)."""
    _v5_lti_values(MetaData()).create(conn)


def _add_deliveries(conn: Connection) -> None:
    """Version 6: lti_links (where a learner's scores go) and deliveries (what is still to be sent)."""
    frozen = MetaData()
    _v6_lti_links(frozen).create(conn)
    _v6_deliveries(frozen).create(conn)


def _lower_case_class_codes(conn: Connection) -> None:
    """Version 7: every class code in lower case (identity.class_code); classes whose codes differ only in case
    become one class, so the students who typed "Period3" are in the teacher's "period3".

    Nothing learners did is lost: every event, learner, prediction, reveal and pace moves to the merged class.
    Their current epochs become its current one; an archived epoch of another spelling stays an archived epoch
    of its own. Where two spellings hold the same row (one learner in both, one question revealed in both),
    one row is kept: a learner's name where either had one; the answer committed first (a committed prediction
    is final; the later one stays in the events and the export); the first spelling's reveal and pace.
    Plain SQL, the same on SQLite and PostgreSQL, in the order the foreign keys allow (parents first).
    """
    codes = list(conn.execute(text("SELECT code, epoch, created_at FROM classes")))
    groups: dict[str, list] = {}
    for row in codes:
        groups.setdefault(row.code.lower(), []).append(row)
    for target, spellings in sorted(groups.items()):
        if [row.code for row in spellings] != [target]:
            _merge_spellings(conn, target, spellings)
    for row in list(conn.execute(text("SELECT class_code, learner_id, updated_at FROM lti_links "
                                      "WHERE class_code <> lower(class_code) ORDER BY updated_at"))):
        _move(conn, "lti_links", {"class_code": row.class_code}, {"class_code": row.class_code.lower()},
              ["learner_id"], newer="updated_at")


def _merge_spellings(conn: Connection, target: str, spellings: list) -> None:
    """Move the classes `spellings` (rows of classes) into the one class `target` (see _lower_case_class_codes)."""
    # The base keeps its epoch numbers: the lower-case spelling, else the class made first.
    base = next((row for row in spellings if row.code == target), min(spellings, key=lambda row: row.created_at))
    epochs = {row.code: list(conn.execute(
        text("SELECT epoch, started_at, archived_at FROM class_epochs WHERE class_code = :c ORDER BY epoch"),
        {"c": row.code})) for row in spellings}
    current = {row.code: row.epoch for row in spellings}
    others = [row for row in spellings if row.code != base.code]
    archived = sorted(((row.code, e) for row in others for e in epochs[row.code] if e.epoch != current[row.code]),
                      key=lambda pair: (pair[1].started_at, pair[0]))
    # The current epoch stays the highest (archive() counts on it): after the others' archived epochs, if any.
    merged = base.epoch + len(archived) + (1 if archived else 0)
    moves = [((base.code, e.epoch), e.epoch if e.epoch != base.epoch else merged, e) for e in epochs[base.code]]
    moves += [((code, e.epoch), base.epoch + i + 1, e) for i, (code, e) in enumerate(archived)]
    moves += [((row.code, current[row.code]), merged, e) for row in others for e in epochs[row.code]
              if e.epoch == current[row.code]]
    started = min(e.started_at for _source, number, e in moves if number == merged)
    if base.code == target:
        conn.execute(text("UPDATE classes SET created_at = :t WHERE code = :c"),
                     {"t": min(row.created_at for row in spellings), "c": target})
    else:
        conn.execute(text("INSERT INTO classes (code, epoch, created_at) VALUES (:c, :e, :t)"),
                     {"c": target, "e": base.epoch, "t": min(row.created_at for row in spellings)})
    for (code, epoch), number, e in moves:
        there = conn.execute(text("SELECT count(*) FROM class_epochs WHERE class_code = :c AND epoch = :e"),
                             {"c": target, "e": number}).scalar_one()
        if not there:
            conn.execute(text("INSERT INTO class_epochs (class_code, epoch, started_at, archived_at) "
                              "VALUES (:c, :e, :s, :a)"),
                         {"c": target, "e": number, "s": started if number == merged else e.started_at,
                          "a": None if number == merged else e.archived_at})
        if (code, epoch) == (target, number):
            continue  # the base's own epoch, left where it is
        source, into = {"class_code": code, "epoch": epoch}, {"class_code": target, "epoch": number}
        _keep_names(conn, source, into)
        _move(conn, "learners", source, into, ["id"])
        _move(conn, "predictions", source, into, ["learner_id", "question"], older="created_at")
        _move(conn, "reveals", source, into, ["question"])
        _move(conn, "paces", source, into, ["lesson"])
        conn.execute(text("UPDATE events SET class_code = :tc, epoch = :te WHERE class_code = :c AND epoch = :e"),
                     {"tc": target, "te": number, "c": code, "e": epoch})
        conn.execute(text("DELETE FROM class_epochs WHERE class_code = :c AND epoch = :e"), {"c": code, "e": epoch})
    conn.execute(text("UPDATE class_epochs SET started_at = :s WHERE class_code = :c AND epoch = :e"),
                 {"s": started, "c": target, "e": merged})
    for row in others + ([base] if base.code != target else []):
        conn.execute(text("DELETE FROM classes WHERE code = :c"), {"c": row.code})
    conn.execute(text("UPDATE classes SET epoch = :e WHERE code = :c"), {"e": merged, "c": target})


def _where(alias: str, values: dict[str, object], prefix: str) -> str:
    return " AND ".join(f"{alias}.{name} = :{prefix}{name}" for name in values)


def _move(conn: Connection, table: str, source: dict[str, object], into: dict[str, object], keys: list[str],
          older: str | None = None, newer: str | None = None) -> None:
    """Move `table`'s rows from `source` to `into` (column values); a row whose `keys` are there already is
    dropped, unless its `older` column is older (or its `newer` column newer): then the one there is dropped."""
    params = {**{f"s{k}": v for k, v in source.items()}, **{f"t{k}": v for k, v in into.items()}}
    same = " AND ".join(f"o.{k} = {table}.{k}" for k in keys)
    beats = f"o.{older} < {table}.{older}" if older else f"o.{newer} > {table}.{newer}" if newer else None
    if beats:  # the one there loses to the one moving in
        conn.execute(text(f"DELETE FROM {table} WHERE {_where(table, into, 't')} AND EXISTS (SELECT 1 FROM {table} o "
                          f"WHERE {_where('o', source, 's')} AND {same} AND {beats})"), params)
    conn.execute(text(f"DELETE FROM {table} WHERE {_where(table, source, 's')} AND EXISTS (SELECT 1 FROM {table} o "
                      f"WHERE {_where('o', into, 't')} AND {same})"), params)
    sets = ", ".join(f"{name} = :t{name}" for name in into)
    conn.execute(text(f"UPDATE {table} SET {sets} WHERE {_where(table, source, 's')}"), params)


def _keep_names(conn: Connection, source: dict[str, object], into: dict[str, object]) -> None:
    """A learner in both spellings keeps the name given in either (the one there first, if both have one)."""
    conn.execute(text(
        f"UPDATE learners SET display_name = (SELECT o.display_name FROM learners o WHERE {_where('o', source, 's')} "
        f"AND o.id = learners.id) WHERE {_where('learners', into, 't')} AND display_name IS NULL"),
        {**{f"s{k}": v for k, v in source.items()}, **{f"t{k}": v for k, v in into.items()}})


def _add_options(conn: Connection) -> None:
    """Version 8: the options table (whether students may start a class with a code no class has)."""
    _v8_options(MetaData()).create(conn)


Migration = Callable[[Connection], None]
MIGRATIONS: list[tuple[int, Migration]] = [
    (1, _create_v1),
    (2, _add_dashboard_indexes),
    (3, _add_paces),
    (4, _add_recent_index),
    (5, _add_lti_values),
    (6, _add_deliveries),
    (7, _lower_case_class_codes),
    (8, _add_options),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]


class SchemaTooNew(RuntimeError):
    """The database was upgraded by a newer blocktrace than this one; refusing to touch it."""


def current_version(conn: Connection) -> int:
    """The highest migration applied to this database, 0 for an empty database."""
    if not inspect(conn).has_table(schema_version.name):
        return 0
    return conn.execute(select(func.max(schema_version.c.version))).scalar_one() or 0


def upgrade(conn: Connection, target: int = SCHEMA_VERSION,
            migrations: list[tuple[int, Migration]] | None = None) -> int:
    """Apply the missing migrations up to ``target`` in order, in the caller's transaction; return the version.

    The caller's transaction must be a write transaction (BEGIN IMMEDIATE on SQLite), which
    serialises concurrent upgrades there; on PostgreSQL an advisory lock does the same.
    """
    steps = MIGRATIONS if migrations is None else migrations
    if [v for v, _ in steps] != list(range(1, len(steps) + 1)):
        raise ValueError("migrations must be numbered 1, 2, 3, ... in order")
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _UPGRADE_LOCK})
    schema_version.create(conn, checkfirst=True)
    version = current_version(conn)
    known = steps[-1][0]
    if version > known:
        raise SchemaTooNew(f"the database is at schema version {version}; this blocktrace knows up to {known}")
    for number, step in steps:
        if version < number <= target:
            step(conn)
            conn.execute(schema_version.insert().values(version=number, applied_at=_now()))
            version = number
    return version
