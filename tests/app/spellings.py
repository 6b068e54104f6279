"""A version-6 class database holding class codes that differ only in case, and the checks that upgrading it
(schema version 7: one spelling per class) merges them losing no row. Used on SQLite (test_store.py) and on
PostgreSQL (test_store_postgres.py), whose foreign keys are checked at once."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from blocktrace.app.classroom import schema
from blocktrace.app.classroom.store import EventStore

__all__ = ["LEARNERS", "check_merged", "old_database_with_spellings"]

LESSON = "transformer-block"
QUESTION = "transformer-block-trace/prediction"
START = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
# Each learner's one-letter name doubles as their id, padded to 32 hex digits.
LEARNERS = {name: name.lower() * 32 for name in "abcdefg"}


def _at(minutes: int) -> datetime:
    return START + timedelta(minutes=minutes)


def old_database_with_spellings(store: EventStore) -> dict[str, tuple]:
    """Fill a version-6 database; returns every event as (id -> (class, epoch, learner, kind, payload)).

    - "period3", the teacher's: epoch 1 archived (learner c), epoch 2 current (a "Ada", b with no name; a's
      prediction "keep-both" at 10:00, revealed; the lesson held at a step).
    - "Period3", a phone's capital: epoch 1 current (b "Bo", d "Di"; a's prediction "keep-erase" at 9:50,
      earlier than a's in "period3"; the question revealed here too).
    - "PERIOD3": epoch 1 archived (learner f), epoch 2 current (learner e).
    - "Chem-B", alone: epoch 1 current (learner g).
    """
    assert store.upgrade(target=6) == 6
    a, b, c, d, e, f, g = LEARNERS.values()
    classes = {"period3": [(1, 0, 30), (2, 30, None)], "Period3": [(1, 40, None)],
               "PERIOD3": [(1, 5, 20), (2, 20, None)], "Chem-B": [(1, 45, None)]}
    learners = {("period3", 1): [(c, None)], ("period3", 2): [(a, "Ada"), (b, None)],
                ("Period3", 1): [(b, "Bo"), (d, "Di"), (a, None)], ("PERIOD3", 1): [(f, None)],
                ("PERIOD3", 2): [(e, None)], ("Chem-B", 1): [(g, None)]}
    events: dict[str, tuple] = {}
    with store.engine.begin() as conn:
        for code, epochs in classes.items():
            conn.execute(schema.classes.insert().values(code=code, epoch=epochs[-1][0], created_at=_at(epochs[0][1])))
            for epoch, started, archived in epochs:
                conn.execute(schema.class_epochs.insert().values(
                    class_code=code, epoch=epoch, started_at=_at(started),
                    archived_at=None if archived is None else _at(archived)))
        for (code, epoch), joined in learners.items():
            for n, (learner, name) in enumerate(joined):
                conn.execute(schema.learners.insert().values(class_code=code, epoch=epoch, id=learner,
                                                             display_name=name, created_at=_at(41 + n)))
                event_id = f"00000000-0000-4000-8000-{len(events):012d}"
                payload = {"name": "mlp_scale", "value": len(events)}
                events[event_id] = (code, epoch, learner, "param", payload)
                conn.execute(schema.events.insert().values(
                    id=event_id, created_at=_at(42 + len(events)), class_code=code, epoch=epoch, learner_id=learner,
                    lesson=LESSON, explorable="transformer-block-trace", kind="param", payload=json.dumps(payload)))
        for code, learner, choice, minutes in (("period3", a, "keep-both", 60), ("Period3", a, "keep-erase", 50),
                                               ("Period3", b, "keep-both", 55)):
            epoch = classes[code][-1][0]
            event_id = f"00000000-0000-4000-9000-{len(events):012d}"
            payload = {"question": QUESTION, "choice": choice, "note": None}
            events[event_id] = (code, epoch, learner, "prediction", payload)
            conn.execute(schema.events.insert().values(
                id=event_id, created_at=_at(minutes), class_code=code, epoch=epoch, learner_id=learner, lesson=LESSON,
                explorable="transformer-block-trace", kind="prediction", payload=json.dumps(payload)))
            conn.execute(schema.predictions.insert().values(
                class_code=code, epoch=epoch, learner_id=learner, question=QUESTION, choice=choice, note=None,
                event_id=event_id, created_at=_at(minutes)))
        for code, epoch in (("period3", 2), ("Period3", 1)):
            conn.execute(schema.reveals.insert().values(class_code=code, epoch=epoch, question=QUESTION,
                                                        revealed_at=_at(61)))
        conn.execute(schema.paces.insert().values(class_code="period3", epoch=2, lesson=LESSON, hold="predict",
                                                  pushed=None, version=3, changed_at=_at(62)))
    return events


def check_merged(store: EventStore, events: dict[str, tuple]) -> None:
    """After the upgrade: every event kept, each in the lower-case class, in the epoch its spelling's epoch became;
    the current epochs are one; archived epochs stay archived and apart; learners, names, answers kept."""
    a, b, c, d, e, f, g = LEARNERS.values()
    assert store.class_codes() == ["chem-b", "period3"]
    with store.engine.connect() as conn:
        rows = {row.id: row for row in conn.execute(select(schema.events))}
        epochs = {(row.class_code, row.epoch): row.archived_at is None
                  for row in conn.execute(select(schema.class_epochs))}
        joined = {(row.class_code, row.epoch, row.id): row.display_name
                  for row in conn.execute(select(schema.learners))}
        answers = {(row.learner_id, row.epoch): row.choice for row in conn.execute(select(schema.predictions))}
    assert set(rows) == set(events)  # no event lost, none made
    for event_id, (code, _epoch, learner, kind, payload) in events.items():
        row = rows[event_id]
        assert (row.class_code, row.learner_id, row.kind, json.loads(row.payload)) == \
            (code.lower(), learner, kind, payload)
    now = store.epoch("period3")
    where = {learner: {row.epoch for row in rows.values() if row.learner_id == learner}
             for learner in LEARNERS.values()}
    assert where[a] == where[b] == where[d] == where[e] == {now}  # the current epochs are one
    assert len({*where[c], *where[f], now}) == 3  # the two archived epochs stay apart, and before it
    assert max(n for code, n in epochs if code == "period3") == now and epochs[("period3", now)]
    assert [open_ for (code, n), open_ in epochs.items() if code == "period3" and n != now] == [False, False]
    assert {learner: name for (code, n, learner), name in joined.items() if (code, n) == ("period3", now)} == \
        {a: "Ada", b: "Bo", d: "Di", e: None}  # b's name from "Period3"; a's from "period3"
    assert answers == {(a, now): "keep-erase", (b, now): "keep-both"}  # a's first commit stands
    assert store.is_revealed("period3", QUESTION) and store.pace("period3", LESSON).version == 3
    summary = store.summary("period3", LESSON)
    assert (summary["joined"], summary["committed"]) == (4, 2)
    assert store.epoch("chem-b") == 1 and store.learner_count("chem-b") == 1
    assert store.archive("period3") == now + 1  # the merged class goes on as any class does
