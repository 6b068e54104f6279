"""The classroom store on SQLite: schema and upgrades, exactly-once writes, final predictions,
the teacher's views, concurrency, and what happens while the database is unavailable."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import event, func, inspect, select, text
from sqlalchemy.exc import IntegrityError, OperationalError

from blocktrace.app.classroom import schema, store_engine
from blocktrace.app.classroom.identity import new_learner_id
from blocktrace.app.classroom.outbox import Outbox
from blocktrace.app.classroom.schema import SCHEMA_VERSION, SchemaTooNew
from blocktrace.app.classroom.store import (
    CSV_COLUMNS,
    DB_FILE,
    EventStore,
    StoreUnavailable,
    default_url,
    new_event_id,
)
from tests.app.spellings import check_merged, old_database_with_spellings

CLASS = "physics-3"
LESSON = "transformer-block"
EXPLORABLE = "transformer-block-trace"
QUESTION = "transformer-block-trace/prediction"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def store(data_dir: Path) -> Iterator[EventStore]:
    with EventStore(default_url(data_dir)) as opened:
        yield opened


def count(store: EventStore, table, *where) -> int:
    with store.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(table).where(*where)).scalar_one()


def event_ids(store: EventStore) -> list[str]:
    with store.engine.connect() as conn:
        return list(conn.execute(select(schema.events.c.id)).scalars())


def predict(store: EventStore, learner: str, choice: str, question: str = QUESTION, class_code: str = CLASS,
            event_id: str | None = None, lesson: str = LESSON) -> bool:
    return store.commit_prediction(event_id or new_event_id(), class_code, learner, question, choice,
                                   "because", lesson, EXPLORABLE)


def versions(store: EventStore) -> list[int]:
    with store.engine.connect() as conn:
        return list(conn.execute(select(schema.schema_version.c.version).order_by("version")).scalars())


# Schema ----------------------------------------------------------------------------------------

def test_schema_created_on_first_start(tmp_path: Path):
    """The first start makes the data directory, the database file, every table, and durable SQLite settings."""
    data_dir = tmp_path / "fresh" / "data"
    url = default_url(data_dir)
    assert url == f"sqlite:///{data_dir / DB_FILE}"
    with EventStore(url) as store:
        assert store.schema_version() == 0
        assert store.upgrade() == SCHEMA_VERSION
        assert (data_dir / DB_FILE).is_file()
        assert versions(store) == list(range(1, SCHEMA_VERSION + 1))
        with store.engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
            pragmas = {name: conn.exec_driver_sql(f"PRAGMA {name}").scalar()
                       for name in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")}
        assert {"schema_version", "classes", "class_epochs", "learners", "events", "predictions",
                "reveals"} <= tables
        assert pragmas == {"journal_mode": "wal", "synchronous": 2, "foreign_keys": 1, "busy_timeout": 10_000}
        assert store.upgrade() == SCHEMA_VERSION  # a second start changes nothing
        assert versions(store) == list(range(1, SCHEMA_VERSION + 1))


def test_older_database_upgraded_on_start(data_dir: Path):
    """A version-1 database with data in it is upgraded to the current version on start, data intact."""
    url = default_url(data_dir)
    with EventStore(url) as old:
        assert old.upgrade(target=1) == 1
        learner = new_learner_id()
        with old.engine.begin() as conn:  # what a version-1 blocktrace wrote
            now = schema._now()
            conn.execute(schema.classes.insert().values(code=CLASS, epoch=1, created_at=now))
            conn.execute(schema.class_epochs.insert().values(class_code=CLASS, epoch=1, started_at=now))
            conn.execute(schema.events.insert().values(
                id=new_event_id(), created_at=now, class_code=CLASS, epoch=1, learner_id=learner,
                lesson=LESSON, explorable=EXPLORABLE, kind="param", payload='{"name":"mlp_scale","value":0.5}'))
        assert versions(old) == [1]
        with old.engine.connect() as conn:
            assert inspect(conn).get_indexes("events") == []

    with EventStore(url) as store:
        # No explicit upgrade(): the first call upgrades, as the app's first request would.
        assert store.record(new_event_id(), CLASS, learner, "param", {"name": "d", "value": 8}, LESSON) is True
        assert versions(store) == list(range(1, SCHEMA_VERSION + 1))
        with store.engine.connect() as conn:
            indexes = sorted(ix["name"] for ix in inspect(conn).get_indexes("events"))
            assert indexes == ["ix_events_kind_time", "ix_events_lesson"]  # versions 2 and 4
            assert inspect(conn).has_table("paces")  # version 3
        rows = list(csv.DictReader(io.StringIO(store.export_csv(CLASS))))
        assert [json.loads(r["payload"])["name"] for r in rows] == ["mlp_scale", "d"]


def test_classes_differing_only_in_case_become_one_losing_no_row(store: EventStore):
    """Upgrading a database where students made "Period3" and "PERIOD3" beside the teacher's "period3" merges them
    into "period3" (schema version 7): every event, learner, name and first answer is kept."""
    check_merged(store, old_database_with_spellings(store))
    assert store.upgrade() == SCHEMA_VERSION


def test_fresh_and_upgraded_databases_have_the_same_shape(tmp_path: Path):
    """Creating the schema from nothing and upgrading from version 1 end in the same tables and indexes."""
    def shape(store: EventStore) -> dict:
        with store.engine.connect() as conn:
            found = inspect(conn)
            return {t: ([(c["name"], str(c["type"]), c["nullable"]) for c in found.get_columns(t)],
                        sorted(ix["name"] for ix in found.get_indexes(t)))
                    for t in found.get_table_names()}

    with EventStore(default_url(tmp_path / "a")) as fresh, EventStore(default_url(tmp_path / "b")) as old:
        fresh.upgrade()
        old.upgrade(target=1)
        old.upgrade()
        assert shape(fresh) == shape(old)


def test_migrations_run_in_order_once(store: EventStore):
    """A new migration appended to the list runs once on an up-to-date database, and only it."""
    store.upgrade()
    ran: list[int] = []

    new = SCHEMA_VERSION + 1

    def add_column(conn):
        ran.append(new)
        conn.execute(text("ALTER TABLE events ADD COLUMN client_time VARCHAR(40)"))

    steps = [*schema.MIGRATIONS, (new, add_column)]
    for _ in range(2):
        with store._writer.begin() as conn:
            assert schema.upgrade(conn, target=new, migrations=steps) == new
    assert ran == [new]
    assert versions(store) == list(range(1, new + 1))


def test_newer_database_refused(store: EventStore):
    """A database upgraded by a newer blocktrace is refused rather than written in an unknown shape."""
    store.upgrade()
    with store.engine.begin() as conn:
        conn.execute(schema.schema_version.insert().values(version=SCHEMA_VERSION + 1, applied_at=schema._now()))
    with EventStore(store.engine.url) as other, pytest.raises(SchemaTooNew):
        other.upgrade()


def test_concurrent_first_starts_upgrade_once(data_dir: Path):
    """Several app processes starting at once on a new database create the schema exactly once."""
    url = default_url(data_dir)
    stores = [EventStore(url) for _ in range(4)]
    barrier = threading.Barrier(len(stores))

    def start(store: EventStore) -> int:
        barrier.wait()
        return store.upgrade()

    with ThreadPoolExecutor(len(stores)) as pool:
        assert list(pool.map(start, stores)) == [SCHEMA_VERSION] * len(stores)
    assert versions(stores[0]) == list(range(1, SCHEMA_VERSION + 1))
    for store in stores:
        store.close()


def test_urls_refused():
    """An in-memory SQLite database (one per connection) and other databases are refused."""
    for url in ("sqlite://", "sqlite:///:memory:", "mysql://u@h/db"):
        with pytest.raises(ValueError):
            EventStore(url)


# Events ------------------------------------------------------------------------------------------

def test_record_is_exactly_once_by_event_id(store: EventStore):
    """A retried event id is stored once, however it is spelled; the first payload stands."""
    learner = new_learner_id()
    event_id = new_event_id()
    assert store.record(event_id, CLASS, learner, "param", {"value": 1}, LESSON, EXPLORABLE) is True
    assert store.record(event_id, CLASS, learner, "param", {"value": 2}, LESSON, EXPLORABLE) is False
    assert store.record(event_id.replace("-", "").upper(), CLASS, learner, "param", {"value": 3}) is False
    assert event_ids(store) == [event_id]
    rows = list(csv.DictReader(io.StringIO(store.export_csv())))
    assert [json.loads(r["payload"]) for r in rows] == [{"value": 1}]


def test_record_refuses_bad_arguments(store: EventStore):
    """Unusable arguments are errors before anything is written, and predictions cannot bypass the gate."""
    store.upgrade()
    learner = new_learner_id()
    with pytest.raises(ValueError, match="commit_prediction"):
        store.record(new_event_id(), CLASS, learner, "prediction", {"choice": "x"})
    with pytest.raises(ValueError, match="UUID"):
        store.record("1", CLASS, learner, "param", {})
    with pytest.raises(ValueError, match="class code"):
        store.record(new_event_id(), "no spaces", learner, "param", {})
    with pytest.raises(TypeError):
        store.record(new_event_id(), CLASS, learner, "param", ["not", "a", "dict"])
    with pytest.raises(ValueError):
        store.record(new_event_id(), CLASS, learner, "param", {"value": float("nan")})
    assert event_ids(store) == []


def test_join_keeps_names_as_given(store: EventStore):
    """A display name is stored as typed (markup included), replaced on a later join, and must be clean."""
    learner = new_learner_id()
    store.join(CLASS, learner)
    assert store.display_name(CLASS, learner) is None
    store.join(CLASS, learner, "<img src=x onerror=alert(1)>")
    assert store.display_name(CLASS, learner) == "<img src=x onerror=alert(1)>"
    store.join(CLASS, learner)  # no name given: the stored one stays
    assert store.display_name(CLASS, learner) == "<img src=x onerror=alert(1)>"
    with pytest.raises(ValueError, match="clean_display_name"):
        store.join(CLASS, learner, "  padded  ")
    with pytest.raises(ValueError, match="clean_display_name"):
        store.join(CLASS, learner, "x" * 41)
    assert store.class_codes() == [CLASS]


# Predictions -------------------------------------------------------------------------------------

def test_second_prediction_refused_by_commit(store: EventStore):
    """Once a prediction is committed, another commit (new id or retried id) is refused and leaves no trace."""
    learner = new_learner_id()
    first = new_event_id()
    assert predict(store, learner, "keep-erase", event_id=first) is True
    assert predict(store, learner, "keep-both") is False
    assert predict(store, learner, "keep-erase", event_id=first) is False  # a retry of the first
    stored = store.prediction(CLASS, learner, QUESTION)
    assert stored is not None
    assert (stored.choice, stored.note, stored.event_id) == ("keep-erase", "because", first)
    assert event_ids(store) == [first]  # the refused commits left no 'prediction' event
    assert count(store, schema.predictions) == 1
    # Another question, or another learner, is a separate prediction.
    assert predict(store, learner, "exact", question="decoder-block-lab/prediction") is True
    assert predict(store, new_learner_id(), "keep-both") is True


def commit_together(store: EventStore, learners: list[str], choice: str = "keep-both") -> list[bool]:
    return store.commit_predictions([dict(event_id=new_event_id(), class_code=CLASS, learner_id=learner,
                                          question=QUESTION, choice=choice, note=None, lesson=LESSON,
                                          explorable=EXPLORABLE) for learner in learners])


def check_commits_together(store: EventStore) -> None:
    """Commits written together: one transaction and one durable commit; each stored or refused on its own."""
    store.upgrade()
    earlier, ada, bob, cy = (new_learner_id() for _ in range(4))
    assert predict(store, earlier, "keep-erase") is True
    commits: list[object] = []

    def committed(conn) -> None:
        commits.append(conn)

    event.listen(store.engine, "commit", committed)
    try:
        # ada twice: her second answer is refused; `earlier` already has one: refused; bob and cy stored.
        outcome = commit_together(store, [ada, earlier, bob, ada, cy])
    finally:
        event.remove(store.engine, "commit", committed)
    assert outcome == [True, False, True, False, True]
    assert len(commits) == 1
    for learner, choice in ((earlier, "keep-erase"), (ada, "keep-both"), (bob, "keep-both"), (cy, "keep-both")):
        assert store.prediction(CLASS, learner, QUESTION).choice == choice
    assert count(store, schema.predictions) == 4
    with store.engine.connect() as conn:  # a refused commit left no 'prediction' event of its own
        kinds = conn.execute(select(schema.events.c.kind)).scalars().all()
    assert kinds.count("prediction") == 4
    assert commit_together(store, []) == []


def test_commits_written_together_are_stored_or_refused_each_on_their_own(store: EventStore):
    check_commits_together(store)


def test_second_prediction_refused_by_database(store: EventStore):
    """A raw INSERT that skips the store's code still cannot add a second prediction: UNIQUE refuses it."""
    learner = new_learner_id()
    assert predict(store, learner, "keep-erase") is True
    sneaky = new_event_id()
    now = schema._now()
    with pytest.raises(IntegrityError, match="UNIQUE"), store.engine.begin() as conn:
        conn.execute(schema.events.insert().values(
            id=sneaky, created_at=now, class_code=CLASS, epoch=1, learner_id=learner, lesson=LESSON,
            explorable=EXPLORABLE, kind="prediction", payload="{}"))
        conn.execute(schema.predictions.insert().values(
            class_code=CLASS, epoch=1, learner_id=learner, question=QUESTION, choice="keep-both",
            note=None, event_id=sneaky, created_at=now))
    assert store.prediction(CLASS, learner, QUESTION).choice == "keep-erase"
    assert sneaky not in event_ids(store)  # the failed transaction rolled back whole


