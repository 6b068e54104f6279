"""The teacher's pages: a live view of what the class predicted, reveal, export and archive.

Plain Tornado handlers filling in autoescaping templates (templates/, rendering.py) on the server (no Panel
session per refresh), behind the teacher's login (login_guard: its page at /teacher/login and its signed cookie;
the password is compared in constant time, and guessing is limited per address and in total without locking out
the teacher's own browser). A browser that has not logged in is sent to the login page. The forms carry Tornado's
XSRF token (a random value in a cookie and in the form, checked by `check_xsrf_cookie`), as JupyterHub's do.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlencode

from tornado.ioloop import IOLoop
from tornado.web import HTTPError, RequestHandler

from blocktrace.app.classroom.identity import DEFAULT_CLASS, class_code
from blocktrace.app.classroom.join import student_base, teacher_card
from blocktrace.app.classroom.learner import current as current_classroom
from blocktrace.app.classroom.login_guard import Guard, admit_teacher, login_patterns
from blocktrace.app.classroom.pacing import HOLDABLE, read_pushed_state
from blocktrace.app.classroom.rendering import render
from blocktrace.app.classroom.store import StoreUnavailable
from blocktrace.app.classroom.store_status import store_status_html
from blocktrace.app.classroom.teacher_view import (
    archive_confirmation,
    archive_form,
    class_links,
    lesson_section,
    pace_forms,
    presenter_bars,
    presenter_links,
    teacher_href,
)
from blocktrace.app.lessons.loading import load_lessons
from blocktrace.app.lti.grades import KIND as SCORES
from blocktrace.app.lti.teacher_room import lti_class
from blocktrace.app.server import predict_links
from blocktrace.app.server.registry import EXPLORABLE_SPECS
from blocktrace.app.server.session_setup import question_id
from blocktrace.app.xapi.delivery import KIND as RECORDS

__all__ = ["Guard", "teacher_patterns"]  # Guard lives in login_guard; serve imports it here

REFRESH_SECONDS = 5


class TeacherHandler(RequestHandler):
    def initialize(self, guard: Guard, origins: Sequence[str] = ()) -> None:
        self.guard = guard
        self.origins = list(origins)  # the HOST:PORTs the server accepts pages from (for the join link)

    def prepare(self) -> None:
        self.lti_class = lti_class(self)  # a course's teacher let in by an LMS launch: that class only
        if self.lti_class is not None:
            if self.get_argument("class", None) != self.lti_class:
                if self.request.method == "GET":
                    self.redirect(self.request.path + "?" + urlencode(
                        {**{k: v[-1].decode() for k, v in self.request.query_arguments.items()},
                         "class": self.lti_class}))
                else:
                    self.set_status(403)
                    self.finish("Your course's launch opens the teacher's room of its own class only.\n")
                return
        elif not admit_teacher(self, self.guard):  # sent to the login page, or answered 403 or 429
            return
        self.set_header("Cache-Control", "no-store")
        self.set_header("X-Frame-Options", "DENY")
        self.set_header("Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:")

    def theme(self) -> str:
        return "dark" if self.get_argument("theme", "") == "dark" else "light"

    def form_theme(self) -> str:
        """The theme a teacher's form was sent from (its hidden field), for the page it leads back to."""
        return "dark" if self.get_body_argument("theme", "") == "dark" else "light"

    def back(self, code: str, **extra: str) -> str:
        """The dashboard of `code` in the form's theme."""
        return teacher_href("/teacher", code, self.form_theme(), **extra)

    def class_code(self) -> str:
        """The class the address names, in its one spelling ("Period3 " is "period3"); else no class."""
        return class_code(self.get_argument("class", DEFAULT_CLASS)) or DEFAULT_CLASS

    def form_class(self) -> str | None:
        """The class a teacher's form names, in its one spelling; None if it names none."""
        return class_code(self.get_body_argument("class", DEFAULT_CLASS))

    async def stored(self, write, *args) -> bool:
        """Run a store write on the store thread (after the learners' writes it holds) and wait for its commit; on
        an outage answer 503 with a message and return False."""
        try:
            await current_classroom().thread.write(write, *args)
        except StoreUnavailable:
            self.set_status(503)
            self.finish("The class database cannot be reached right now; go back and try again in a moment.\n")
            return False
        return True

    def form_token(self) -> str:
        """The XSRF token this browser's forms carry (Tornado's; its cookie is set with this response)."""
        return self.xsrf_token.decode("ascii")

    def check_form(self) -> bool:
        try:
            self.check_xsrf_cookie()
        except HTTPError:
            self.set_status(403)
            self.finish("This form did not come from the teacher's page.\n")
            return False
        return True


