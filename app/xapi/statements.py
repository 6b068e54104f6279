"""A stored learner event as an xAPI 1.0.3 statement."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

__all__ = ["NAMESPACE", "VERBS", "statement_for", "statement_id"]

NAMESPACE = uuid.UUID("7a9c1f3e-5b2d-4e8a-9f60-1c2b3d4e5f60")  # blocktrace's: statement ids from event ids
ADL = "http://adlnet.gov/expapi/verbs/"
VERBS = {  # event kind -> ADL verb
    "prediction": "responded",
    "param": "interacted",
    "experiment": "interacted",
    "claim": "answered",
    "checkpoint": "answered",
    "explanation": "commented",
    "race": "experienced",
}
LESSON_TYPE = "http://adlnet.gov/expapi/activities/lesson"
INTERACTION_TYPE = "http://adlnet.gov/expapi/activities/interaction"


def statement_id(event_id: str) -> str:
    return str(uuid.uuid5(NAMESPACE, event_id))


def _verb(kind: str, payload: Any) -> str | None:
    if kind == "exercise":
        return "passed" if isinstance(payload, dict) and payload.get("passed") is True and payload.get("checked") \
            else "failed"
    return VERBS.get(kind)


def _result(kind: str, payload: Any) -> dict[str, Any] | None:
    if not isinstance(payload, dict):
        return None
    if kind == "prediction" and isinstance(payload.get("choice"), str):
        return {"response": payload["choice"]}
    if kind == "checkpoint" and isinstance(payload.get("correct"), bool):
        return {"success": payload["correct"], **({"response": str(payload["answer"])} if "answer" in payload else {})}
    if kind == "exercise":
        passed, total = payload.get("tests_passed"), payload.get("tests_total")
        out: dict[str, Any] = {"success": bool(payload.get("passed") is True and payload.get("checked"))}
        if isinstance(passed, int) and isinstance(total, int) and total > 0 and 0 <= passed <= total:
            out["score"] = {"raw": passed, "min": 0, "max": total, "scaled": round(passed / total, 4)}
        return out
    if kind == "explanation" and isinstance(payload.get("text"), str):
        return {"response": payload["text"][:2000]}
    return None


def statement_for(event: dict[str, Any], home: str, name: str | None = None) -> dict[str, Any] | None:
    """The statement of a stored event (id, created_at, class_code, learner_id, lesson, explorable, kind,
    payload), or None for a kind that is not a learning record. `home` is the server's public address (the
    learner account's homePage and the activities' base); `name` the learner's name, only where the teacher
    turned names on."""
    verb = _verb(event["kind"], event["payload"])
    if verb is None:
        return None
    home = home.rstrip("/")
    lesson, explorable = event.get("lesson"), event.get("explorable")
    if explorable:
        activity = {"objectType": "Activity", "id": f"{home}/explorables/{explorable}",
                    "definition": {"type": INTERACTION_TYPE, "name": {"en-US": explorable}}}
    elif lesson:
        activity = {"objectType": "Activity", "id": f"{home}/lessons/{lesson}",
                    "definition": {"type": LESSON_TYPE, "name": {"en-US": lesson}}}
    else:
        return None
    actor: dict[str, Any] = {"objectType": "Agent", "account": {"homePage": home, "name": event["learner_id"]}}
    if name:
        actor["name"] = name
    context: dict[str, Any] = {"platform": "blocktrace", "extensions": {f"{home}/xapi/class": event["class_code"]}}
    if lesson and explorable:
        context["contextActivities"] = {"grouping": [{"objectType": "Activity", "id": f"{home}/lessons/{lesson}"}]}
    created: datetime = event["created_at"]
    out = {"id": statement_id(event["id"]), "actor": actor,
           "verb": {"id": ADL + verb, "display": {"en-US": verb}}, "object": activity, "context": context,
           "timestamp": created.isoformat(timespec="milliseconds").replace("+00:00", "Z")}
    result = _result(event["kind"], event["payload"])
    if result:
        out["result"] = result
    return out
