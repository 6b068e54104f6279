"""`kill -9` while students commit: what each student saw as final, and what the store has after a restart.

Shared by tests/app/test_kill_final.py (a few kills) and benchmarks/kill_final.py (twenty and more).
Each student is a real page session over the Bokeh websocket: a page request with the learner's
signed cookie (as a returning browser sends it) hands over the session token, the websocket pulls
the document, picks an answer in the prediction gate and presses "Commit prediction". Everything
the server sends is read until it dies, so "shown as final" is what the student's page would show.

After the restart, each student opens the page again with the same cookie:
- a student whose page showed "final" must have that very answer in the store (else it is lost);
- a student whose page did not must find a consistent gate: either their stored answer, final, or
  an open gate with nothing stored, in which they can commit (and that commit becomes final).
"""

from __future__ import annotations

import asyncio
import html
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from blocktrace.app.classroom.identity import COOKIE_NAME, load_or_create_secret, new_learner_id, sign
from blocktrace.app.classroom.store import EventStore, default_url
from blocktrace.explorables.block_floor.state import FloorState
from blocktrace.explorables.components.prediction import CHOICES_CLASS
from blocktrace.explorables.transformer_block_trace.state import PREDICTION_CHOICES
from tests.app.bokeh_ws_client import Session, fetch_token, models
from tests.conftest import Server, start_server, stop_server

TRACE = "/explorables/transformer-block-trace"
FLOOR = "/explorables/block-floor"
QUESTION = "transformer-block-trace/prediction"
FINAL = "Your prediction (final)"
OPEN = "The controls unlock once you commit."
COMMIT = "Commit prediction"
CHECK = "Check answer"
# A page's answer (final after a commit, a restarted page's restore): 1-4 s in a loaded CI lane, where a page can
# also hear nothing for over 30 s while the server builds the next students' pages.
ANSWER_TIMEOUT_S = 120.0


def _attrs(model: dict) -> dict:
    return model.get("attributes", {}) or {}


def _text(model: dict) -> str:
    return html.unescape(str(_attrs(model).get("text", "")))


@dataclass
class Student:
    """One learner's page session: the ids of the gate's models and the gate's text as last received."""

    learner_id: str
    cookie: str
    choice: str
    session: Session | None = None
    radio: str = ""
    button: str = ""
    summary: str = ""
    gate_text: str = ""
    final_seen: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    reader: asyncio.Task | None = None

    def shown_choice(self) -> str | None:
        """The answer the gate shows as final, if it does."""
        if FINAL not in self.gate_text:
            return None
        return next((key for key, label in PREDICTION_CHOICES.items() if html.escape(label) in self.gate_text
                     or label in self.gate_text), None)


def ws_url(base: str, path: str) -> str:
    return base.replace("http://", "ws://", 1) + path + "/ws"


async def open_page(base: str, path: str, class_code: str, cookie: str) -> Session:
    """The page's session as the student's browser opens it: the page request and the websocket both
    carry the learner cookie (the server refuses a websocket from another browser than the page's)."""
    token = await fetch_token(f"{base}{path}?class={class_code}", headers={"Cookie": cookie})
    return await Session.open(ws_url(base, path), token, headers={"Cookie": cookie})


async def _read_gate(student: Student) -> None:
    """Follow the gate's text until the websocket closes (the server died or the test closed it).

    A read that times out is silence, not the end: a page open while the server is busy with other students
    hears nothing for a while, and a "final" that comes after is still what the page showed. (Stopping there
    counted such a page as never final, and the final round then waited in vain for it.) The callers bound the
    wait for this reader's end, after the kill or after closing the socket."""
    try:
        while True:
            try:
                message = await student.session.read()
            except TimeoutError:
                continue
            if message.msgtype != "PATCH-DOC":
                continue
            for event in message.content.get("events", []):
                if event.get("kind") == "ModelChanged" and (event.get("model") or {}).get("id") == student.summary \
                        and event.get("attr") == "text":
                    student.gate_text = html.unescape(str(event.get("new")))
                    student.final_seen = student.final_seen or FINAL in student.gate_text
                    student.changed.set()
    except (Exception, asyncio.CancelledError):  # closed: what arrived until then is what the page showed
        pass
    finally:
        student.changed.set()  # a waiter stops waiting: nothing more will come


async def join(base: str, class_code: str, secret: bytes, choice: str) -> Student:
    learner_id = new_learner_id()
    student = Student(learner_id, f"{COOKIE_NAME}={sign(learner_id, secret)}", choice)
    await attach(student, base, class_code)
    return student


