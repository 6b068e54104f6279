"""The teacher's dashboard HTML: words right for one and many, learners' text escaped, a roster per lesson."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from blocktrace.app.classroom.rendering import render
from blocktrace.app.classroom.store import EventStore, new_event_id
from blocktrace.app.classroom.teacher_view import (
    bars,
    lesson_section,
    pace_forms,
    plural,
    presenter_bars,
    roster_table,
    teacher_href,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def summary(**changes):
    base = {"class_code": "p3", "epoch": 1, "lesson": "l", "joined": 0, "committed": 0, "distributions": {},
            "revealed": [], "claims": {}, "checkpoints": {}, "explanations": [], "misconceptions": [], "roster": []}
    return {**base, **changes}


def entry(label, done=(), committed=None, last=None):
    done = list(done)
    return {"label": label, "committed": "predict" in done if committed is None else committed, "done": done,
            "current": next((s for s in ("predict", "experiment", "implement", "explain") if s not in done), "done"),
            "last_active": last}


def test_words_for_one_and_many():
    assert [plural(n, "answer") for n in (0, 1, 2)] == ["0 answers", "1 answer", "2 answers"]
    assert "(1 answer)" in bars({"a": 1}, {"a": "A"}, "Predictions")
    assert "(3 answers)" in bars({"a": 1, "b": 2}, {"a": "A", "b": "B"}, "Predictions")
    html = lesson_section("T", summary(joined=1, committed=1, roster=[entry("Ada", ["predict"], last=NOW)]),
                          {}, {}, "tok", "light", NOW)
    assert "<strong>1</strong> learner joined the class · <strong>1</strong> learner committed" in html


@pytest.mark.parametrize("mine", [None, "b", "c"])
def test_the_bars_mark_only_the_learners_own_answer(mine):
    html = bars({"a": 1, "b": 3}, {"a": "A <b>", "b": "B", "c": "C"}, "The class answered", mine)
    rows = html.split("<tr")[2:]  # after the header's row
    assert [("(your answer)" in row, 'class="bt-own"' in row) for row in rows] == \
        [(key == mine, key == mine) for key in "abc"]
    assert [row.split('value="')[1].split('"')[0] for row in rows] == ["25", "75", "0"]  # shares, as bars
    assert "25 %" in html and "A &lt;b&gt;" in html and "A <b>" not in html


def test_roster_says_who_is_where_and_escapes_names():
    roster = [entry("<b>Bob</b>", ["predict", "experiment"], last=NOW - timedelta(minutes=3)),
              entry("Student 3f9a1c", [], last=NOW - timedelta(seconds=5)),
              entry("Idle")]
    html = roster_table(summary(roster=roster), NOW)
    assert "Roster: 3 learners, 2 learners not committed yet" in html
    assert "&lt;b&gt;Bob&lt;/b&gt;" in html and "<b>Bob</b>" not in html
    assert "2 of 4: Predict, Experiment" in html and "3 minutes ago" in html and "just now" in html
    assert html.count("not yet") == 3  # two "not yet" committed, one never active
    everyone = roster_table(summary(roster=[entry("Ada", ["predict"], last=NOW)]), NOW)
    assert "Roster: 1 learner, everyone has committed" in everyone
    idle = roster_table(summary(roster=[entry("Idle")]), NOW)
    assert "Nobody has started this lesson yet" in idle and ">Idle</th>" in idle  # who is still to start
    assert "Nobody has joined this class yet" in roster_table(summary(), NOW)


def test_each_checkpoint_has_its_own_bar_and_reveal_can_be_taken_back():
    html = lesson_section("T", summary(
        distributions={"q": {"a": 2}}, revealed=["q"],
        checkpoints={"c1": {"correct": 2, "incorrect": 1}, "why-stack": {"correct": 0, "incorrect": 1}}),
        {"q": ("Trace", {"a": "A"})}, {"c1": "Which input <tells>?"}, "tok", "dark", NOW)
    assert "Checkpoint: Which input &lt;tells&gt;? (3 answers)" in html
    assert "Checkpoint: why stack (1 answer)" in html  # a question the lesson does not list: its id, readable
    assert 'action="/teacher/unreveal"' in html and "Hide from the class" in html
    assert 'name="theme" value="dark"' in html
    assert teacher_href("/teacher", "p3", "dark") == "/teacher?class=p3&theme=dark"
    assert teacher_href("/teacher", "p3", "light") == "/teacher?class=p3"


def test_unreveal_takes_a_reveal_back(tmp_path):
    store = EventStore(f"sqlite:///{tmp_path / 'c.db'}")
    store.upgrade()
    store.commit_prediction(new_event_id(), "p3", "a" * 32, "q", "x", None, "l", "e")
    store.reveal("p3", "q")
    assert store.is_revealed("p3", "q") and store.visible_distribution("p3", "a" * 32, "q") == {"x": 1}
    store.unreveal("p3", "q")
    store.unreveal("p3", "q")  # idempotent
    assert not store.is_revealed("p3", "q") and store.visible_distribution("p3", "a" * 32, "q") is None
    assert store.learner_count("p3") == 1
    store.close()


def test_the_pacing_forms_carry_the_token_and_show_what_was_typed_as_text():
    """Both pacing forms carry the XSRF token; a pushed state and an error message with markup show as text."""
    pace = SimpleNamespace(hold="experiment", pushed={"state": {"attention_scale": "<b>0</b>"}})
    html = pace_forms("p3", "l", "e", pace, "tok", "light", error="<i>no</i>")
    assert html.count('<input type="hidden" name="_xsrf" value="tok">') == 2
    assert "attention_scale=&lt;b&gt;0&lt;/b&gt;" in html and "&lt;i&gt;no&lt;/i&gt;" in html
    assert "<b>" not in html and "<i>" not in html
    assert 'value="experiment" aria-pressed="true">Hold at Experiment' in html and "Release" in html
    assert "Release" not in pace_forms("p3", "l", "e", None, "tok", "light")


def test_the_presenter_page_says_when_the_store_is_off_or_unreachable():
    """The presenter's page keeps its layout (the explorable beside the answers) when there are no counts."""
    values = {"title": "Present", "tagline": "t", "theme": "dark", "refresh": True, "refresh_seconds": 5,
              "other_theme": "/teacher/present?class=p3", "src": "/x?a=1&b=2", "frame_title": "X",
              "lesson_title": "L", "summary": None, "answers": "", "logout": "tok"}
    off = render("present.html", state="off", **values)
    assert "The classroom store is off" in off and 'class="teacher bt-page bt-presenter"' in off
    assert '<iframe class="bt-present-frame" src="/x?a=1&amp;b=2" title="X">' in off and "dark.css" in off
    assert "cannot be reached" in render("present.html", state="unavailable", **values)
    shown = render("present.html", state="ok", **{**values, "summary": summary(joined=2, committed=1),
                                                     "answers": presenter_bars(summary(), {})})
    assert "No predictions committed yet." in shown and "<strong>1</strong> learner of 2 committed" in shown
