"""`blocktrace check [FOLDER]`: run an exercise's tests on this laptop and send the result to the teacher.

FOLDER is the unzipped download (the current folder by default). Its ticket (blocktrace-exercise.json) says
which exercise it is, which file the student edits and where to report. Without a ticket (a checkout of the
repository), the tests run and nothing is sent.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

# Only the standard library, NumPy and the engine from here on: a laptop that installed blocktrace from the
# teacher's server (--no-deps) has nothing else (tests/app/test_package.py checks it).
from blocktrace.app.exercises import challenge
from blocktrace.app.exercises.runner import Outcome, load_module, run_tests

__all__ = ["TICKET", "challenge_outputs", "run_check"]

TICKET = "blocktrace-exercise.json"  # the ticket's file in the download (bundle.py writes it)

TIMEOUT_S = 15
LONGEST_RETRY_WAIT_S = 5.0  # a report refused as too soon after the last is sent again once, after this at most


def _ticket(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads((folder / TICKET).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _student_file(folder: Path, ticket: dict[str, Any] | None) -> Path | None:
    if ticket and isinstance(ticket.get("file"), str) and (folder / Path(ticket["file"]).name).is_file():
        return folder / Path(ticket["file"]).name
    candidates = [p for p in sorted(folder.glob("*.py")) if not p.name.startswith(("test_", "conftest"))]
    return candidates[0] if len(candidates) == 1 else None


def challenge_outputs(module: Any, folder_key: str, nonce: str) -> dict[str, Any]:
    """The student's functions on the ticket's inputs; a function that fails or is missing sends None."""
    outputs = {}
    for name, case in challenge.cases(folder_key, nonce).items():
        fn = getattr(module, case.function, None)
        try:
            outputs[name] = challenge.as_numbers(case.read(fn(*case.args))) if callable(fn) else None
        except Exception:  # noqa: BLE001 - the student's code may raise anything: that function does not pass
            outputs[name] = None
    return outputs


def send(ticket: dict[str, Any], outcomes: list[Outcome], outputs: dict[str, Any]) -> dict[str, Any]:
    """The server's answer to the report; one that came too soon after the last is sent again when the server
    says it may be (a student who fixes a typo and checks again at once still reaches the teacher)."""
    answer = _post(ticket, outcomes, outputs)
    wait = answer.get("retry_after")
    if not answer.get("recorded") and isinstance(wait, int | float) and 0 < wait <= LONGEST_RETRY_WAIT_S:
        time.sleep(wait)
        answer = _post(ticket, outcomes, outputs)
    return answer


def _post(ticket: dict[str, Any], outcomes: list[Outcome], outputs: dict[str, Any]) -> dict[str, Any]:
    body = json.dumps({"ticket": ticket, "outputs": outputs,
                       "tests": [{"name": o.name, "passed": o.passed} for o in outcomes]}).encode("utf-8")
    request = urllib.request.Request(str(ticket["server"]).rstrip("/") + "/exercises/report", data=body,
                                     headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        try:
            return json.loads(error.read())
        except ValueError:
            return {"recorded": False, "error": f"the server answered {error.code}"}
    except (urllib.error.URLError, OSError, ValueError) as error:
        return {"recorded": False, "error": f"could not reach {ticket['server']} ({error})"}


def run_check(folder_text: str, out=sys.stdout) -> int:
    """0 when every test passes (and, with a ticket, the server agrees), else 1; 2 when nothing can run."""
    folder = Path(folder_text).resolve()
    ticket = _ticket(folder)
    tests = sorted(folder.glob("test_*.py"))
    student = _student_file(folder, ticket)
    if not tests or student is None:
        out.write(f"error: {folder} holds no exercise (a test_*.py file and the file you edit); unzip the "
                  "download from the lesson page and run `blocktrace check` in that folder\n")
        return 2
    out.write(f"checking {student.name} with {', '.join(t.name for t in tests)}\n")
    try:
        module = load_module(student, "blocktrace_check_student")
    except Exception as error:  # noqa: BLE001 - a syntax error or a failing import in the student's file
        out.write(f"error: {student.name} does not load: {type(error).__name__}: {error}\n")
        return 1
    outcomes = [o for test in tests for o in run_tests(test, module)]
    for o in outcomes:
        out.write(f"  {'PASS' if o.passed else 'FAIL'}  {o.name}\n")
        if not o.passed:
            out.write("        " + o.message.replace("\n", "\n        ") + "\n")
    passed = sum(o.passed for o in outcomes)
    out.write(f"{passed} of {len(outcomes)} tests pass\n")
    if ticket is None:
        out.write("(no ticket in this folder: the result stays on this laptop)\n")
        return 0 if passed == len(outcomes) else 1
    outputs = challenge_outputs(module, str(ticket.get("folder")), str(ticket.get("nonce")))
    answer = send(ticket, outcomes, outputs)
    if not answer.get("recorded"):
        out.write(f"not sent to your teacher: {answer.get('error', 'no answer')}\n")
        return 1
    verdict = "every test passes and the server checked your numbers" if answer.get("passed") else (
        "your functions' numbers did not match the server's check" if passed == len(outcomes)
        else f"{passed} of {len(outcomes)} tests pass")
    out.write(f"sent to your teacher: {verdict}\n")
    return 0 if answer.get("passed") else 1
