"""Scores to a test LMS's gradebook over HTTP, with real keys: a learner's work in a lesson becomes a score in
its column, each score is sent once, an LMS outage or a restart loses nothing, and no score reaches another
course than the one the learner's launch came from."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from blocktrace.app.classroom.store import EventStore
from blocktrace.app.lti import grades, platforms, tool_keys, who
from tests.lti_platform import TestPlatform, serving_json

SECRET = b"s" * 32
SCOPES = ["https://purl.imsglobal.org/spec/lti-ags/scope/lineitem", "https://purl.imsglobal.org/spec/lti-ags/scope/score"]
LESSON = "transformer-block"
T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


@pytest.fixture
def lms() -> Iterator[TestPlatform]:
    with TestPlatform() as platform:
        yield platform


@pytest.fixture
def setup(tmp_path: Path, lms: TestPlatform):
    """A data dir with the tool's keys and the platform registered, its store, and the tool's JWKS on HTTP (the
    platform checks the tool's token requests against it)."""
    keys = tool_keys.load_or_create(tmp_path)
    platforms.add(tmp_path, platforms.Platform(lms.issuer, lms.client_id, (lms.deployment_id,), lms.url + "/auth",
                                               lms.url + "/token", lms.url + "/jwks.json"))
    with serving_json(keys.jwks) as tool:
        lms.tool_url = tool
        store = EventStore(f"sqlite:///{tmp_path}/classroom.db")
        yield tmp_path, store
        store.close()


def link(lms: TestPlatform, user: str, lineitems: str | None = None) -> dict:
    body = {"iss": lms.issuer, "sub": user,
            grades.AGS: {"lineitems": lineitems or lms.url + "/lineitems", "scope": SCOPES}}
    return grades.link_from_launch(body, lms.client_id)


def work(store: EventStore, class_code: str, learner: str, kind: str, payload: dict) -> None:
    store.record(uuid.uuid4().hex, class_code, learner, kind, payload, LESSON, "transformer-block-trace")


def test_a_learners_work_becomes_their_score_once(setup, lms: TestPlatform) -> None:
    data_dir, store = setup
    course = who.class_for(SECRET, lms.issuer, lms.deployment_id, "course-101")
    ada = who.learner_for(SECRET, lms.issuer, "student-1")
    store.lti_link(course, ada, link(lms, "student-1"))
    store.commit_prediction(uuid.uuid4().hex, course, ada, "transformer-block-trace/prediction", "keep-erase", "",
                            LESSON, "transformer-block-trace")
    work(store, course, ada, "claim", {"explorable": "transformer-block-trace", "verdict": "right"})  # no point
    work(store, course, ada, "checkpoint", {"checkpoint": "zero-updates", "answer": "a", "correct": False})
    assert grades.queue_scores(store, T0) == 1
    assert grades.queue_scores(store, T0) == 0  # the same score is kept once
    assert grades.send_scores(store, data_dir, T0) == (1, 0)
    [column] = lms.line_items
    assert column["label"].startswith("blocktrace: ") and column["resourceId"] == LESSON
    assert column["scoreMaximum"] == 4 and column["tag"] == f"blocktrace-{LESSON}"  # predict, 2 checkpoints, exercise
    [(item, score)] = lms.scores
    assert item == column["id"] and score["userId"] == "student-1" and score["scoreGiven"] == 2
    assert score["activityProgress"] == "InProgress" and score["gradingProgress"] == "Pending"
    assert grades.send_scores(store, data_dir, T0) == (0, 0)  # nothing sent twice
    work(store, course, ada, "exercise", {"checked": True, "passed": False, "tests_passed": 3, "tests_total": 5})
    assert grades.queue_scores(store, T0) == 0  # a failing exercise is not "implemented"
    work(store, course, ada, "exercise", {"checked": True, "passed": True, "tests_passed": 5, "tests_total": 5})
    work(store, course, ada, "checkpoint", {"checkpoint": "constant-vector", "answer": "b", "correct": True})
    assert grades.queue_scores(store, T0 + timedelta(seconds=1)) == 1
    assert grades.send_scores(store, data_dir, T0 + timedelta(seconds=1)) == (1, 0)
    assert len(lms.line_items) == 1  # the lesson's column is found by its tag, not made again
    assert lms.scores[-1][1]["scoreGiven"] == 4 and lms.scores[-1][1]["activityProgress"] == "Completed"
    assert store.delivery_counts(grades.KIND) == (0, 0)


def test_an_lms_outage_and_a_restart_lose_nothing(setup, lms: TestPlatform) -> None:
    data_dir, store = setup
    course = who.class_for(SECRET, lms.issuer, lms.deployment_id, "course-101")
    learners = [who.learner_for(SECRET, lms.issuer, f"student-{i}") for i in range(3)]
    for i, learner in enumerate(learners):
        store.lti_link(course, learner, link(lms, f"student-{i}"))
        work(store, course, learner, "checkpoint", {"checkpoint": "zero-updates", "answer": "a", "correct": True})
    assert grades.queue_scores(store, T0) == 3
    lms.down = True
    assert grades.send_scores(store, data_dir, T0) == (0, 3)
    assert store.delivery_counts(grades.KIND) == (3, 3)
    assert grades.send_scores(store, data_dir, T0 + timedelta(seconds=5)) == (0, 0)  # waiting out the backoff
    assert grades.send_scores(store, data_dir, T0 + timedelta(seconds=11)) == (0, 3)  # tried again, still down
    lms.down = False
    store.close()
    restarted = EventStore(f"sqlite:///{data_dir}/classroom.db")  # what a restarted server opens
    assert grades.send_scores(restarted, data_dir, T0 + timedelta(seconds=25)) == (0, 0)  # the wait doubled: 20 s
    assert grades.send_scores(restarted, data_dir, T0 + timedelta(seconds=31)) == (3, 0)
    assert sorted(s["userId"] for _, s in lms.scores) == ["student-0", "student-1", "student-2"]
    assert restarted.delivery_counts(grades.KIND) == (0, 0)
    restarted.close()


def test_no_score_reaches_another_course(setup, lms: TestPlatform) -> None:
    data_dir, store = setup
    course_a = who.class_for(SECRET, lms.issuer, lms.deployment_id, "course-a")
    course_b = who.class_for(SECRET, lms.issuer, lms.deployment_id, "course-b")
    ada = who.learner_for(SECRET, lms.issuer, "student-1")
    store.lti_link(course_a, ada, link(lms, "student-1", lms.url + "/lineitems?course=a"))
    store.lti_link(course_b, ada, link(lms, "student-1", lms.url + "/lineitems?course=b"))
    work(store, course_a, ada, "checkpoint", {"checkpoint": "zero-updates", "answer": "a", "correct": True})
    assert grades.queue_scores(store, T0) == 1
    [(_, _, payload)] = store.claim_deliveries(grades.KIND, 10, 0.0, T0)
    assert payload["lineitems"].endswith("course=a")


def test_a_launch_that_grants_no_scores_keeps_no_link(lms: TestPlatform) -> None:
    body = {"iss": lms.issuer, "sub": "student-1", grades.AGS: {"lineitems": lms.url + "/lineitems",
                                                                "scope": SCOPES[:1]}}
    assert grades.link_from_launch(body, lms.client_id) is None
    assert grades.link_from_launch({"iss": lms.issuer, "sub": "x"}, lms.client_id) is None
