"""Statements through the store's outbox to the learning record store.

`queue_statements` reads the events stored since its cursor (with OVERLAP_S of slack, for a write another
process committed late) and keeps each one's statement as a delivery whose id is the statement's id: read
twice, it is kept once. A learner who has done all four steps of a lesson gets one "completed" statement for it.
`send_statements` posts due statements in batches of BATCH (xAPI's POST /statements with a list). The LRS
stores a statement once: the same statement again is accepted without a second copy (204), so a batch whose
answer was lost is simply sent again. A failed batch waits BACKOFF_S, doubling up to MAX_BACKOFF_S, and
nothing is dropped. An LRS that says a statement with that id differs (409) has it already: it is counted as
sent and logged.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import requests

from blocktrace.app.classroom.class_summary import STEP_KINDS, STEPS
from blocktrace.app.classroom.store import EventStore
from blocktrace.app.xapi.statements import NAMESPACE, statement_for

__all__ = ["KIND", "XapiTarget", "backlog", "queue_statements", "send_statements"]

log = logging.getLogger("blocktrace.xapi")

KIND = "xapi"
CURSOR = "xapi-cursor"
CURSOR_SECONDS = 10 * 365 * 86400
OVERLAP_S = 30.0
BATCH = 100
LEASE_S = 120.0
BACKOFF_S = 5.0
MAX_BACKOFF_S = 600.0
TIMEOUT_S = 15.0
VERSION = "1.0.3"


@dataclass(frozen=True)
class XapiTarget:
    """The school's LRS: its xAPI endpoint (ending before /statements), the credentials blocktrace posts with,
    the server's public address (home of learner accounts and activities) and whether learners' names go too."""

    endpoint: str
    username: str
    password: str
    home: str
    names: bool = False

    @property
    def statements_url(self) -> str:
        return self.endpoint.rstrip("/") + "/statements"


def _completed(store: EventStore, fresh: list[dict], target: XapiTarget, now: datetime) -> list[tuple[str, dict]]:
    """One "completed" statement per (class, learner, lesson) whose four steps are all done, made from the newest
    event that completed it; looked at only for those that had an event in this round."""
    touched: dict[str, set[str]] = {}
    for event in fresh:
        if event["lesson"]:
            touched.setdefault(event["class_code"], set()).add(event["learner_id"])
    out = []
    for class_code, learners in touched.items():
        steps: dict[tuple[str, str], set[str]] = {}
        for learner, lesson, kind, payload in store.lesson_events(class_code, sorted(learners)):
            step = STEP_KINDS.get(kind)
            if kind == "exercise" and not (isinstance(payload, dict) and payload.get("passed") is True
                                           and payload.get("checked")):
                step = None
            if step:
                steps.setdefault((learner, lesson), set()).add(step)
        for (learner, lesson), done in sorted(steps.items()):
            if len(done) < len(STEPS):
                continue
            key = f"completed:{class_code}:{learner}:{lesson}"
            home = target.home.rstrip("/")
            statement = {
                "id": str(uuid.uuid5(NAMESPACE, key)),
                "actor": {"objectType": "Agent", "account": {"homePage": home, "name": learner}},
                "verb": {"id": "http://adlnet.gov/expapi/verbs/completed", "display": {"en-US": "completed"}},
                "object": {"objectType": "Activity", "id": f"{home}/lessons/{lesson}",
                           "definition": {"type": "http://adlnet.gov/expapi/activities/lesson",
                                          "name": {"en-US": lesson}}},
                "result": {"completion": True},
                "context": {"platform": "blocktrace", "extensions": {f"{home}/xapi/class": class_code}},
                "timestamp": now.isoformat(timespec="milliseconds").replace("+00:00", "Z")}
            out.append((statement["id"], statement))
    return out


def queue_statements(store: EventStore, target: XapiTarget, now: datetime | None = None) -> int:
    """Keep the statements of the events stored since the last round; how many are new."""
    now = now or datetime.now(UTC)
    kept = store.lti_get(CURSOR)
    if kept is None:  # the first round: learning records start now, not with the class's history
        store.lti_put(CURSOR, json.dumps(now.isoformat()), CURSOR_SECONDS)
        return 0
    cursor = datetime.fromisoformat(json.loads(kept))
    fresh = store.events_after(cursor - timedelta(seconds=OVERLAP_S))
    items = []
    for event in fresh:
        statement = statement_for(event, target.home, event["name"] if target.names else None)
        if statement is not None:
            items.append((statement["id"], statement))
    items += _completed(store, fresh, target, now)
    added = store.enqueue(KIND, items, now) if items else 0
    if fresh:
        newest = max(event["created_at"] for event in fresh)
        store.lti_put(CURSOR, json.dumps(max(newest, cursor).isoformat()), CURSOR_SECONDS)
    return added


def _post(session: requests.Session, target: XapiTarget, statements: list[dict]) -> requests.Response:
    return session.post(target.statements_url, json=statements, auth=(target.username, target.password),
                        headers={"X-Experience-API-Version": VERSION}, timeout=TIMEOUT_S)


def send_statements(store: EventStore, target: XapiTarget, now: datetime | None = None,
                    session: requests.Session | None = None) -> tuple[int, int]:
    """Post the due statements, a batch at a time; (sent, put back for later)."""
    now = now or datetime.now(UTC)
    session = session or requests.Session()
    sent = failed = 0
    while True:
        claimed = store.claim_deliveries(KIND, BATCH, LEASE_S, now)
        if not claimed:
            break
        try:
            answer = _post(session, target, [payload for _, _, payload in claimed])
            if answer.status_code == 409:  # one of them differs from what the LRS has: find it, one at a time
                for delivery_id, _, payload in claimed:
                    one = _post(session, target, [payload])
                    if one.status_code == 409:
                        log.warning("xAPI: the LRS holds another statement %s; not sent again", delivery_id)
                    elif one.status_code >= 300:
                        one.raise_for_status()
            elif answer.status_code >= 300:
                answer.raise_for_status()
        except requests.RequestException as error:
            attempts = max(a for _, a, _ in claimed)
            wait = min(MAX_BACKOFF_S, BACKOFF_S * 2 ** attempts)
            for delivery_id, _, _ in claimed:
                store.retry_later(delivery_id, str(error), now + timedelta(seconds=wait))
            failed += len(claimed)
            log.warning("xAPI: %d statement(s) not sent (%s); trying again in %.0f s", len(claimed), error, wait)
            break
        for delivery_id, _, _ in claimed:
            store.delivered(delivery_id, now)
        sent += len(claimed)
    return sent, failed


def backlog(store: EventStore) -> tuple[int, int]:
    """(statements waiting, of them failed at least once)."""
    return store.delivery_counts(KIND)
