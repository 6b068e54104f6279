"""The exercise done in the page, on every lesson that has an exercise: the server's word on each function, a result
shaped like a `blocktrace check` report, the last lines kept, checks limited in rate, nothing while the teacher
holds the class, and no answer in what the browser is sent."""

from __future__ import annotations

import json
from html import escape

import panel as pn
import pytest
from bokeh.core.json_encoder import serialize_json
from bokeh.document import Document

from blocktrace.app.exercises.in_page import load_in_page
from blocktrace.app.exercises.in_page_view import EMPTY, InPageView
from blocktrace.app.lessons.loading import load_lessons
from blocktrace.app.lessons.page import LessonView
from blocktrace.app.lti.grades import _point
from blocktrace.app.server.rate_limits import TokenBuckets
from blocktrace.app.xapi.statements import statement_for

LESSONS = [lesson for lesson in load_lessons() if lesson.directives("exercise")]


def open_page(lesson) -> tuple[LessonView, InPageView, list[tuple[str, dict]]]:
    events: list[tuple[str, dict]] = []
    view = LessonView(lesson, on_event=lambda kind, payload: events.append((kind, payload)))
    [in_page] = view.in_page.values()
    in_page.checks = TokenBuckets(capacity=100, per_second=1.0)  # this test's own table: no wait between checks
    return view, in_page, events


def put(in_page: InPageView, arrangement: dict[str, list[str]]) -> None:
    """Choose lines in the selects, as a student does (each select sets its place)."""
    selects = iter(in_page.selects)
    for part in in_page.exercise.parts:
        for line in arrangement[part.function]:
            next(selects).value = line


def right(in_page: InPageView) -> dict[str, list[str]]:
    return {p.function: [line.code for line in p.lines] for p in in_page.exercise.parts}


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
def test_wrong_lines_get_hints_and_the_right_ones_pass_once_for_good(lesson):
    """A wrong line gets its hint under its function and a failing result; the right lines pass, the result is a
    checked exercise event the LMS score and xAPI count, and the selects are fixed."""
    view, in_page, events = open_page(lesson)
    exercise_id = lesson.directives("exercise")[0].attrs["id"]
    first = in_page.exercise.parts[0]
    mistake = first.wrong[0]
    lines = right(in_page)
    lines[first.function] = [mistake.code if x.key == mistake.instead_of else x.code for x in first.lines]
    put(in_page, lines)
    in_page.button.clicks += 1
    assert mistake.hint in in_page.feedback[first.function].object
    assert all("✓ Right." in in_page.feedback[p.function].object for p in in_page.exercise.parts[1:])
    kind, failing = events[-1]
    assert kind == "exercise" and failing["passed"] is False and failing["way"] == "page"
    assert failing["failed"] == [first.function] and failing["tests_total"] == len(in_page.exercise.parts)
    assert view.progress.implement and not any(s.disabled for s in in_page.selects)

    put(in_page, right(in_page))
    in_page.button.clicks += 1
    _, passing = events[-1]
    assert passing == {"id": exercise_id, "way": "page", "checked": True, "passed": True,
                       "tests_passed": len(in_page.exercise.parts), "tests_total": len(in_page.exercise.parts),
                       "failed": [], "attempts": 2, "arrangement": right(in_page)}
    assert all(s.disabled for s in in_page.selects) and in_page.button.disabled
    in_page.button.clicks += 1  # fixed: no further check, nothing more recorded
    assert len(events) == 2
    assert _point("exercise", passing, frozenset()) == "exercise"
    assert _point("exercise", failing, frozenset()) is None
    event = {"id": "e1", "created_at": __import__("datetime").datetime(2026, 1, 1), "class_code": "c",
             "learner_id": "l", "lesson": lesson.id, "explorable": None, "kind": "exercise", "payload": passing}
    assert statement_for(event, "http://school")["verb"]["display"]["en-US"] == "passed"


def test_an_empty_place_is_named_and_the_lines_stay():
    """Checking with a place left empty says so, and every line chosen stays where it was."""
    _, in_page, events = open_page(LESSONS[0])
    lines = right(in_page)
    first = in_page.exercise.parts[0].function
    lines[first] = [lines[first][0]] + [EMPTY] * (len(lines[first]) - 1)
    put(in_page, {k: [x if x != EMPTY else "" for x in v] for k, v in lines.items()})
    before = [s.value for s in in_page.selects]
    in_page.button.clicks += 1
    assert "Put a line in every place." in in_page.feedback[first].object
    assert [s.value for s in in_page.selects] == before and events[-1][1]["passed"] is False


def test_checks_come_at_most_once_per_gap_and_not_while_held():
    """A second check within the gap is refused with the wait (the lines kept, nothing recorded); while the teacher
    holds the class before the exercise, a check does nothing at all."""
    view, in_page, events = open_page(LESSONS[0])
    in_page.checks = TokenBuckets(capacity=1, per_second=1 / 3600)
    put(in_page, right(in_page))
    view._closed = {"implement"}  # what the teacher's hold sets (LessonView._follow_pace)
    in_page.button.clicks += 1
    assert events == [] and in_page.status.object == ""
    view._closed = set()
    put(in_page, {p.function: [p.offered[0]] * len(p.lines) for p in in_page.exercise.parts})
    in_page.button.clicks += 1
    put(in_page, right(in_page))
    in_page.button.clicks += 1
    assert len(events) == 1 and "Wait 3600 s before you check again" in in_page.status.object
    assert [s.value for s in in_page.selects] == [x for v in right(in_page).values() for x in v]


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.id)
def test_the_browser_is_sent_the_lines_but_not_which_are_right(lesson):
    """The page's Bokeh document holds every line offered and none of the hints that would say which lines are
    wrong; after a check, the hint of the wrong line chosen."""
    _, in_page, _ = open_page(lesson)
    doc = Document()
    doc.add_root(pn.panel(in_page).get_root(doc))

    def sent() -> str:  # what Bokeh sends the browser for this part, its strings as written
        return json.dumps(json.loads(serialize_json(doc.to_json())), ensure_ascii=False)

    def held(text: str) -> bool:  # as written, or escaped for HTML
        return any(json.dumps(t, ensure_ascii=False)[1:-1] in sent() for t in (text, escape(text)))

    exercise = load_in_page(*next((d.attrs["path"], d.attrs["file"]) for d in lesson.directives("exercise")))
    for part in exercise.parts:
        assert all(held(code) for code in part.offered)
        assert not [w.hint for w in part.wrong if held(w.hint)]
    first = exercise.parts[0]
    lines = right(in_page)
    lines[first.function] = [first.wrong[0].code if x.key == first.wrong[0].instead_of else x.code
                             for x in first.lines]
    put(in_page, lines)
    in_page.button.clicks += 1
    assert held(first.wrong[0].hint)
