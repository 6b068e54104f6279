"""The teacher's pages: a live view of what the class predicted, reveal, export and archive.

Plain Tornado handlers rendering escaped HTML on the server (no Panel session per refresh), behind
HTTP Basic authentication checked by login_guard: the password is compared in constant time, and
guessing is limited per address and in total without locking out the teacher's own browser.
Students without the password get 401, or 429 when guessing.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from html import escape
from urllib.parse import quote

from tornado.ioloop import IOLoop
from tornado.web import RequestHandler

from blocktrace.app.classroom.identity import DEFAULT_CLASS, valid_class_code
from blocktrace.app.classroom.join import student_base, teacher_card
from blocktrace.app.classroom.learner import current as current_classroom
from blocktrace.app.classroom.login_guard import Guard, admit_teacher, generate_password
from blocktrace.app.classroom.store import StoreUnavailable
from blocktrace.app.classroom.store_status import store_status_html
from blocktrace.app.lessons.loading import load_lessons
from blocktrace.app.server import predict_links
from blocktrace.app.server.registry import EXPLORABLE_SPECS
from blocktrace.app.server.session_setup import question_id

__all__ = ["Guard", "generate_password", "teacher_patterns"]  # Guard lives in login_guard; serve imports it here

REFRESH_SECONDS = 5


class TeacherHandler(RequestHandler):
    def initialize(self, guard: Guard, origins: Sequence[str] = ()) -> None:
        self.guard = guard
        self.origins = list(origins)  # the HOST:PORTs the server accepts pages from (for the join link)

    def prepare(self) -> None:
        if not admit_teacher(self, self.guard):  # answered 401 or 429
            return
        self.set_header("Cache-Control", "no-store")
        self.set_header("X-Frame-Options", "DENY")
        self.set_header("Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:")

    def class_code(self) -> str:
        code = self.get_argument("class", DEFAULT_CLASS)
        return code if valid_class_code(code) else DEFAULT_CLASS

    async def stored(self, write, *args) -> bool:
        """Run a store write off the event loop; on an outage answer 503 with a message and return False."""
        try:
            await off_the_loop(write, *args)
        except StoreUnavailable:
            self.set_status(503)
            self.finish("The class database cannot be reached right now; go back and try again in a moment.\n")
            return False
        return True

    def check_form(self) -> bool:
        if not hmac.compare_digest(self.get_body_argument("token", ""), self.guard.form_token()):
            self.set_status(403)
            self.finish("This form did not come from the teacher's page.\n")
            return False
        return True


async def off_the_loop(call, *args):
    """Run a store call on a worker thread, so a slow or hung database never holds up the students' pages."""
    return await IOLoop.current().run_in_executor(None, call, *args)


def _bars(counts: dict[str, int], labels: dict[str, str], caption: str) -> str:
    total = sum(counts.values())
    rows = []
    for key, label in labels.items():
        n = counts.get(key, 0)
        share = 100 * n / total if total else 0
        rows.append(f'<tr><th scope="row">{escape(label)}</th><td class="num norm">{n}</td>'
                    f'<td class="bar-cell"><progress max="100" value="{share:.0f}"></progress>'
                    f" {share:.0f}%</td></tr>")
    return (f'<table class="bt-table teacher-bars"><caption>{escape(caption)} ({total} answers)</caption>'
            '<thead><tr><th scope="col">Answer</th><th scope="col">Learners</th><th scope="col">Share</th></tr>'
            f'</thead><tbody>{"".join(rows)}</tbody></table>')


