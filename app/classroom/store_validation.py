"""What the classroom store accepts: ids, keys and texts checked, payloads cut to the pages' limits.

Shared by the store and the outbox, which checks a write before it queues it, so a bad call fails at
once in its caller, not at a later flush. Each check returns the value normalised (one spelling per
event id, so a retry matches its first try) or raises ValueError (TypeError for a payload that is not
a mapping).

Texts are cut to the lengths the pages allow, the same as the pages' own limits (a test compares
them): only a client that bypasses the page's limit can send longer text, so the server cuts it and
logs that it did, and refuses an event still too large.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Mapping
from typing import Any

from blocktrace.app.classroom import schema
from blocktrace.app.classroom.identity import valid_class_code

__all__ = [
    "MAX_ITEMS", "MAX_NOTE", "MAX_PAYLOAD", "MAX_TEXT", "PREDICTION", "RACE", "check_class_code", "check_event_id",
    "check_key", "check_learner_id", "check_prediction", "check_record", "new_event_id", "payload_json",
]

log = logging.getLogger(__name__)

MAX_TEXT = 2_000  # characters of any text in an event: an explanation (app/lessons/page.py), a typed value
MAX_NOTE = 500  # characters of a prediction's note (explorables/components/prediction.py)
MAX_PAYLOAD = 16_000  # characters of JSON per event, after cutting its texts
MAX_ITEMS = 200  # list items (cut) or keys (refused past it) at any level of a payload
PREDICTION = "prediction"  # the event kind only EventStore.commit_prediction writes
RACE = "race"  # the race a prediction is for: {"question", "setup": {URL key: value}, "outcome": a choice or None}

_KEY = re.compile(r"[A-Za-z0-9_.:/-]{1,80}")  # lesson, explorable, question, kind
_LEARNER = re.compile(r"[A-Za-z0-9_-]{1,64}")


def new_event_id() -> str:
    """A fresh event id (UUID text). Make one per user action and reuse it on every retry."""
    return str(uuid.uuid4())


def check_event_id(value: object) -> str:
    """The event id in its one spelling; ValueError unless it is a UUID."""
    if isinstance(value, str):
        try:
            return str(uuid.UUID(value))
        except ValueError:
            pass
    raise ValueError(f"an event id must be a UUID, not {value!r}")


def check_class_code(value: object) -> str:
    """The class code as given; ValueError unless it is one (identity.valid_class_code)."""
    if not valid_class_code(value):
        raise ValueError(f"not a class code (1-24 of A-Z a-z 0-9 _ -): {value!r}")
    return value  # type: ignore[return-value]


def check_learner_id(value: object) -> str:
    """The learner id as given; ValueError unless it is 1-64 of A-Z a-z 0-9 _ -."""
    if not (isinstance(value, str) and _LEARNER.fullmatch(value)):
        raise ValueError(f"not a learner id (1-64 of A-Z a-z 0-9 _ -): {value!r}")
    return value


def check_key(value: object, what: str, optional: bool = False) -> str | None:
    """A lesson, explorable, question or kind as given (None allowed if `optional`); ValueError otherwise."""
    if value is None and optional:
        return None
    if not (isinstance(value, str) and _KEY.fullmatch(value)):
        raise ValueError(f"not a {what} (1-80 of A-Z a-z 0-9 _ . : / -): {value!r}")
    return value


def payload_json(value: object, what: str = "an event") -> str:
    """The payload as compact JSON, its texts and lists cut to the pages' limits; ValueError if still too large."""
    if not isinstance(value, Mapping):
        raise TypeError(f"an event payload must be a mapping, not {type(value).__name__}")
    text = json.dumps(_limited(value, what), sort_keys=True, separators=(",", ":"), allow_nan=False,
                      ensure_ascii=False)
    if len(text) > MAX_PAYLOAD:
        raise ValueError(f"an event payload must be at most {MAX_PAYLOAD} characters of JSON, not {len(text)}")
    return text