def test_distribution_and_reveal(store: EventStore):
    """The teacher sees the distribution; a learner sees it only after the reveal, and only once committed."""
    ada, bob, cy, late = (new_learner_id() for _ in range(4))
    for learner, choice in ((ada, "keep-erase"), (bob, "keep-both"), (cy, "keep-erase")):
        assert predict(store, learner, choice)
    store.join(CLASS, late)
    assert store.distribution(CLASS, QUESTION) == {"keep-erase": 2, "keep-both": 1}
    assert list(store.distribution(CLASS, QUESTION)) == ["keep-erase", "keep-both"]  # largest first
    assert store.distribution(CLASS, "unknown/question") == {}
    assert store.distribution("other-class", QUESTION) == {}
    assert store.is_revealed(CLASS, QUESTION) is False
    assert store.visible_distribution(CLASS, ada, QUESTION) is None  # not revealed yet
    store.reveal(CLASS, QUESTION)
    store.reveal(CLASS, QUESTION)  # idempotent
    assert store.is_revealed(CLASS, QUESTION) is True
    assert store.is_revealed("other-class", QUESTION) is False
    assert store.visible_distribution(CLASS, ada, QUESTION) == {"keep-erase": 2, "keep-both": 1}
    assert store.visible_distribution(CLASS, late, QUESTION) is None  # has not committed


