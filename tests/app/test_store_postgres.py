"""The classroom store on a real PostgreSQL, started by these tests from Debian's packages.

The session fixture runs its own throwaway cluster (tests/pg.py: initdb in a temporary directory, as
the `postgres` user when the tests run as root), on a free loopback port, and stops it at the end.
The server binaries are required: without them these tests fail, they do not skip.
"""

from __future__ import annotations

import csv
import io
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import func, inspect, select, text
from sqlalchemy.exc import IntegrityError

from blocktrace.app.classroom import schema
from blocktrace.app.classroom.identity import new_learner_id
from blocktrace.app.classroom.outbox import Outbox
from blocktrace.app.classroom.schema import SCHEMA_VERSION
from blocktrace.app.classroom.store import EventStore, StoreUnavailable, new_event_id
from tests.app.spellings import check_merged, old_database_with_spellings
from tests.app.test_store import check_commits_together
from tests.pg import Postgres, running_postgres
from tests.pg import free_port as _free_port

CLASS = "physics-3"
LESSON = "transformer-block"
EXPLORABLE = "transformer-block-trace"
QUESTION = "transformer-block-trace/prediction"


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """One PostgreSQL server for this module's tests: initdb, start, wait for pg_isready; stop and delete."""
    with running_postgres() as server:
        yield server


@pytest.fixture
def url(postgres: Postgres) -> str:
    """A new, empty database for one test."""
    return postgres.create_database()


@pytest.fixture
def store(url: str) -> Iterator[EventStore]:
    with EventStore(url) as opened:
        yield opened


def event_ids(store: EventStore) -> list[str]:
    with store.engine.connect() as conn:
        return list(conn.execute(select(schema.events.c.id)).scalars())


def predict(store: EventStore, learner: str, choice: str, event_id: str | None = None,
            question: str = QUESTION) -> bool:
    return store.commit_prediction(event_id or new_event_id(), CLASS, learner, question, choice, "why",
                                   LESSON, EXPLORABLE)


def test_server_is_postgres(store: EventStore):
    """The store really talks to PostgreSQL through psycopg 3."""
    assert store.engine.dialect.name == "postgresql"
    assert store.engine.dialect.driver == "psycopg"
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT version()")).scalar_one().startswith("PostgreSQL")


def test_schema_created_then_older_database_upgraded(postgres: Postgres):
    """A new database gets every migration; a version-1 database is upgraded on its first use, data intact."""
    with EventStore(postgres.create_database()) as fresh:
        assert fresh.upgrade() == SCHEMA_VERSION
        with fresh.engine.connect() as conn:
            assert {"schema_version", "classes", "class_epochs", "learners", "events", "predictions",
                    "reveals"} <= set(inspect(conn).get_table_names())

    url = postgres.create_database()
    learner = new_learner_id()
    with EventStore(url) as old:
        assert old.upgrade(target=1) == 1
        with old.engine.begin() as conn:
            now = schema._now()
            conn.execute(schema.classes.insert().values(code=CLASS, epoch=1, created_at=now))
            conn.execute(schema.class_epochs.insert().values(class_code=CLASS, epoch=1, started_at=now))
            conn.execute(schema.events.insert().values(
                id=new_event_id(), created_at=now, class_code=CLASS, epoch=1, learner_id=learner,
                lesson=LESSON, explorable=EXPLORABLE, kind="param", payload="{}"))
    with EventStore(url) as store:
        assert store.record(new_event_id(), CLASS, learner, "param", {"n": 1}, LESSON) is True
        assert store.schema_version() == SCHEMA_VERSION
        with store.engine.connect() as conn:
            assert "ix_events_lesson" in {ix["name"] for ix in inspect(conn).get_indexes("events")}
        assert len(event_ids(store)) == 2


def test_classes_differing_only_in_case_become_one_losing_no_row(store: EventStore):
    """The merge of "Period3" into "period3" (schema version 7) on PostgreSQL, whose foreign keys are checked at
    once: parents made first, children moved, old parents removed last."""
    check_merged(store, old_database_with_spellings(store))