class DashboardHandler(TeacherHandler):
    """GET /teacher?class=CODE: everything the class did, per lesson, refreshed every few seconds."""

    async def get(self) -> None:
        classroom = current_classroom()
        code = self.class_code()
        if classroom is None:
            self.finish(self._page(code, "<p>The classroom store is off for this server.</p>", refresh=False))
            return
        try:
            body = await off_the_loop(self._body, classroom.store, code)
        except StoreUnavailable:
            body = '<p class="bt-notice">The class database cannot be reached right now; this page retries.</p>'
        status = store_status_html(classroom)  # writes waiting, a hung or deleted database: above the counts
        base, local_only = student_base(self.request.protocol, self.request.host, self.origins)
        join = teacher_card(base, code, local_only)
        self.finish(self._page(code, status + join + body + self._predict_off_links(classroom.secret)))

    def _predict_off_links(self, secret: bytes) -> str:
        """Signed links that open each explorable without the prediction step (app/server/predict_links.py)."""
        base = f"{self.request.protocol}://{self.request.host}"
        explorables = [(spec.route(), spec.title()) for spec in EXPLORABLE_SPECS.values()]
        return predict_links.teacher_section(base, explorables, secret)

    def _body(self, store, code: str) -> str:
        token = escape(self.guard.form_token())
        codes = sorted(set(store.class_codes()) | {code})
        links = " · ".join(f'<a href="/teacher?class={quote(c)}"{" aria-current=page" if c == code else ""}>'
                           f"{escape(c)}</a>" for c in codes)
        parts = [f'<p>Classes: {links} · <a href="/teacher/events.csv?class={quote(code)}">Export this class '
                 f'(CSV)</a> · <a href="/teacher/events.csv">Export everything (CSV)</a></p>']
        questions = {question_id(eid): (spec.title(), spec.choices()) for eid, spec in EXPLORABLE_SPECS.items()}
        for lesson in load_lessons():
            s = store.summary(code, lesson.id)
            parts.append(f'<section class="bt-card"><h2 class="bt-h2">{escape(lesson.title)}</h2>'
                         f"<p><strong>{s['joined']}</strong> joined the class · <strong>{s['committed']}</strong> "
                         "committed a prediction in this lesson</p>")
            for question, (title, labels) in questions.items():
                counts = s["distributions"].get(question)
                if not counts:
                    continue
                parts.append(_bars(counts, labels, f"Predictions in “{title}”"))
                if question in s["revealed"]:
                    parts.append('<p class="bt-ok">Revealed to the class: learners who committed see these '
                                 "answers beside their own.</p>")
                else:
                    parts.append(f'<form method="post" action="/teacher/reveal"><input type="hidden" name="token" '
                                 f'value="{token}"><input type="hidden" name="class" value="{escape(code)}">'
                                 f'<input type="hidden" name="question" value="{escape(question)}">'
                                 '<button type="submit">Reveal to class</button></form>')
            if sum(s["claims"].values()):
                labels = {"too_early": "Too early", "right_on": "Right on", "too_late": "Too late"}
                parts.append(_bars(s["claims"], labels, "Divergence claims"))
            if sum(s["checkpoints"].values()):
                parts.append(_bars(s["checkpoints"], {"correct": "Correct", "incorrect": "Not yet correct"},
                                   "Checkpoint answers"))
            for m in s["misconceptions"]:
                who = ", ".join(escape(n) for n in m["learners"]) or "nobody yet"
                parts.append(f'<p><strong>Misconception to discuss — “{escape(m["name"])}”:</strong> {who}</p>')
            if s["explanations"]:
                items = "".join(f"<li><strong>{escape(who)}:</strong> {escape(text)}</li>"
                                for who, text in s["explanations"])
                parts.append(f'<h3 class="bt-h3">Written explanations</h3><ul class="explanations">{items}</ul>')
            parts.append("</section>")
        parts.append(f'<form method="post" action="/teacher/archive"><input type="hidden" name="token" value="{token}">'
                     f'<input type="hidden" name="class" value="{escape(code)}">'
                     f'<button type="submit">Archive and reset class “{escape(code)}”</button> '
                     '<span class="bt-muted">(the history stays in the CSV export)</span></form>')
        return "".join(parts)

    def _page(self, code: str, body: str, refresh: bool = True) -> str:
        script = '<script src="/assets/js/teacher.js" defer></script>' if refresh else ""
        return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">{script}'
                '<meta name="viewport" content="width=device-width, initial-scale=1">'
                f"<title>Teacher · {escape(code)} · blocktrace</title>"
                '<link rel="icon" href="data:,"><link rel="stylesheet" href="/assets/css/blocktrace.css"></head>'
                f'<body class="teacher" data-refresh="{REFRESH_SECONDS}"><header class="bt-header">'
                '<a class="bt-home" href="/">blocktrace</a>'
                f'<span class="bt-tagline">teacher view · class {escape(code)} · refreshes every '
                f"{REFRESH_SECONDS} s</span></header><main>{body}</main></body></html>")


class RevealHandler(TeacherHandler):
    """POST /teacher/reveal: learners who committed now see the class's answers to that question."""

    async def post(self) -> None:
        if not self.check_form():
            return
        classroom = current_classroom()
        code = self.get_body_argument("class", DEFAULT_CLASS)
        question = self.get_body_argument("question", "")
        if question not in {question_id(eid) for eid in EXPLORABLE_SPECS} or not valid_class_code(code):
            self.set_status(400)
            self.finish("Unknown class or question.\n")
            return
        if classroom is not None and not await self.stored(classroom.store.reveal, code, question):
            return
        self.redirect(f"/teacher?class={quote(code)}", status=303)


class ArchiveHandler(TeacherHandler):
    """POST /teacher/archive: start the class afresh; its history stays in the store and the export."""

    async def post(self) -> None:
        if not self.check_form():
            return
        classroom = current_classroom()
        code = self.get_body_argument("class", DEFAULT_CLASS)
        if not valid_class_code(code):
            self.set_status(400)
            self.finish("Unknown class.\n")
            return
        if classroom is not None and not await self.stored(classroom.store.archive, code):
            return
        self.redirect(f"/teacher?class={quote(code)}", status=303)


class ExportHandler(TeacherHandler):
    """GET /teacher/events.csv[?class=CODE]: every event, every epoch."""

    async def get(self) -> None:
        classroom = current_classroom()
        code = self.get_argument("class", None)
        if code is not None and not valid_class_code(code):
            code = DEFAULT_CLASS
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
    return [
        (r"/teacher/?", DashboardHandler, args),
        (r"/teacher/reveal", RevealHandler, args),
        (r"/teacher/archive", ArchiveHandler, args),
        (r"/teacher/events\.csv", ExportHandler, args),
    ]
