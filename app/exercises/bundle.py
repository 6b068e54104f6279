"""An exercise as a download: its starter and tests, and a ticket that lets `blocktrace check` report back.

The ticket (blocktrace-exercise.json) names the server, the class, the learner and a nonce, signed with the
server's secret (app/signing.py, EXERCISE_TICKET): a report is taken only for the learner and nonce it was
issued for, and only within the purpose's age limit.
"""

from __future__ import annotations

import io
import json
import secrets
import zipfile
from dataclasses import dataclass
from typing import Any

from blocktrace.app import signing
from blocktrace.app.exercises.check_command import TICKET
from blocktrace.app.exercises.package import IN_PAGE_FILE
from blocktrace.app.lessons.loading import load_lessons
from blocktrace.app.package_data import ROOT

__all__ = ["TICKET", "bundle", "exercises", "new_ticket", "ticket_is_genuine"]

SKIP = {"__pycache__", ".pytest_cache", IN_PAGE_FILE}  # the in-page answers stay on the server


@dataclass(frozen=True)
class Exercise:
    id: str  # the lesson's :::exercise id
    folder: str  # its path, e.g. lessons/transformer-block/exercise
    file: str  # the file the student edits
    title: str
    lesson: str  # the lesson whose page shows it


def exercises() -> dict[str, Exercise]:
    """Every exercise the lessons name, by id."""
    found = {}
    for lesson in load_lessons():
        for d in lesson.directives("exercise"):
            a = d.attrs
            found[str(a["id"])] = Exercise(str(a["id"]), str(a["path"]), str(a.get("file", "")),
                                           str(a.get("title", "")), lesson.id)
    return found


def _ticket_text(exercise: str, learner: str, class_code: str, nonce: str) -> str:
    return json.dumps([exercise, learner, class_code, nonce])


def new_ticket(secret: bytes, exercise: Exercise, learner: str, class_code: str, server: str) -> dict[str, Any]:
    nonce = secrets.token_hex(8)
    token = signing.sign(secret, signing.EXERCISE_TICKET, _ticket_text(exercise.id, learner, class_code, nonce))
    return {"exercise": exercise.id, "folder": exercise.folder, "file": exercise.file, "server": server,
            "class": class_code, "learner": learner, "nonce": nonce,
            "token": token}


def ticket_is_genuine(secret: bytes, ticket: dict[str, Any]) -> bool:
    fields = [ticket.get(k) for k in ("exercise", "learner", "class", "nonce", "token")]
    if not all(isinstance(v, str) and 0 < len(v) <= 400 for v in fields):
        return False
    exercise, learner, class_code, nonce, token = fields
    return signing.unsign(secret, signing.EXERCISE_TICKET, token) == _ticket_text(exercise, learner, class_code, nonce)


def bundle(exercise: Exercise, ticket: dict[str, Any]) -> bytes:
    """The zip a student downloads: the exercise folder's files under one folder, and the ticket."""
    folder = ROOT / exercise.folder
    top = exercise.id
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and not SKIP & set(path.relative_to(folder).parts):
                z.write(path, f"{top}/{path.relative_to(folder).as_posix()}")
        z.writestr(f"{top}/{TICKET}", json.dumps(ticket, indent=2) + "\n")
    return out.getvalue()