# Threads of their own: the loop's default executor may run calls in place (app/tuning/work_on_loop.py).
STORE_READERS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="blocktrace-teacher-reads")


async def off_the_loop(call, *args):
    """Run a store call on a worker thread, so a slow or hung database never holds up the students' pages."""
    return await IOLoop.current().run_in_executor(STORE_READERS, call, *args)


class DashboardHandler(TeacherHandler):
    """GET /teacher?class=CODE: everything the class did, per lesson, refreshed every few seconds."""

    async def get(self) -> None:
        classroom = current_classroom()
        code = self.class_code()
        if classroom is None:
            self.finish(self._page(code, "<p>The classroom store is off for this server.</p>", refresh=False))
            return
        await self._open(classroom, code)
        try:
            body = await off_the_loop(self._body, classroom.store, code, self.form_token())
        except StoreUnavailable:
            body = '<p class="bt-notice">The class database cannot be reached right now; this page retries.</p>'
        status = store_status_html(classroom)  # writes waiting, a hung or deleted database: above the counts
        base, local_only = student_base(self.request.protocol, self.request.host, self.origins)
        switch = None if self.lti_class else (classroom.thread.open_joining,
                                              joining_fields(self.form_token(), code, self.theme()))
        join = teacher_card(base, code, local_only, switch)
        self.finish(self._page(code, status + join + body + self._predict_off_links(classroom.secret)))

    async def _open(self, classroom, code: str) -> None:
        """Make the class the teacher opened, so its students may join it (once: then this process knows it)."""
        if code == DEFAULT_CLASS or code in (classroom.thread.classes or ()):
            return

        def open_class() -> None:  # on the store thread, where the classes are read: known here from now on
            classroom.store.open_class(code)
            classroom.thread.opened(code)

        try:
            await classroom.thread.write(open_class)
        except StoreUnavailable:
            pass  # the page says the database cannot be reached; its next refresh opens the class

    def _predict_off_links(self, secret: bytes) -> str:
        """Signed links that open each explorable without the prediction step (app/server/predict_links.py)."""
        base = f"{self.request.protocol}://{self.request.host}"
        explorables = [(spec.route(), spec.title()) for spec in EXPLORABLE_SPECS.values()]
        return predict_links.teacher_section(base, explorables, secret)

    def _body(self, store, code: str, token: str) -> str:
        theme = self.theme()
        codes = [code] if self.lti_class else sorted(set(store.class_codes()) | {code})  # an LMS's: its own only
        parts = [class_links(codes, code, theme)]
        if code.startswith("lti-"):  # a course launched from an LMS: its scores on their way to the gradebook
            waiting, failed = store.delivery_counts(SCORES, prefix=f"score:{code}:")
            parts.append(render("scores_waiting.html", waiting=waiting, failed=failed))
        lrs = current_classroom().lrs
        if lrs:  # the school's learning record store: the server's statements on their way there
            waiting, failed = store.delivery_counts(RECORDS)
            parts.append(render("records_waiting.html", lrs=lrs, waiting=waiting, failed=failed))
        questions = {question_id(eid): (spec.title(), spec.choices()) for eid, spec in EXPLORABLE_SPECS.items()}
        paces = store.current_paces()  # one read for every lesson's pacing
        for lesson in load_lessons():
            checkpoint_questions = {str(d.attrs.get("id")): str(d.attrs.get("question"))
                                    for d in lesson.directives("checkpoint")}
            pacing = pace_forms(code, lesson.id, lesson.explorables[0], paces.get((code, lesson.id)), token, theme,
                                self.get_argument("pace_error", "") if self.get_argument("lesson", "") == lesson.id
                                else "")
            parts.append(lesson_section(lesson.title, store.summary(code, lesson.id), questions,
                                        checkpoint_questions, token, theme, pacing=pacing))
        parts.append(presenter_links(code, theme, [(lesson.id, lesson.title) for lesson in load_lessons()]))
        parts.append(archive_form(code, token, theme))
        return "".join(parts)

    def _page(self, code: str, body: str, refresh: bool = True) -> str:
        return teacher_page(f"Teacher · {code}", f"teacher view · class {code}" + (
            f" · refreshes every {REFRESH_SECONDS} s" if refresh else ""), body, self.theme(), refresh,
            teacher_href("/teacher", code, "light" if self.theme() == "dark" else "dark"), self.form_token())