def test_summary(store: EventStore):
    """The lesson summary counts joins, commits, answers, claims and checkpoints, lists explanations and names
    the misconception, for this class and lesson only."""
    ada, bob, anon, idle = (new_learner_id() for _ in range(4))
    store.join(CLASS, ada, "Ada")
    store.join(CLASS, bob, "<b>Bob</b>")
    store.join(CLASS, idle, "Idle")
    predict(store, ada, "keep-erase")
    predict(store, bob, "keep-both")
    predict(store, anon, "keep-both")
    predict(store, ada, "large", question="decoder-block-lab/prediction", lesson="decoder-block")
    predict(store, new_learner_id(), "keep-both", class_code="other-class")
    events = [
        (ada, "claim", {"verdict": "right_on", "stage": "attn_out"}),
        (bob, "claim", {"verdict": "too_early"}),
        (anon, "claim", {"verdict": "right_on"}),
        (ada, "checkpoint", {"checkpoint": "c1", "correct": True}),
        (bob, "checkpoint", {"checkpoint": "c1", "correct": False}),
        (anon, "checkpoint", {"checkpoint": "c1", "correct": True}),
        (bob, "explanation", {"text": "<script>alert('x')</script> it adds"}),
        (anon, "explanation", {"text": "the stream survives"}),
        (ada, "param", {"name": "mlp_scale", "value": 0.0}),
    ]
    for learner, kind, payload in events:
        assert store.record(new_event_id(), CLASS, learner, kind, payload, LESSON, EXPLORABLE)
    store.record(new_event_id(), CLASS, ada, "claim", {"verdict": "too_late"}, "decoder-block")
    store.reveal(CLASS, QUESTION)

    summary = store.summary(CLASS, LESSON)
    roster = summary.pop("roster")
    nameless = f"Student {anon[:6]}"  # no name given: a short label, not the whole learner id
    assert summary == {
        "class_code": CLASS, "epoch": 1, "lesson": LESSON,
        "joined": 4, "committed": 3,
        "distributions": {QUESTION: {"keep-both": 2, "keep-erase": 1}},
        "revealed": [QUESTION],
        "claims": {"right_on": 2, "too_early": 1},
        "checkpoints": {"c1": {"correct": 2, "incorrect": 1}},
        "explanations": [("<b>Bob</b>", "<script>alert('x')</script> it adds"), (nameless, "the stream survives")],
        "misconceptions": [{"name": "Replacing the residual stream is harmless", "question": QUESTION,
                            "choice": "keep-both", "learners": sorted(["<b>Bob</b>", nameless])}],
        "outcomes": {},  # no race in this lesson (tests/app/test_race_classroom.py)
    }
    assert [(r["label"], r["committed"], r["done"], r["current"]) for r in roster] == [
        ("<b>Bob</b>", True, ["predict", "experiment", "explain"], "implement"),
        ("Ada", True, ["predict", "experiment"], "implement"),
        ("Idle", False, [], "predict"),
        (nameless, True, ["predict", "experiment", "explain"], "implement"),
    ]
    assert roster[2]["last_active"] is None and all(r["last_active"].tzinfo for r in roster if r["label"] != "Idle")
    custom = store.summary(CLASS, "decoder-block", misconceptions={
        "decoder-block-lab/prediction": ("large", "A big value leaks backwards"),
        QUESTION: ("keep-both", "not in this lesson"),
    })
    assert custom["misconceptions"] == [{"name": "A big value leaks backwards",
                                         "question": "decoder-block-lab/prediction", "choice": "large",
                                         "learners": ["Ada"]}]
    assert custom["claims"] == {"too_late": 1}
    empty = store.summary("nobody-here", LESSON)
    assert (empty["epoch"], empty["joined"], empty["distributions"]) == (None, 0, {})