def test_concurrent_first_starts_upgrade_once(url: str):
    """Four app processes starting together on an empty database create the schema once (advisory lock)."""
    stores = [EventStore(url) for _ in range(4)]
    barrier = threading.Barrier(len(stores))

    def start(store: EventStore) -> int:
        barrier.wait()
        return store.upgrade()

    with ThreadPoolExecutor(len(stores)) as pool:
        assert list(pool.map(start, stores)) == [SCHEMA_VERSION] * 4
    with stores[0].engine.connect() as conn:
        assert list(conn.execute(select(schema.schema_version.c.version).order_by("version")).scalars()) \
            == list(range(1, SCHEMA_VERSION + 1))
    for store in stores:
        store.close()


def test_record_is_exactly_once_by_event_id(store: EventStore):
    """A retried event id is stored once; the first payload stands."""
    learner = new_learner_id()
    event_id = new_event_id()
    assert store.record(event_id, CLASS, learner, "param", {"v": 1}, LESSON, EXPLORABLE) is True
    assert store.record(event_id, CLASS, learner, "param", {"v": 2}, LESSON, EXPLORABLE) is False
    assert event_ids(store) == [event_id]
    assert [r["payload"] for r in csv.DictReader(io.StringIO(store.export_csv()))] == ['{"v":1}']


def test_second_prediction_refused_by_any_route(store: EventStore):
    """A second commit is refused by the store, and a raw INSERT by the database's UNIQUE constraint."""
    learner = new_learner_id()
    first = new_event_id()
    assert predict(store, learner, "keep-erase", first) is True
    assert predict(store, learner, "keep-both") is False
    assert predict(store, learner, "keep-erase", first) is False
    assert event_ids(store) == [first]
    sneaky = new_event_id()
    now = schema._now()
    with pytest.raises(IntegrityError, match="uq_predictions_once"), store.engine.begin() as conn:
        conn.execute(schema.events.insert().values(
            id=sneaky, created_at=now, class_code=CLASS, epoch=1, learner_id=learner, lesson=LESSON,
            explorable=EXPLORABLE, kind="prediction", payload="{}"))
        conn.execute(schema.predictions.insert().values(
            class_code=CLASS, epoch=1, learner_id=learner, question=QUESTION, choice="keep-both",
            note=None, event_id=sneaky, created_at=now))
    assert store.prediction(CLASS, learner, QUESTION).choice == "keep-erase"
    assert event_ids(store) == [first]


def test_teacher_views_reveal_archive_export(store: EventStore):
    """Distribution, reveal, summary, archive and export behave on PostgreSQL as on SQLite."""
    ada, bob, late = new_learner_id(), new_learner_id(), new_learner_id()
    store.join(CLASS, ada, "Ada")
    store.join(CLASS, bob, "<b>Bob</b>")
    store.join(CLASS, late)
    assert predict(store, ada, "keep-erase") and predict(store, bob, "keep-both")
    store.record(new_event_id(), CLASS, ada, "claim", {"verdict": "right_on"}, LESSON, EXPLORABLE)
    store.record(new_event_id(), CLASS, bob, "checkpoint", {"checkpoint": "c1", "correct": False}, LESSON, EXPLORABLE)
    store.record(new_event_id(), CLASS, bob, "explanation", {"text": "<i>it adds</i>"}, LESSON, EXPLORABLE)
    assert store.distribution(CLASS, QUESTION) == {"keep-both": 1, "keep-erase": 1}
    assert store.visible_distribution(CLASS, ada, QUESTION) is None
    store.reveal(CLASS, QUESTION)
    assert store.is_revealed(CLASS, QUESTION)
    assert store.visible_distribution(CLASS, ada, QUESTION) == {"keep-both": 1, "keep-erase": 1}
    assert store.visible_distribution(CLASS, late, QUESTION) is None
    summary = store.summary(CLASS, LESSON)
    assert (summary["joined"], summary["committed"], summary["claims"], summary["checkpoints"]) == \
        (3, 2, {"right_on": 1}, {"c1": {"correct": 0, "incorrect": 1}})
    assert summary["explanations"] == [("<b>Bob</b>", "<i>it adds</i>")]
    assert summary["misconceptions"][0]["learners"] == ["<b>Bob</b>"]

    assert store.archive(CLASS) == 2
    assert store.distribution(CLASS, QUESTION) == {}
    assert not store.is_revealed(CLASS, QUESTION)
    assert store.summary(CLASS, LESSON)["joined"] == 0
    assert predict(store, ada, "keep-both") is True
    rows = list(csv.DictReader(io.StringIO(store.export_csv(CLASS))))
    assert [r["epoch"] for r in rows] == ["1"] * 5 + ["2"]
    assert all(r["created_at"].endswith("+00:00") for r in rows)


