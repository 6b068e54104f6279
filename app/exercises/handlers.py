"""GET /exercises/ID.zip (the student's download), POST /exercises/report (what `blocktrace check` sends) and
GET /exercises/package/blocktrace-VERSION-py3-none-any.whl (blocktrace itself, for a student's laptop: package.py).

A report is taken only with a genuine ticket (bundle.py), and it counts as passed only when every test passed
on the student's laptop and the numbers their functions gave for the ticket's nonce are the engine's (so a
report cannot simply claim success). No student code runs here: only numbers are compared.
"""

from __future__ import annotations

import json
import logging
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tornado.ioloop import IOLoop
from tornado.web import RequestHandler

from blocktrace.app.classroom.identity import COOKIE_NAME, DEFAULT_CLASS, chosen_class, class_code, verify
from blocktrace.app.classroom.learner import current as current_classroom
from blocktrace.app.classroom.store import StoreUnavailable, new_event_id
from blocktrace.app.exercises import challenge
from blocktrace.app.exercises.bundle import bundle, exercises, new_ticket, ticket_is_genuine
from blocktrace.app.exercises.in_page_view import share_check_limits
from blocktrace.app.exercises.package import INSTALL_PATH, installed_version, served_wheel, wheel_name
from blocktrace.app.server.rate_limits import TokenBuckets
from blocktrace.app.settings import settings

__all__ = ["exercise_patterns", "latest_result"]

log = logging.getLogger(__name__)
MAX_REPORT_BYTES = 256 * 1024
MAX_TESTS = 100


def latest_result(class_code: str, learner: str, exercise: str) -> dict[str, Any] | None:
    """The newest result any server process took for a learner, as this process's store thread knows it."""
    classroom = current_classroom()
    return None if classroom is None else classroom.thread.result(class_code, learner, exercise)


class DownloadHandler(RequestHandler):
    """The exercise folder as a zip, with a ticket for the learner whose signed cookie came with the request."""

    def initialize(self, secret: bytes) -> None:
        self.secret = secret

    def get(self, exercise_id: str) -> None:
        exercise = exercises().get(exercise_id)
        if exercise is None:
            self.set_status(404)
            self.finish("No such exercise.\n")
            return
        cookies = {k: v.value for k, v in self.request.cookies.items()}
        learner = verify(cookies.get(COOKIE_NAME, ""), self.secret)
        if learner is None or current_classroom() is None:
            self.set_status(403)
            self.finish("Open the lesson page first, then download the exercise from there.\n")
            return
        query = {k: self.get_argument(k) for k in ("class",) if self.get_argument(k, None)}
        ticket = new_ticket(self.secret, exercise, learner, chosen_class(query, cookies, current_classroom().admits),
                            f"{self.request.protocol}://{self.request.host}")
        self.set_header("Content-Type", "application/zip")
        self.set_header("Content-Disposition", f'attachment; filename="{exercise.id}.zip"')
        self.set_header("Cache-Control", "no-store")
        self.finish(bundle(exercise, ticket))


