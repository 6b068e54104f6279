"""Grades to the LMS's gradebook (LTI Assignment and Grade Services), through a durable outbox in the store.

- A learner's launch keeps where their scores go (store.lti_link): the LMS user, the course's line items URL
  and the scopes the launch granted. Only a signed launch writes it, so a learner's work in one course is never
  scored in another.
- `queue_scores` turns each linked learner's work in each lesson into a score: one point for the prediction
  committed, one for each of the lesson's checkpoints answered, one for its exercise passed by its tests (as the
  server checked them). Each score is a delivery whose id names the class, learner, lesson and score, so the same
  score is kept and sent once.
- `send_scores` posts due deliveries with PyLTI1p3 (the line item "blocktrace: <lesson>" found by its tag, made
  once), and puts a failed one back with a growing wait (BACKOFF_S doubling up to MAX_BACKOFF_S): an LMS that is
  down, or a server restart, loses nothing.
- app/classroom/senders.py runs both every few seconds on a thread of its own, in each server process.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import requests
from pylti1p3.assignments_grades import AssignmentsGradesService
from pylti1p3.exception import LtiException
from pylti1p3.grade import Grade
from pylti1p3.lineitem import LineItem
from pylti1p3.service_connector import ServiceConnector

from blocktrace.app.classroom.store import EventStore
from blocktrace.app.classroom.store_validation import PREDICTION
from blocktrace.app.lessons.loading import load_lessons
from blocktrace.app.lti import platforms, tool_keys

__all__ = ["AGS", "KIND", "link_from_launch", "queue_scores", "send_scores"]

log = logging.getLogger("blocktrace.lti")

AGS = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
KIND = "lti-score"
SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
LINEITEM_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
BACKOFF_S = 10.0
MAX_BACKOFF_S = 3600.0
BATCH = 50
LEASE_S = 120.0


def link_from_launch(body: dict[str, Any], client_id: str) -> dict[str, Any] | None:
    """Where a launch's scores go, if its LMS lets blocktrace post scores and make line items; else None."""
    endpoint = body.get(AGS)
    if not isinstance(endpoint, dict) or not isinstance(endpoint.get("lineitems"), str):
        return None
    scopes = [s for s in endpoint.get("scope") or [] if isinstance(s, str)]
    if SCORE_SCOPE not in scopes or LINEITEM_SCOPE not in scopes:
        return None
    return {"issuer": body["iss"], "client_id": client_id, "user_id": body["sub"], "lineitems": endpoint["lineitems"],
            "scope": scopes}


def _point(kind: str, payload: Any, checkpoints: frozenset[str]) -> str | None:
    """What an event earns in its lesson: "predict", "checkpoint:<id>", "exercise", or None."""
    if kind == PREDICTION:
        return "predict"
    if kind == "checkpoint" and isinstance(payload, dict) and payload.get("checkpoint") in checkpoints:
        return f"checkpoint:{payload['checkpoint']}"
    if kind == "exercise" and isinstance(payload, dict) and payload.get("checked") and payload.get("passed") is True:
        return "exercise"
    return None


def _lessons() -> dict[str, tuple[str, frozenset[str], int]]:
    """Each lesson: its title, its checkpoints' ids and the points it has."""
    out = {}
    for lesson in load_lessons():
        checkpoints = frozenset(str(d.attrs.get("id")) for d in lesson.directives("checkpoint"))
        out[lesson.id] = (lesson.title, checkpoints, 1 + len(checkpoints) + bool(lesson.directives("exercise")))
    return out


def queue_scores(store: EventStore, now: datetime | None = None) -> int:
    """Keep a delivery for every linked learner's score in each lesson they worked in; how many are new."""
    now = now or datetime.now(UTC)
    lessons = _lessons()
    by_class: dict[str, dict[str, dict]] = {}
    for class_code, learner, link in store.lti_links():
        by_class.setdefault(class_code, {})[learner] = link
    added = 0
    for class_code, links in by_class.items():
        done: dict[tuple[str, str], set[str]] = {}
        for learner, lesson, kind, payload in store.lesson_events(class_code, list(links)):
            point = _point(kind, payload, lessons[lesson][1]) if lesson in lessons else None
            if point is not None:
                done.setdefault((learner, lesson), set()).add(point)
        items = []
        for (learner, lesson), points in sorted(done.items()):
            link, score = links[learner], len(points)
            title, _, maximum = lessons[lesson]
            items.append((f"score:{class_code}:{learner}:{lesson}:{score}", {
                **link, "lesson": lesson, "title": title, "score": score, "maximum": maximum,
                "timestamp": now.isoformat(timespec="milliseconds").replace("+00:00", "Z")}))
        added += store.enqueue(KIND, items, now)
    return added


def _grade(payload: dict) -> Grade:
    complete = payload["score"] >= payload["maximum"]
    return (Grade().set_score_given(payload["score"]).set_score_maximum(payload["maximum"])
            .set_timestamp(payload["timestamp"]).set_user_id(payload["user_id"])
            .set_activity_progress("Completed" if complete else "InProgress")
            .set_grading_progress("FullyGraded" if complete else "Pending"))


def send_scores(store: EventStore, data_dir: Path, now: datetime | None = None,
                session_factory: Callable[[], requests.Session] = requests.Session) -> tuple[int, int]:
    """Post the due scores; (sent, put back for later)."""
    now = now or datetime.now(UTC)
    claimed = store.claim_deliveries(KIND, BATCH, LEASE_S, now)
    if not claimed:
        return 0, 0
    conf = platforms.tool_conf(platforms.load(data_dir), tool_keys.load_or_create(data_dir))
    services: dict[tuple, AssignmentsGradesService] = {}
    lineitems: dict[tuple, LineItem] = {}
    sent = failed = 0
    while claimed:
        s, f = _send_batch(store, conf, claimed, services, lineitems, now, session_factory)
        sent, failed = sent + s, failed + f
        claimed = store.claim_deliveries(KIND, BATCH, LEASE_S, now)
    if failed:
        log.warning("LTI scores: %d sent, %d put back to try again", sent, failed)
    return sent, failed


def _send_batch(store: EventStore, conf, claimed: list, services: dict, lineitems: dict, now: datetime,
                session_factory: Callable[[], requests.Session]) -> tuple[int, int]:
    sent = failed = 0
    for delivery_id, attempts, payload in claimed:
        try:
            where = (payload["issuer"], payload["client_id"], payload["lineitems"], tuple(payload["scope"]))
            if where not in services:
                registration = conf.find_registration_by_params(payload["issuer"], payload["client_id"])
                if registration is None:
                    raise LtiException("the platform is no longer registered")
                services[where] = AssignmentsGradesService(ServiceConnector(registration, session_factory()), {
                    "lineitems": payload["lineitems"], "scope": payload["scope"]})
            ags = services[where]
            item_key = (*where, payload["lesson"])
            if item_key not in lineitems:
                lineitems[item_key] = ags.find_or_create_lineitem(
                    LineItem().set_tag(f"blocktrace-{payload['lesson']}").set_resource_id(payload["lesson"])
                    .set_label(f"blocktrace: {payload['title']}").set_score_maximum(payload["maximum"]),
                    find_by="tag")
            ags.put_grade(_grade(payload), lineitems[item_key])
        except (LtiException, requests.RequestException, KeyError, TypeError, ValueError) as error:
            wait = min(MAX_BACKOFF_S, BACKOFF_S * 2 ** attempts)
            store.retry_later(delivery_id, str(error) or type(error).__name__, now + timedelta(seconds=wait))
            failed += 1
            continue
        store.delivered(delivery_id, now)
        sent += 1
    return sent, failed