def check_record(event_id: str, class_code: str, learner_id: str, kind: str, payload: Mapping[str, Any],
                 lesson: str | None = None, explorable: str | None = None) -> dict[str, Any]:
    """The arguments of ``EventStore.record`` validated and normalised; ValueError/TypeError if unusable."""
    if kind == PREDICTION:
        raise ValueError("predictions are final: store them with commit_prediction, not record")
    if kind == RACE:
        _check_race(payload)
    return dict(event_id=check_event_id(event_id), class_code=check_class_code(class_code),
                learner_id=check_learner_id(learner_id), kind=check_key(kind, "kind"),
                payload=payload_json(payload, f"a {kind!r} event"), lesson=check_key(lesson, "lesson", True),
                explorable=check_key(explorable, "explorable", True))


def check_prediction(event_id: str, class_code: str, learner_id: str, question: str, choice: str,
                     note: str | None, lesson: str | None, explorable: str | None) -> dict[str, Any]:
    """The arguments of ``EventStore.commit_prediction`` validated; ValueError if unusable."""
    return dict(event_id=check_event_id(event_id), class_code=check_class_code(class_code),
                learner_id=check_learner_id(learner_id), question=check_key(question, "question"),
                choice=_text(choice, "a choice", schema.KEY_LEN), note=_note(note),
                lesson=check_key(lesson, "lesson", True), explorable=check_key(explorable, "explorable", True))


# Private API ------------------------------------------------------------------------------------

def _check_race(payload: object) -> None:
    """A race event as app/classroom/race.py writes it; ValueError (TypeError: not a mapping) otherwise."""
    if not isinstance(payload, Mapping):
        raise TypeError(f"an event payload must be a mapping, not {type(payload).__name__}")
    check_key(payload.get("question"), "question")
    check_key(payload.get("outcome"), "race outcome", optional=True)
    setup = payload.get("setup")
    if not (isinstance(setup, Mapping) and 0 < len(setup) <= MAX_ITEMS and all(
            isinstance(k, str) and isinstance(v, str) and 0 < len(v) <= schema.KEY_LEN for k, v in setup.items())):
        raise ValueError("a race's set-up must be 1-200 of its address's keys, each with a value of 1-80 characters")

def _text(value: object, what: str, max_len: int) -> str:
    if not isinstance(value, str) or not value or len(value) > max_len or "\x00" in value:
        raise ValueError(f"{what} must be 1-{max_len} characters of text without NUL")
    return value


def _note(value: object) -> str | None:
    """A prediction's note: None when empty, cut to MAX_NOTE; ValueError if not text."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or "\x00" in value:
        raise ValueError("a note must be text without NUL")
    return _cut(value, MAX_NOTE, "a prediction's note")


def _cut(text: str, max_len: int, what: str) -> str:
    if len(text) <= max_len:
        return text
    log.warning("cut %s of %d characters to the %d the page allows", what, len(text), max_len)
    return text[:max_len]


def _limited(value: object, what: str, depth: int = 0) -> object:
    """The payload value with every text cut to MAX_TEXT and every list to MAX_ITEMS items.

    ValueError for a mapping of more than MAX_ITEMS keys or more than 8 levels (no page sends one).
    """
    if isinstance(value, str):
        return _cut(value, MAX_TEXT, f"a text in {what}")
    if depth >= 8 and isinstance(value, Mapping | list | tuple):
        raise ValueError(f"{what} must have at most 8 levels")
    if isinstance(value, Mapping):
        if len(value) > MAX_ITEMS:
            raise ValueError(f"{what} must have at most {MAX_ITEMS} keys per level")
        return {_cut(str(key), 80, f"a key in {what}"): _limited(item, what, depth + 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        if len(value) > MAX_ITEMS:
            log.warning("cut a list in %s of %d items to %d", what, len(value), MAX_ITEMS)
            value = value[:MAX_ITEMS]
        return [_limited(item, what, depth + 1) for item in value]
    return value