def test_archive_starts_a_new_epoch_and_keeps_history(store: EventStore):
    """Archiving empties the class's live view but keeps every event in the export; learners start afresh."""
    ada = new_learner_id()
    store.join(CLASS, ada, "Ada")
    predict(store, ada, "keep-both")
    store.record(new_event_id(), CLASS, ada, "explanation", {"text": "old"}, LESSON)
    store.reveal(CLASS, QUESTION)
    assert store.epoch(CLASS) == 1
    assert store.archive(CLASS) == 2
    assert store.epoch(CLASS) == 2
    assert store.distribution(CLASS, QUESTION) == {}
    assert store.prediction(CLASS, ada, QUESTION) is None
    assert store.is_revealed(CLASS, QUESTION) is False
    assert store.display_name(CLASS, ada) is None
    summary = store.summary(CLASS, LESSON)
    assert (summary["epoch"], summary["joined"], summary["committed"], summary["explanations"]) == (2, 0, 0, [])
    assert predict(store, ada, "keep-erase") is True  # a new epoch, a new first prediction
    assert store.distribution(CLASS, QUESTION) == {"keep-erase": 1}
    rows = list(csv.DictReader(io.StringIO(store.export_csv(CLASS))))
    assert [(r["epoch"], r["kind"], r["display_name"]) for r in rows] == [
        ("1", "prediction", "Ada"), ("1", "explanation", "Ada"), ("2", "prediction", "")]
    with store.engine.connect() as conn:
        history = conn.execute(select(schema.class_epochs.c.epoch, schema.class_epochs.c.archived_at.is_(None))
                               .order_by(schema.class_epochs.c.epoch)).all()
    assert history == [(1, False), (2, True)]
    assert store.archive("never-seen") == 2  # always a new epoch, even for a class nobody joined
    assert store.epoch("never-seen") == 2