def test_100_concurrent_learners_lose_and_double_nothing(store: EventStore):
    """100 threads writing at once, retries included: every event stored exactly once."""
    store.upgrade()
    learners = [new_learner_id() for _ in range(100)]
    barrier = threading.Barrier(len(learners))

    def session(learner: str) -> tuple[list[str], bool]:
        barrier.wait()
        ids = [new_event_id() for _ in range(4)]
        ok = predict(store, learner, "keep-erase", ids[0])
        ok &= all(store.record(i, CLASS, learner, "param", {"n": n}, LESSON) for n, i in enumerate(ids[1:]))
        ok &= not store.record(ids[1], CLASS, learner, "param", {"n": 0}, LESSON)  # a retry
        ok &= not predict(store, learner, "keep-both")
        return ids, ok

    with ThreadPoolExecutor(len(learners)) as pool:
        results = list(pool.map(session, learners))
    assert all(ok for _, ok in results)
    sent = [i for ids, _ in results for i in ids]
    stored = event_ids(store)
    assert len(stored) == len(sent) == 400
    assert set(stored) == set(sent)
    assert store.distribution(CLASS, QUESTION) == {"keep-erase": 100}


def test_two_app_processes_share_the_store(url: str):
    """Two stores on one database (two app processes) see each other's learners, events and reveals."""
    with EventStore(url) as one, EventStore(url) as two:
        ada, bob = new_learner_id(), new_learner_id()
        one.join(CLASS, ada, "Ada")
        two.join(CLASS, bob, "Bob")
        first = new_event_id()
        assert one.record(first, CLASS, ada, "param", {"n": 1}, LESSON) is True
        assert two.record(first, CLASS, ada, "param", {"n": 1}, LESSON) is False  # a retry via the other process
        assert predict(one, ada, "keep-erase") and predict(two, bob, "keep-both")
        two.reveal(CLASS, QUESTION)
        assert one.is_revealed(CLASS, QUESTION)
        assert one.distribution(CLASS, QUESTION) == two.distribution(CLASS, QUESTION) == \
            {"keep-both": 1, "keep-erase": 1}
        assert one.summary(CLASS, LESSON)["joined"] == 2
        assert one.export_csv() == two.export_csv()


def test_concurrent_commits_from_two_processes_store_one(url: str):
    """The same learner committing one question through both stores at the same instant stores exactly one."""
    with EventStore(url) as one, EventStore(url) as two:
        one.upgrade()
        learners = [new_learner_id() for _ in range(20)]
        for learner in learners:
            one.join(CLASS, learner)

        def race(learner: str) -> list[bool]:
            barrier = threading.Barrier(2)

            def commit(store: EventStore, choice: str) -> bool:
                barrier.wait()
                return predict(store, learner, choice)

            with ThreadPoolExecutor(2) as pool:
                return list(pool.map(commit, (one, two), ("keep-erase", "keep-both")))

        outcomes = [race(learner) for learner in learners]
        assert all(sorted(o) == [False, True] for o in outcomes)
        with one.engine.connect() as conn:
            per_learner = conn.execute(select(schema.predictions.c.learner_id, func.count())
                                       .group_by(schema.predictions.c.learner_id)).all()
            prediction_events = conn.execute(select(func.count()).select_from(schema.events)
                                             .where(schema.events.c.kind == "prediction")).scalar_one()
        assert sorted(per_learner) == sorted((learner, 1) for learner in learners)
        assert prediction_events == 20  # the refused commits rolled back their events
        for learner, (ok_one, _ok_two) in zip(learners, outcomes, strict=True):
            stored = one.prediction(CLASS, learner, QUESTION)
            assert stored.choice == ("keep-erase" if ok_one else "keep-both")