def teacher_page(title: str, tagline: str, body: str, theme: str, refresh: bool, other_theme: str,
                 token: str = "") -> str:
    """The teacher's pages in the house style: the students' header and styles, light or dark.

    `body`: the page's <main>, HTML made by the templates (teacher_view); `token`: the XSRF form token of its
    "Log out" button."""
    return render("page.html", title=title, tagline=tagline, body=body, theme=theme, refresh=refresh,
                  other_theme=other_theme, refresh_seconds=REFRESH_SECONDS, logout=token)


class PresentHandler(TeacherHandler):
    """GET /teacher/present?class=CODE&lesson=ID: the projector's view of a lesson.

    The lesson's explorable (the teacher's signed link, every control unlocked) beside the class's answers in
    large type. Only the answers refresh (teacher.js replaces <main>); the explorable stays as it is."""

    async def get(self) -> None:
        code, theme = self.class_code(), self.theme()
        lessons = {lesson.id: lesson for lesson in load_lessons()}
        lesson = lessons.get(self.get_argument("lesson", ""), next(iter(lessons.values())))
        classroom = current_classroom()
        eid = lesson.explorables[0]
        spec = EXPLORABLE_SPECS[eid]
        questions = {question_id(eid): (spec.title(), spec.choices())}
        state, summary, answers = "off", None, ""
        if classroom is not None:
            try:
                summary = await off_the_loop(classroom.store.summary, code, lesson.id)
                state, answers = "ok", presenter_bars(summary, questions)
            except StoreUnavailable:
                state = "unavailable"
        secret = classroom.secret if classroom is not None else b""
        arguments = {"embed": "1", **({"theme": "dark"} if theme == "dark" else {}),
                     **(predict_links.teacher_arguments(spec.route(), secret) if classroom is not None else {})}
        other_theme = teacher_href("/teacher/present", code, "light" if theme == "dark" else "dark", lesson=lesson.id)
        self.finish(render("present.html", title=f"Present · {lesson.title}",
                           tagline=f"presenter view · class {code} · {lesson.title}", theme=theme, refresh=True,
                           refresh_seconds=REFRESH_SECONDS, other_theme=other_theme,
                           src=f"{spec.route()}?{urlencode(arguments)}", frame_title=spec.title(),
                           lesson_title=lesson.title, state=state, summary=summary, answers=answers,
                           logout=self.form_token()))


class PaceHandler(TeacherHandler):
    """POST /teacher/pace: hold the class at a step of a lesson, or release it."""

    async def post(self) -> None:
        if not self.check_form():
            return
        code, lesson = self.form_class(), self.get_body_argument("lesson", "")
        hold = self.get_body_argument("hold", "release")
        if code is None or lesson not in {x.id for x in load_lessons()} \
                or hold not in (*HOLDABLE, "release"):
            self.set_status(400)
            self.finish("Unknown class, lesson or step.\n")
            return
        classroom = current_classroom()
        if classroom is not None and not await self.stored(
                lambda: classroom.store.set_pace(code, lesson, hold=None if hold == "release" else hold)):
            return
        self.redirect(self.back(code), status=303)


class PushHandler(PaceHandler):
    """POST /teacher/push: show every committed student one state of the lesson's explorable (or stop)."""

    async def post(self) -> None:
        if not self.check_form():
            return
        code, lesson_id = self.form_class(), self.get_body_argument("lesson", "")
        lesson = {x.id: x for x in load_lessons()}.get(lesson_id)
        if code is None or lesson is None:
            self.set_status(400)
            self.finish("Unknown class or lesson.\n")
            return
        explorable = lesson.explorables[0]
        pushed = None
        if not self.get_body_argument("clear", ""):
            try:
                pushed = {"explorable": explorable,
                          "state": read_pushed_state(explorable, self.get_body_argument("state", "")[:2000])}
            except ValueError as error:
                self.redirect(self.back(code, lesson=lesson.id, pace_error=str(error)), status=303)
                return
        classroom = current_classroom()
        if classroom is not None and not await self.stored(
                lambda: classroom.store.set_pace(code, lesson.id, pushed=pushed)):
            return
        self.redirect(self.back(code), status=303)


