"""What one learner can put into the store and the teacher's page: texts cut to the pages' limits,
oversized events refused with a message, and every answer counted once per learner and question."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from blocktrace.app.classroom import identity
from blocktrace.app.classroom.outbox import Outbox
from blocktrace.app.classroom.store import (
    MAX_ITEMS,
    MAX_NOTE,
    MAX_PAYLOAD,
    MAX_TEXT,
    EventStore,
    StoreUnavailable,
    check_prediction,
    check_record,
    default_url,
    new_event_id,
)
from blocktrace.app.lessons import page as lesson_page
from blocktrace.app.server import session_setup
from blocktrace.explorables.components import prediction as prediction_component

CLASS = "physics-3"
LESSON = "block-floor"
QUESTION = "transformer-block-trace/prediction"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[EventStore]:
    with EventStore(default_url(tmp_path / "data")) as opened:
        yield opened


def test_the_server_limits_are_the_pages_limits():
    """The store cuts at exactly the lengths the pages' fields allow, so an honest learner is never cut."""
    assert MAX_TEXT == lesson_page.MAX_EXPLANATION
    assert MAX_NOTE == prediction_component.MAX_NOTE
    assert identity.MAX_NAME == 40 and 'max_length=40' in Path(session_setup.__file__).read_text()


def test_a_60000_character_explanation_is_stored_as_2000(store: EventStore, caplog):
    """A client bypassing the page's limit gets its text cut on the server, with one log line saying so."""
    with caplog.at_level(logging.WARNING, logger="blocktrace.app.classroom.store_validation"):
        assert store.record(new_event_id(), CLASS, "ada", "explanation", {"text": "y" * 60_000}, LESSON)
    [(_who, text)] = store.summary(CLASS, LESSON)["explanations"]
    assert text == "y" * MAX_TEXT
    assert "cut a text in a 'explanation' event of 60000 characters to the 2000 the page allows" in caplog.text
    assert "Traceback" not in caplog.text


def test_every_text_in_a_payload_is_cut_and_a_note_too():
    """Nested texts (a typed phrase, a list of words) and long lists are cut; a note is cut to the page's 500."""
    args = check_record(new_event_id(), CLASS, "ada", "param",
                        {"name": "phrase", "value": "w" * 10_000, "words": ["v" * 5000]}, LESSON)
    payload = json.loads(args["payload"])
    assert payload["value"] == "w" * MAX_TEXT and payload["words"] == ["v" * MAX_TEXT]
    listed = check_record(new_event_id(), CLASS, "ada", "param", {"name": "vector", "value": list(range(5000))})
    assert json.loads(listed["payload"])["value"] == list(range(MAX_ITEMS))
    note = check_prediction(new_event_id(), CLASS, "ada", QUESTION, "keep-erase", "n" * 9000, LESSON, None)["note"]
    assert note == "n" * MAX_NOTE
    assert check_prediction(new_event_id(), CLASS, "ada", QUESTION, "keep-erase", "", LESSON, None)["note"] is None


def test_oversized_or_malformed_events_are_refused_with_a_message():
    """Events the pages never send are refused with a message naming the limit (nothing stored)."""
    with pytest.raises(ValueError, match=f"at most {MAX_PAYLOAD} characters of JSON"):
        check_record(new_event_id(), CLASS, "ada", "claim", {f"k{i}": "x" * 1000 for i in range(100)}, LESSON)
    with pytest.raises(ValueError, match="at most 200 keys"):
        check_record(new_event_id(), CLASS, "ada", "claim", {f"k{i}": i for i in range(500)}, LESSON)
    deep: dict = {}
    for _ in range(20):
        deep = {"d": deep}
    with pytest.raises(ValueError, match="8 levels"):
        check_record(new_event_id(), CLASS, "ada", "claim", deep, LESSON)
    with pytest.raises(ValueError, match="1-80"):
        check_prediction(new_event_id(), CLASS, "ada", QUESTION, "c" * 81, None, LESSON, None)
    with pytest.raises(ValueError, match="not a kind"):
        check_record(new_event_id(), CLASS, "ada", "k" * 81, {}, LESSON)


def test_names_are_limited_on_the_server(store: EventStore):
    """A display name longer than the page's 40 characters is refused by the store, whatever sent it."""
    with pytest.raises(ValueError, match="clean_display_name"):
        store.join(CLASS, "ada", "n" * 41)
    assert identity.clean_display_name("n" * 41) is None


def test_pressing_check_answer_2000_times_counts_once(store: EventStore):
    """One learner's 2,000 checkpoint answers, 300 claims and 50 explanations count once each on the dashboard;
    the latest answer is the one counted."""
    for i in range(2000):
        store.record(new_event_id(), CLASS, "ada", "checkpoint",
                     {"checkpoint": "c1", "correct": i == 1999, "answer": str(i)}, LESSON)
    for i in range(300):
        store.record(new_event_id(), CLASS, "ada", "claim",
                     {"explorable": "block-floor", "verdict": "too_early" if i < 299 else "right_on"}, LESSON)
    for i in range(50):
        store.record(new_event_id(), CLASS, "ada", "explanation", {"text": f"attempt {i}"}, LESSON)
    store.record(new_event_id(), CLASS, "bob", "checkpoint", {"checkpoint": "c1", "correct": False}, LESSON)
    store.record(new_event_id(), CLASS, "bob", "checkpoint", {"checkpoint": "c2", "correct": True}, LESSON)
    store.record(new_event_id(), CLASS, "bob", "explanation", {"text": "bob's"}, LESSON)
    summary = store.summary(CLASS, LESSON)
    assert summary["checkpoints"] == {"c1": {"correct": 1, "incorrect": 1},  # ada's latest c1 is right
                                      "c2": {"correct": 1, "incorrect": 0}}
    assert summary["claims"] == {"right_on": 1}
    assert summary["explanations"] == [("Student ada", "attempt 49"), ("Student bob", "bob's")]



def test_the_outbox_holds_a_bounded_amount_of_text_while_the_store_is_down():
    """Queued writes are bounded in characters too, not only in number: past the bound a write is refused."""

    class DownStore:
        def record(self, **_kwargs) -> bool:
            raise StoreUnavailable("down")

    outbox = Outbox(DownStore(), max_chars=50_000)  # type: ignore[arg-type]
    big = {"parts": ["x" * 2000] * 7}  # about 14,000 characters of JSON
    for _ in range(3):
        assert outbox.record(new_event_id(), CLASS, "ada", "param", big, LESSON) is None
    with pytest.raises(StoreUnavailable, match="this one is lost"):
        outbox.record(new_event_id(), CLASS, "ada", "param", big, LESSON)
    assert outbox.pending == 3
    assert outbox.record(new_event_id(), CLASS, "ada", "param", {"n": 1}, LESSON) is None  # small ones still fit