async def attach(student: Student, base: str, class_code: str) -> None:
    """Open the student's page (again) and find the gate in its document."""
    student.session = await open_page(base, TRACE, class_code, student.cookie)
    student.final_seen, student.gate_text = False, ""
    student.changed = asyncio.Event()  # of this event loop (each phase of a kill runs its own)
    for model in models(student.session.document):
        attrs, name = _attrs(model), model.get("name", "")
        if name == "RadioGroup" and CHOICES_CLASS in (attrs.get("css_classes") or []):
            student.radio = model["id"]
        elif name.endswith("Button") and attrs.get("label") == COMMIT:
            student.button = model["id"]
        elif name.endswith("HTML") and (OPEN in _text(model) or FINAL in _text(model)
                                        or "Saving your prediction" in _text(model)):
            student.summary, student.gate_text = model["id"], _text(model)
    assert student.radio and student.button and student.summary, "the prediction gate is not in the page"
    student.final_seen = FINAL in student.gate_text
    student.reader = asyncio.ensure_future(_read_gate(student))


async def click(session: Session, button: str) -> None:
    await session.send({"kind": "MessageSent", "msg_type": "bokeh_event",
                        "msg_data": {"type": "event", "name": "button_click",
                                     "values": {"type": "map", "entries": [["model", {"id": button}]]}}})


async def commit(student: Student) -> None:
    index = list(PREDICTION_CHOICES).index(student.choice)
    await student.session.set(student.radio, "active", index)
    await click(student.session, student.button)


async def wait_for(student: Student, condition, timeout: float = ANSWER_TIMEOUT_S) -> bool:
    """Whether `condition()` holds once the page's gate has changed, within `timeout`; False at once when the
    page's socket has closed (nothing more can come)."""
    deadline = time.monotonic() + timeout
    while not condition():
        left = deadline - time.monotonic()
        if left <= 0 or student.reader.done():
            return False
        student.changed.clear()
        try:
            await asyncio.wait_for(student.changed.wait(), min(left, 1.0))
        except TimeoutError:
            pass
    return True


def _checkpoint_controls(content: dict, labels: list[str]) -> tuple[str, str] | None:
    """The radio group and "Check answer" button of the floor's first checkpoint, if `content` has them."""
    radio = next((m["id"] for m in models(content) if m.get("name") == "RadioGroup"
                  and labels[0] in (_attrs(m).get("labels") or [])), None)
    button = next((m["id"] for m in models(content) if m.get("name", "").endswith("Button")
                   and _attrs(m).get("label") == CHECK), None)
    return (radio, button) if radio and button else None


async def flood_check_answer(base: str, class_code: str, secret: bytes, presses: int) -> Session:
    """One student presses "Check answer" `presses` times on the block floor, alternating two answers.

    The checkpoints arrive once the bet is final, so the student commits the bet first if they are not
    in the page yet."""
    cookie = f"{COOKIE_NAME}={sign(new_learner_id(), secret)}"
    session = await open_page(base, FLOOR, class_code, cookie)
    labels = [option.label for option in FloorState().checkpoints[0].options]
    found = _checkpoint_controls(session.document, labels)
    if found is None:
        bet = next(m["id"] for m in models(session.document) if m.get("name") == "RadioGroup"
                   and CHOICES_CLASS in (_attrs(m).get("css_classes") or []))
        commit_bet = next(m["id"] for m in models(session.document) if m.get("name", "").endswith("Button")
                          and _attrs(m).get("label") == "Commit prediction")
        await session.set(bet, "active", 1)
        await click(session, commit_bet)
        deadline = time.monotonic() + ANSWER_TIMEOUT_S  # the bet's answer, as a commit's (reads time out sooner)
        while found is None:
            assert time.monotonic() < deadline, f"the checkpoints did not come within {ANSWER_TIMEOUT_S:.0f} s"
            try:
                message = await session.read()
            except TimeoutError:
                continue
            if message.msgtype == "PATCH-DOC":
                found = _checkpoint_controls(message.content, labels)
    radio, button = found
    for press in range(presses):
        await session.set(radio, "active", 1 + press % 2)
        await click(session, button)
    return session


@dataclass
class Round:
    """One kill: who saw "final", what the store holds after the restart, and how each gate came back."""

    offset_s: float | None  # None: killed once every page showed final
    students: int
    shown_final: int = 0
    lost: int = 0  # shown as final, not in the store (or another answer stored)
    stored_not_shown: int = 0  # in the store though the page had not said final yet (harmless)
    inconsistent: int = 0  # a gate after the restart that disagrees with the store
    problems: list[str] = field(default_factory=list)


