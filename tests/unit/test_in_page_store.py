"""The in-page exercise with a class store: "saved" only once the store has the result, the lines and the verdict
back after a reload, and the teacher's roster and CSV saying the exercise was done in the page."""

from __future__ import annotations

import csv
import io

import pytest

from blocktrace.app.classroom.store import EventStore
from blocktrace.app.classroom.teacher_view import roster_table
from blocktrace.app.server.rate_limits import TokenBuckets
from tests.unit.test_final_after_store import open_classroom
from tests.unit.test_resume import CLASS, LESSON, open_page, page_text

EXERCISE = "transformer-block-residual"


@pytest.fixture
def classroom(tmp_path):
    yield from open_classroom(EventStore(f"sqlite:///{tmp_path / 'class.db'}"))


def arrange(in_page, wrong: bool = False) -> None:
    """Put the right lines in every place, or, with `wrong`, the first wrong line in place of the one it stands for."""
    selects = iter(in_page.selects)
    for part in in_page.exercise.parts:
        mistake = part.wrong[0] if wrong and part is in_page.exercise.parts[0] else None
        for line in part.lines:
            next(selects).value = mistake.code if mistake and line.key == mistake.instead_of else line.code


def test_saved_after_the_store_then_resumed_and_shown_to_the_teacher(classroom) -> None:
    view, recorder, doc = open_page(classroom)
    in_page = view.in_page[EXERCISE]
    in_page.checks = TokenBuckets(capacity=100, per_second=1.0)
    arrange(in_page, wrong=True)
    in_page.button.clicks += 1
    assert "Saving…" in in_page.status.object and "No result yet." in page_text(view)  # not before the store has it
    doc.run_until(lambda: recorder.in_flight == 0 and in_page.status.object == "")
    assert "Checked in the page: 1 of 2 functions right" in page_text(view)
    arrange(in_page)
    in_page.button.clicks += 1
    doc.run_until(lambda: recorder.in_flight == 0 and in_page.status.object == "")
    assert "Checked in the page: every function is right" in page_text(view)
    chosen = [s.value for s in in_page.selects]

    again, _, _ = open_page(classroom)  # a reload: the same learner, a new session
    back = again.in_page[EXERCISE]
    assert [s.value for s in back.selects] == chosen and all(s.disabled for s in back.selects)
    assert back.state.attempts == 2 and again.progress.implement
    assert all("✓ Right." in f.object for f in back.feedback.values())

    rows = list(csv.DictReader(io.StringIO(classroom.store.export_csv(CLASS))))
    assert [r["exercise_way"] for r in rows if r["kind"] == "exercise"] == ["page", "page"]
    [entry] = classroom.store.summary(CLASS, LESSON.id)["roster"]
    assert (entry["exercise"], entry["exercise_way"]) == ("passed (checked)", "page")
    assert "<td>passed (checked)</td><td>in the page</td>" in roster_table(classroom.store.summary(CLASS, LESSON.id))
