"""The teacher's CSV export: every event of every epoch, oldest first, safe to open in a spreadsheet."""

from __future__ import annotations

import csv
import io
import json

from sqlalchemy import Connection, and_, select

from blocktrace.app.classroom.class_summary import exercise_way
from blocktrace.app.classroom.schema import events, learners
from blocktrace.app.classroom.store_engine import as_utc

__all__ = ["CSV_COLUMNS", "events_csv"]

CSV_COLUMNS = ("event_id", "created_at", "class_code", "epoch", "learner_id", "display_name",
               "lesson", "explorable", "kind", "payload", "exercise_way")


def events_csv(conn: Connection, class_code: str | None = None) -> str:
    """Every event of every epoch (of one class, or of all), oldest first, as CSV text read on `conn`.

    Columns: ``CSV_COLUMNS``; the last, exercise_way, says of an exercise result how the learner did it: "laptop"
    (`blocktrace check`), "page" (the in-page version) or "self-report" (empty for other events). Cells that a
    spreadsheet would run as a formula start with "'".
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
    for row in conn.execute(query):
        cells = list(row)
        cells[1] = as_utc(cells[1]).isoformat()
        cells.append(_way(cells[8], cells[9]))
        writer.writerow([_csv_cell(cell) for cell in cells])
    return out.getvalue()


def _way(kind: str, payload: str) -> str:
    if kind != "exercise":
        return ""
    try:
        found = json.loads(payload)
    except (TypeError, ValueError):
        return ""
    return exercise_way(found) if isinstance(found, dict) else ""


def _csv_cell(value: object) -> object:
    # A spreadsheet would run a cell starting with = + - @ as a formula (CSV injection).
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value