def kill(server: Server) -> None:
    server.process.send_signal(signal.SIGKILL)
    server.process.wait(timeout=30)


async def commit_and_kill(server: Server, class_code: str, secret: bytes, students: int, offset_s: float | None,
                          flood: int = 0) -> list[Student]:
    """Students commit at once; `offset_s` after the last commit is sent the server is killed with SIGKILL
    (None: as soon as every page shows final)."""
    base = server.base_url
    class_students = [await join(base, class_code, secret, list(PREDICTION_CHOICES)[n % len(PREDICTION_CHOICES)])
                      for n in range(students)]
    flooder = await flood_check_answer(base, class_code, secret, flood) if flood else None
    for student in class_students:
        await commit(student)
    if offset_s is None:  # every page at once: the bound is the slowest page's, not the sum of them
        await asyncio.gather(*(wait_for(student, lambda s=student: s.final_seen) for student in class_students))
    elif offset_s > 0:
        await asyncio.sleep(offset_s)  # the moment of the crash (the scenario's input, not synchronisation)
    kill(server)
    for student in class_students:  # read what the server had sent before it died
        await asyncio.wait_for(student.reader, ANSWER_TIMEOUT_S)
        student.session.close()
    if flooder is not None:
        flooder.close()
    return class_students


async def check_after_restart(server: Server, data: Path, class_code: str, students: list[Student],
                              result: Round) -> None:
    """On the restarted server: every answer shown as final is stored; every gate agrees with the store."""
    with EventStore(default_url(data)) as store:
        for student in students:
            shown = student.shown_choice() if student.final_seen else None
            stored = store.prediction(class_code, student.learner_id, QUESTION)
            if student.final_seen:
                result.shown_final += 1
                if stored is None or stored.choice != shown:
                    result.lost += 1
                    result.problems.append(f"{student.learner_id} saw {shown!r} as final; the store has "
                                           f"{stored.choice if stored else None!r}")
            elif stored is not None:
                result.stored_not_shown += 1
            await attach(student, server.base_url, class_code)
            try:
                if stored is not None:  # the gate comes back final, with the stored answer
                    ok = await wait_for(student, lambda s=student: s.shown_choice() is not None)
                    if not ok or student.shown_choice() != stored.choice:
                        result.inconsistent += 1
                        result.problems.append(f"{student.learner_id}: stored {stored.choice!r}, the gate shows "
                                               f"{student.gate_text[:80]!r}")
                else:  # nothing stored: the gate is open, and a commit now becomes final and stored
                    if OPEN not in student.gate_text:
                        result.inconsistent += 1
                        result.problems.append(f"{student.learner_id}: nothing stored, the gate shows "
                                               f"{student.gate_text[:80]!r}")
                        continue
                    await commit(student)
                    ok = await wait_for(student, lambda s=student: s.shown_choice() is not None)
                    again = store.prediction(class_code, student.learner_id, QUESTION)
                    if not ok or again is None or again.choice != student.choice:
                        result.inconsistent += 1
                        result.problems.append(f"{student.learner_id}: a commit after the restart did not "
                                               "become final and stored")
            finally:
                student.session.close()
                await asyncio.wait_for(student.reader, ANSWER_TIMEOUT_S)


def run_kills(tmp: Path, offsets: list[float | None], students: int, floods: list[int] | None = None,
              report=None) -> list[Round]:
    """One server per kill, on one data directory: commit, kill at each offset, restart, check.

    `floods[n]`: "Check answer" presses of one more student before the n-th kill's commits."""
    data = tmp / "data"
    rounds: list[Round] = []
    server = start_server(tmp / "server-0.log", "--data-dir", str(data))
    try:
        secret = load_or_create_secret(data)
        for n, offset in enumerate(offsets):
            class_code = f"kill{n}"
            flood = floods[n] if floods else 0
            crashed = asyncio.run(commit_and_kill(server, class_code, secret, students, offset, flood))
            server = start_server(tmp / f"server-{n + 1}.log", "--data-dir", str(data))
            result = Round(offset, students)
            asyncio.run(check_after_restart(server, data, class_code, crashed, result))
            rounds.append(result)
            if report is not None:
                report(result)
    finally:
        if server.process.poll() is None:
            stop_server(server)
    return rounds