class ReportHandler(RequestHandler):
    """Takes one run of `blocktrace check`: the tests' outcomes and the challenge's numbers."""

    def initialize(self, secret: bytes, reports: TokenBuckets) -> None:
        self.secret, self.reports = secret, reports  # one report per learner and exercise each `report_gap` s

    def refuse(self, status: int, why: str, **extra: Any) -> None:
        self.set_status(status)
        self.finish({"recorded": False, "error": why, **extra})

    async def post(self) -> None:
        classroom = current_classroom()
        if classroom is None:
            return self.refuse(503, "this server keeps no class records")
        if len(self.request.body) > MAX_REPORT_BYTES:
            return self.refuse(413, "the report is too large")
        try:
            report = json.loads(self.request.body)
            ticket, tests, outputs = report["ticket"], report["tests"], report["outputs"]
            exercise = exercises()[ticket["exercise"]]
        except (ValueError, KeyError, TypeError):
            return self.refuse(400, "not a report from blocktrace check")
        if not isinstance(ticket, dict) or not ticket_is_genuine(self.secret, ticket) \
                or ticket.get("folder") != exercise.folder:
            return self.refuse(403, "this ticket was not issued by this server; download the exercise again")
        if not isinstance(tests, list) or not 0 < len(tests) <= MAX_TESTS or not isinstance(outputs, dict) \
                or not all(isinstance(t, dict) and isinstance(t.get("passed"), bool)
                           and isinstance(t.get("name"), str) for t in tests):
            return self.refuse(400, "the report's tests or numbers are malformed")
        learner, code = ticket["learner"], class_code(ticket["class"]) or DEFAULT_CLASS  # an older ticket's "Period3"
        wait = self.reports.wait(f"{learner}\x00{exercise.id}")
        if wait > 0:  # the check waits this long and sends again by itself (check_command.send)
            self.set_header("Retry-After", str(math.ceil(wait)))
            return self.refuse(429, f"too soon after your last report (one every {1 / self.reports.per_second:g} s); "
                               "run the check again in a moment",
                               retry_after=round(wait, 3))
        numbers = challenge.verify(exercise.folder, ticket["nonce"], outputs)
        failed = [t["name"][:100] for t in tests if not t["passed"]][:20]
        passed_tests = sum(t["passed"] for t in tests)
        result = {"id": exercise.id, "passed": not failed and all(numbers.values()), "tests_passed": passed_tests,
                  "tests_total": len(tests), "failed": failed, "numbers_match": all(numbers.values()),
                  "checked": True, "way": "laptop"}
        try:
            stored_at = datetime.now(UTC)  # no later than the row's own time: the next refresh keeps it or newer
            await classroom.thread.write(lambda: classroom.store.record(
                new_event_id(), code, learner, "exercise", result, exercise.lesson, None))
        except (StoreUnavailable, ValueError) as error:
            log.warning("an exercise report was not stored: %s", type(error).__name__)
            return self.refuse(503, "the class database cannot be reached; run the check again in a moment")
        classroom.thread.took_result((code, learner, exercise.id), stored_at, result)  # shown here at once
        self.finish({"recorded": True, **result, "numbers": numbers})


class PackageHandler(RequestHandler):
    """blocktrace as a wheel, the version this server runs: what the lesson page's install line fetches (no
    cookie: pip sends none, and the package is anyone's)."""

    def initialize(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    async def get(self, name: str) -> None:
        dist_version = installed_version()
        if dist_version is None or name != wheel_name(dist_version):
            self.set_status(404)
            self.finish(f"This server has blocktrace {dist_version or '(not installed)'}: copy the install line "
                        "from the lesson page.\n")
            return
        path = await IOLoop.current().run_in_executor(None, served_wheel, self.data_dir)  # the first call makes it
        if path is None:
            self.set_status(404)
            self.finish("This server cannot offer its package (it is not installed with pip).\n")
            return
        data = await IOLoop.current().run_in_executor(None, path.read_bytes)
        self.set_header("Content-Type", "application/octet-stream")
        self.set_header("Content-Disposition", f'attachment; filename="{name}"')
        self.finish(data)


def exercise_patterns(secret: bytes, data_dir: Path | None = None) -> list[tuple]:
    """The exercise routes (the package's only with a data folder to keep it in); the reports' and in-page checks'
    tables are made here, before the workers are forked, so they share them."""
    args = {"secret": secret}
    reports = TokenBuckets(capacity=1, per_second=1 / settings().report_gap)
    share_check_limits()
    package = [(INSTALL_PATH.replace(".", r"\.") + r"([A-Za-z0-9_.+-]{1,120}\.whl)", PackageHandler,
                {"data_dir": data_dir})] if data_dir is not None else []
    return [(r"/exercises/([A-Za-z0-9_-]{1,80})\.zip", DownloadHandler, args),
            (r"/exercises/report", ReportHandler, {**args, "reports": reports}), *package]