class RevealHandler(TeacherHandler):
    """POST /teacher/reveal: learners who committed now see the class's answers to that question."""

    async def post(self) -> None:
        if not self.check_form():
            return
        classroom = current_classroom()
        code = self.form_class()
        question = self.get_body_argument("question", "")
        if question not in {question_id(eid) for eid in EXPLORABLE_SPECS} or code is None:
            self.set_status(400)
            self.finish("Unknown class or question.\n")
            return
        if classroom is not None and not await self.stored(self.write_reveal(classroom.store), code, question):
            return
        self.redirect(self.back(code), status=303)

    def write_reveal(self, store):
        return store.reveal


class UnrevealHandler(RevealHandler):
    """POST /teacher/unreveal: take a reveal back; learners' pages stop showing the class's answers."""

    def write_reveal(self, store):
        return store.unreveal


class ArchiveHandler(TeacherHandler):
    """POST /teacher/archive: first a page that asks to confirm; with confirm=yes, start the class afresh.

    Its history stays in the store and the export."""

    async def post(self) -> None:
        if not self.check_form():
            return
        classroom = current_classroom()
        code = self.form_class()
        theme = self.form_theme()
        if code is None:
            self.set_status(400)
            self.finish("Unknown class.\n")
            return
        if self.get_body_argument("confirm", "") != "yes":
            joined = 0
            if classroom is not None:
                try:
                    joined = await off_the_loop(classroom.store.learner_count, code)
                except StoreUnavailable:
                    pass
            body = archive_confirmation(code, joined, self.form_token(), theme)
            self.finish(teacher_page(f"Archive {code}?", f"teacher view · class {code}", body, theme, False,
                                     teacher_href("/teacher", code, "light" if theme == "dark" else "dark"),
                                     self.form_token()))
            return
        if classroom is not None and not await self.stored(classroom.store.archive, code):
            return
        self.redirect(self.back(code), status=303)


def joining_fields(token: str, code: str, theme: str) -> list[tuple[str, str]]:
    """The hidden fields of the open-joining switch on the teacher's card: the XSRF token first, and the page to
    come back to."""
    return [("_xsrf", token), ("class", code), ("theme", theme)]


class JoiningHandler(TeacherHandler):
    """POST /teacher/joining (open=yes|no): let students start a class with any code, or only join classes this
    server has. For the whole server; stored in the class database, so every process follows it."""

    async def post(self) -> None:
        if not self.check_form():
            return
        allowed, code = self.get_body_argument("open", ""), self.form_class()
        if allowed not in ("yes", "no") or code is None:
            self.set_status(400)
            self.finish("Unknown class or choice.\n")
            return
        if self.lti_class:  # a course's teacher decides for their own class only, not for the server
            self.set_status(403)
            self.finish("Only the server's teacher can let students start classes.\n")
            return
        classroom = current_classroom()
        if classroom is not None:
            def switch() -> None:  # on the store thread: this process follows it at once
                classroom.store.set_open_joining(allowed == "yes")
                classroom.thread.open_joining = allowed == "yes"

            if not await self.stored(switch):
                return
        self.redirect(self.back(code), status=303)


class ExportHandler(TeacherHandler):
    """GET /teacher/events.csv[?class=CODE]: every event, every epoch."""

    async def get(self) -> None:
        classroom = current_classroom()
        code = self.get_argument("class", None)
        if code is not None:
            code = class_code(code) or DEFAULT_CLASS  # "Period3" exports the class period3
        try:
            text = await off_the_loop(classroom.store.export_csv, code) if classroom is not None else ""
        except StoreUnavailable:
            self.set_status(503)
            self.finish("The class database cannot be reached right now; try the export again in a moment.\n")
            return
        name = f"blocktrace-events-{code or 'all'}.csv"
        self.set_header("Content-Type", "text/csv; charset=utf-8")
        self.set_header("Content-Disposition", f'attachment; filename="{name}"')
        self.finish(text)


def teacher_patterns(guard: Guard, origins: Sequence[str] = ()) -> list[tuple]:
    args = {"guard": guard, "origins": list(origins)}
    return login_patterns(guard) + [
        (r"/teacher/?", DashboardHandler, args),
        (r"/teacher/reveal", RevealHandler, args),
        (r"/teacher/unreveal", UnrevealHandler, args),
        (r"/teacher/present", PresentHandler, args),
        (r"/teacher/pace", PaceHandler, args),
        (r"/teacher/push", PushHandler, args),
        (r"/teacher/archive", ArchiveHandler, args),
        (r"/teacher/joining", JoiningHandler, args),
        (r"/teacher/events\.csv", ExportHandler, args),
    ]
