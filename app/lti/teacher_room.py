"""A course's instructors, teaching assistants and administrators in the teacher's room of their course's class,
without the password, and of that class only.

An instructor's launch opens a small page in the LMS's frame with two links: the teacher's room, which opens in
a window of its own (the room may not be framed, and its forms need cookies a frame may not keep), and the
page the students see. Entering the room checks the launch's token (a teacher's, of this class) and sets a
cookie signed for LTI_TEACHER naming the class; with it, every page and form of /teacher answers for that class
and refuses any other (teacher.py's TeacherHandler asks `lti_class`).
"""

from __future__ import annotations

from urllib.parse import urlencode

from tornado.web import RequestHandler

from blocktrace.app.classroom.learner import current as current_classroom
from blocktrace.app.classroom.rendering import render
from blocktrace.app.lti.who import read_token
from blocktrace.app.signing import LTI_TEACHER, sign, unsign

__all__ = ["COOKIE", "lti_class", "teacher_room_patterns"]

COOKIE = "bt_lti_teacher"


def lti_class(handler: RequestHandler) -> str | None:
    """The class whose room this browser was let into by an LMS launch, or None."""
    classroom = current_classroom()
    if classroom is None:
        return None
    return unsign(classroom.secret, LTI_TEACHER, handler.get_cookie(COOKIE))


class _TokenHandler(RequestHandler):
    def launched(self):
        classroom = current_classroom()
        launched = None if classroom is None else read_token(classroom.secret, self.get_argument("lti", ""))
        if launched is None or not launched.teacher:
            self.set_status(403)
            self.finish(render("lti_refused.html", reason="The teacher's room opens only from a launch by one of "
                               "the course's instructors, teaching assistants or administrators.",
                               advice="open blocktrace from the course as its instructor."))
            return None
        return launched


class TeachingLaunchHandler(_TokenHandler):
    """GET /lti/teacher?lti=TOKEN: what an instructor's launch opens in the LMS's frame."""

    def get(self) -> None:
        launched = self.launched()
        if launched is None:
            return
        token = urlencode({"lti": self.get_argument("lti")})
        joiner = "&" if "?" in launched.target else "?"
        self.set_header("Cache-Control", "no-store")
        self.finish(render("lti_teacher.html", room=f"/teacher/lti?{token}", page=f"{launched.target}{joiner}{token}"))


class EnterRoomHandler(_TokenHandler):
    """GET /teacher/lti?lti=TOKEN: let this browser into the room of the token's class, then show it."""

    def get(self) -> None:
        launched = self.launched()
        if launched is None:
            return
        secure = self.request.protocol == "https"
        self.set_cookie(COOKIE, sign(current_classroom().secret, LTI_TEACHER, launched.class_code), path="/teacher",
                        httponly=True, samesite="Lax", secure=secure, expires_days=LTI_TEACHER.max_age_days)
        self.set_header("Cache-Control", "no-store")
        self.redirect("/teacher?" + urlencode({"class": launched.class_code}))


def teacher_room_patterns() -> list[tuple]:
    return [(r"/lti/teacher", TeachingLaunchHandler), (r"/teacher/lti", EnterRoomHandler)]