def test_export_csv(store: EventStore):
    """The export has every event of every class (or one class), oldest first, with formula cells defused."""
    ada, eve = new_learner_id(), new_learner_id()
    store.join(CLASS, ada, "Ada")
    store.join("other", eve, "=HYPERLINK(\"http://x\")")
    first, second, third = new_event_id(), new_event_id(), new_event_id()
    store.record(first, CLASS, ada, "param", {"name": "d", "value": 16}, LESSON, EXPLORABLE)
    store.record(second, "other", eve, "explanation", {"text": "a, \"quoted\"\nline"}, LESSON)
    predict(store, ada, "keep-erase", event_id=third)
    rows = list(csv.DictReader(io.StringIO(store.export_csv())))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert [r["event_id"] for r in rows] == [first, second, third]
    assert rows[1]["display_name"] == "'=HYPERLINK(\"http://x\")"
    assert json.loads(rows[1]["payload"]) == {"text": "a, \"quoted\"\nline"}
    assert json.loads(rows[2]["payload"]) == {"question": QUESTION, "choice": "keep-erase", "note": "because"}
    assert rows[0]["created_at"].endswith("+00:00")
    assert [r["event_id"] for r in csv.DictReader(io.StringIO(store.export_csv("other")))] == [second]
    assert list(csv.reader(io.StringIO(store.export_csv("empty")))) == [list(CSV_COLUMNS)]