def test_commits_written_together_are_stored_or_refused_each_on_their_own(store: EventStore):
    """As on SQLite (tests/app/test_store.py): one transaction, a savepoint for each commit."""
    check_commits_together(store)


def test_concurrent_archives_and_writes(url: str):
    """Two teachers archiving at once while learners write: no deadlock, each archive a new epoch, no event lost."""
    rounds, sent = 10, []
    with EventStore(url) as one, EventStore(url) as two:
        one.join(CLASS, new_learner_id())

        def archive(store: EventStore, barrier: threading.Barrier) -> int:
            barrier.wait()
            return store.archive(CLASS)

        def write(event_id: str, barrier: threading.Barrier) -> bool:
            barrier.wait()
            return two.record(event_id, CLASS, new_learner_id(), "param", {}, LESSON)

        with ThreadPoolExecutor(6) as pool:
            for n in range(rounds):
                barrier = threading.Barrier(6)
                ids = [new_event_id() for _ in range(4)]
                sent += ids
                archived = [pool.submit(archive, s, barrier) for s in (one, two)]
                written = [pool.submit(write, i, barrier) for i in ids]
                assert sorted(f.result() for f in archived) == [2 * n + 2, 2 * n + 3]
                assert all(f.result() for f in written)
        assert one.epoch(CLASS) == 2 * rounds + 1
        assert sorted(event_ids(one)) == sorted(sent)


def test_lost_connections_are_replaced(store: EventStore, postgres: Postgres):
    """After the server drops every connection (as on a restart), the next call reconnects and succeeds."""
    store.record(new_event_id(), CLASS, new_learner_id(), "param", {}, LESSON)
    database = store.engine.url.database
    with postgres.admin() as conn:
        dropped = conn.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = %s",
                               (database,)).fetchone()[0]
    assert dropped >= 1
    assert store.record(new_event_id(), CLASS, new_learner_id(), "param", {}, LESSON) is True
    assert len(event_ids(store)) == 2


def test_unavailable_database_then_outbox_flushes(postgres: Postgres):
    """An unreachable database raises StoreUnavailable; once it exists, the Outbox delivers everything once."""
    name = f"bt_{uuid.uuid4().hex[:16]}"
    with EventStore(postgres.url(name)) as store:
        assert store.health() is False
        with pytest.raises(StoreUnavailable, match=name):
            store.record(new_event_id(), CLASS, new_learner_id(), "param", {})
        outbox = Outbox(store)
        learner = new_learner_id()
        ids = [new_event_id() for _ in range(3)]
        assert outbox.record(ids[0], CLASS, learner, "param", {"n": 0}, LESSON) is None
        assert outbox.commit_prediction(ids[1], CLASS, learner, QUESTION, "keep-erase", None, LESSON, None) is None
        assert outbox.commit_prediction(ids[2], CLASS, learner, QUESTION, "keep-both", None, LESSON, None) is None
        assert outbox.record(ids[0], CLASS, learner, "param", {"n": 0}, LESSON) is None
        assert outbox.flush() == 4

        postgres.create_database(name)
        assert outbox.flush() == 0
        assert outbox.failed == []
        assert sorted(event_ids(store)) == sorted(ids[:2])
        assert store.prediction(CLASS, learner, QUESTION).choice == "keep-erase"
        assert store.health() is True


def test_unreachable_server_raises_store_unavailable(postgres: Postgres):
    """A server that is not listening is StoreUnavailable (and health() False), not a crash."""
    with EventStore(f"postgresql://postgres@127.0.0.1:{_free_port()}/x") as store:
        assert store.health() is False
        with pytest.raises(StoreUnavailable, match="refused"):
            store.join(CLASS, new_learner_id())
