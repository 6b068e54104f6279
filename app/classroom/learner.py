"""Who is on the other end of a session: the learner's id from the signed cookie, and their class.

A learner is an anonymous id kept in a signed cookie (set by the server on the first page request, so
a reload or a dropped connection keeps their progress), an optional display name, and a class code
(`?class=CODE`, remembered in a cookie).

What their session sends to the store is `recorder.SessionRecorder`; the process's classroom (store,
outbox, store thread) is `classroom.current()`. Both are importable from here too, as they were when
this module held them.
"""

from __future__ import annotations

from dataclasses import dataclass

from blocktrace.app.classroom.classroom import Classroom, ClassroomSettings, configure, current
from blocktrace.app.classroom.identity import COOKIE_NAME, chosen_class, valid_class_code, verify
from blocktrace.app.classroom.recorder import SessionRecorder, newest_per_slot, slot_key

__all__ = [
    "Learner", "identify",
    # kept importable from here: classroom.py and recorder.py hold them
    "Classroom", "ClassroomSettings", "SessionRecorder", "configure", "current",
    "newest_per_slot", "slot_key",
]


@dataclass
class Learner:
    """The learner of one session: their anonymous id and class (`class_from_link`: the link named it)."""

    id: str
    class_code: str
    class_from_link: bool


def identify(cookies: dict[str, str], query: dict[str, str], secret: bytes) -> Learner | None:
    """The learner behind this session, from the signed cookie the server set on the page request
    (app/server/page_requests.py); None without a valid one (the server was not allowed to make one)."""
    learner_id = verify(cookies.get(COOKIE_NAME, ""), secret)
    if learner_id is None:
        return None
    return Learner(learner_id, chosen_class(query, cookies), valid_class_code(query.get("class")))