# Concurrency -------------------------------------------------------------------------------------

def test_100_concurrent_learners_lose_and_double_nothing(store: EventStore):
    """100 learners writing at once from 100 threads, retries included: every event stored exactly once."""
    store.upgrade()
    learners = [new_learner_id() for _ in range(100)]
    barrier = threading.Barrier(len(learners))

    def session(learner: str) -> tuple[list[str], list[bool], list[bool]]:
        barrier.wait()  # all start together
        ids = [new_event_id() for _ in range(4)]
        store.join(CLASS, learner, f"L{learner[:6]}")
        first = [predict(store, learner, "keep-erase", event_id=ids[0])]
        first += [store.record(i, CLASS, learner, "param", {"value": n}, LESSON, EXPLORABLE)
                  for n, i in enumerate(ids[1:])]
        retries = [predict(store, learner, "keep-both", event_id=ids[0]), predict(store, learner, "keep-both")]
        retries += [store.record(ids[1], CLASS, learner, "param", {"value": 0}, LESSON, EXPLORABLE)]
        return ids, first, retries

    with ThreadPoolExecutor(len(learners)) as pool:
        results = list(pool.map(session, learners))
    sent = [i for ids, _, _ in results for i in ids]
    assert all(all(first) for _, first, _ in results)
    assert not any(any(retries) for _, _, retries in results)
    stored = event_ids(store)
    assert len(stored) == len(sent) == 400
    assert set(stored) == set(sent)
    assert count(store, schema.predictions) == 100
    assert count(store, schema.learners) == 100
    assert store.distribution(CLASS, QUESTION) == {"keep-erase": 100}


# The database unavailable ------------------------------------------------------------------------

def test_unreachable_database_raises_and_outbox_flushes(data_dir: Path, tmp_path: Path):
    """With the database gone, writes raise StoreUnavailable and queue in the Outbox; once it is back, one
    flush delivers them all, once each, with duplicates and a refused second prediction not an error."""
    store = EventStore(default_url(data_dir))
    outbox = Outbox(store)
    learner = new_learner_id()
    first = new_event_id()
    assert outbox.record(first, CLASS, learner, "param", {"n": 0}, LESSON) is True  # straight through
    assert outbox.pending == 0

    store.close()  # pooled connections would keep the moved file open
    moved = tmp_path / "moved"
    data_dir.rename(moved)
    assert store.health() is False
    with pytest.raises(StoreUnavailable, match="unable to open database file"):
        store.record(new_event_id(), CLASS, learner, "param", {})

    queued = [new_event_id() for _ in range(5)]
    prediction_id = new_event_id()
    assert outbox.record(queued[0], CLASS, learner, "param", {"n": 1}, LESSON) is None
    assert outbox.commit_prediction(prediction_id, CLASS, learner, QUESTION, "keep-erase", "", LESSON,
                                    EXPLORABLE) is None
    assert outbox.commit_prediction(new_event_id(), CLASS, learner, QUESTION, "keep-both", "", LESSON,
                                    EXPLORABLE) is None  # will be refused: the first one stands
    assert outbox.record(first, CLASS, learner, "param", {"n": 0}, LESSON) is None  # a retry of a stored one

    def learner_session(event_id: str) -> bool | None:
        return outbox.record(event_id, CLASS, new_learner_id(), "param", {"n": 2}, LESSON)

    with ThreadPoolExecutor(4) as pool:  # other sessions keep writing while it is down
        assert list(pool.map(learner_session, queued[1:])) == [None] * 4
    with pytest.raises(ValueError):  # a bad write fails at once instead of joining the queue
        outbox.record("not-a-uuid", CLASS, learner, "param", {})
    assert outbox.pending == 8
    assert outbox.flush() == 8  # still down: nothing delivered, nothing lost

    moved.rename(data_dir)
    assert outbox.flush() == 0
    assert outbox.failed == []
    assert sorted(event_ids(store)) == sorted([first, prediction_id, *queued])
    assert store.prediction(CLASS, learner, QUESTION).choice == "keep-erase"
    assert store.health() is True
    store.close()


