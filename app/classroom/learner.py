"""Who is on the other end of a session: the learner's id from the signed cookie, and their class.

A learner is an anonymous id kept in a signed cookie (set by the server on the first page request, so
a reload or a dropped connection keeps their progress), an optional display name, and a class code
(`?class=CODE`, remembered in a cookie).

What their session sends to the store is `recorder.SessionRecorder`; the process's classroom (store,
outbox, store thread) is `classroom.current()`. Both are importable from here too, as they were when
this module held them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from blocktrace.app.classroom.classroom import Classroom, ClassroomSettings, configure, current
from blocktrace.app.classroom.identity import COOKIE_NAME, chosen_class, class_code, verify
from blocktrace.app.classroom.recorder import SessionRecorder, newest_per_slot, slot_key

__all__ = [
    "Learner", "identify",
    # kept importable from here: classroom.py and recorder.py hold them
    "Classroom", "ClassroomSettings", "SessionRecorder", "configure", "current",
    "newest_per_slot", "slot_key",
]


@dataclass
class Learner:
    """The learner of one session: their anonymous id and class (`class_from_link`: the link named it;
    `refused`: the code the link named when the server let them into no class of that code)."""

    id: str
    class_code: str
    class_from_link: bool
    refused: str | None = None


def identify(cookies: dict[str, str], query: dict[str, str], secret: bytes,
             admits: Callable[[str, bool], bool] | None = None) -> Learner | None:
    """The learner behind this session, from the signed cookie the server set on the page request
    (app/server/page_requests.py); None without a valid one (the server was not allowed to make one).

    Their class: the link's or the class cookie's, if `admits(code, kept)` lets them in (Classroom.admits); a
    class an LMS launch named in a token this server signed (`?lti=`) is let in as it is."""
    learner_id = verify(cookies.get(COOKIE_NAME, ""), secret)
    if learner_id is None:
        return None
    if admits is not None:
        from blocktrace.app.lti.who import read_token  # the LMS's rooms import the classroom: only when asked

        launched = read_token(secret, query.get("lti", ""))
        gate = admits
        admits = lambda code, kept: (launched is not None and code == launched.class_code) or gate(code, kept)  # noqa: E731
    code = chosen_class(query, cookies, admits)
    linked = class_code(query.get("class"))
    refused = query["class"] if "class" in query and linked != code else None
    return Learner(learner_id, code, linked == code, refused)