def test_full_database_raises_and_outbox_flushes(store: EventStore):
    """A full disk raises StoreUnavailable; writes queued meanwhile land once space is back."""
    store.upgrade()
    outbox = Outbox(store)
    learner = new_learner_id()
    store.close()
    with store.engine.connect() as conn:
        pages = conn.exec_driver_sql("PRAGMA page_count").scalar()

    def disk_full(dbapi_connection: sqlite3.Connection, _record: object) -> None:
        dbapi_connection.execute(f"PRAGMA max_page_count = {pages}")  # the file may not grow

    event.listen(store.engine, "connect", disk_full)
    store.close()
    big = {"parts": ["x" * 2000] * 7}  # as large as an event may be
    with pytest.raises(StoreUnavailable, match="full"):
        store.record(new_event_id(), CLASS, learner, "explanation", big, LESSON)
    ids = [new_event_id() for _ in range(3)]
    assert outbox.record(ids[0], CLASS, learner, "explanation", big, LESSON) is None
    assert outbox.record(ids[1], CLASS, learner, "param", {"n": 1}, LESSON) is None  # queued behind it, in order
    assert outbox.commit_prediction(ids[2], CLASS, learner, QUESTION, "keep-erase", None, LESSON, None) is None
    assert outbox.flush() == 3
    assert event_ids(store) == []

    event.remove(store.engine, "connect", disk_full)
    store.close()
    assert outbox.flush() == 0
    rows = list(csv.DictReader(io.StringIO(store.export_csv())))
    assert [r["event_id"] for r in rows] == ids  # delivered in the order they were made


def test_sql_mistakes_are_not_outages(store: EventStore):
    """A mistake in SQL (SQLite reports it as OperationalError too) is raised as itself, not StoreUnavailable."""
    store.upgrade()
    with pytest.raises(OperationalError, match="no such table") as raised, store_engine.available("read"), \
            store.engine.connect() as conn:
        conn.execute(text("SELECT * FROM no_such_table"))
    assert not isinstance(raised.value, StoreUnavailable)


def test_outbox_delivers_in_order_after_failures():
    """Queued writes reach the store in submission order, each once, whatever fails in between."""

    class FlakyStore:
        def __init__(self):
            self.down = True
            self.seen: list[str] = []

        def record(self, **kwargs) -> bool:
            if self.down:
                raise StoreUnavailable("down")
            if kwargs["payload"]["n"] == 3:
                self.down = True  # fails again in the middle of a flush
            new = kwargs["event_id"] not in self.seen
            self.seen.append(kwargs["event_id"])
            return new

    flaky = FlakyStore()
    outbox = Outbox(flaky)  # type: ignore[arg-type]
    ids = [new_event_id() for _ in range(6)]
    for n, event_id in enumerate(ids):
        assert outbox.record(event_id, CLASS, "learner-1", "param", {"n": n}) is None
    flaky.down = False
    assert outbox.flush() == 2  # stopped after n == 3 took the store down again
    flaky.down = False
    assert outbox.flush() == 0
    assert flaky.seen == ids
    assert outbox.record(new_event_id(), CLASS, "learner-1", "param", {"n": 9}) is True  # empty queue: direct
