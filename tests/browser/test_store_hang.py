"""The class database stops answering (hung, not down): the server goes on serving every student.

PostgreSQL is frozen with SIGSTOP, so its connections stay open and every query simply waits. All
database work runs on the server's store thread, so the event loop that serves the pages is never
held: the student's commit is answered at once (saving, not final: the store does not have it yet),
a new student can open the page, and once the store has been waiting a few seconds the page says
progress is not being saved. When PostgreSQL goes on (SIGCONT), the prediction becomes final, the
notice goes, and everything lands exactly once; a slider change after that is written too.
"""

from __future__ import annotations

import base64
import csv
import io
import re
import threading
import time
import urllib.request

import pytest
from playwright.sync_api import Browser, expect

from blocktrace.app.classroom.identity import load_or_create_secret, verify
from blocktrace.app.classroom.store import EventStore
from blocktrace.explorables.components.prediction import SAVING
from blocktrace.explorables.transformer_block_trace.state import PREDICTION_CHOICES
from tests.browser.test_transformer_block_trace import VECTOR, numbers, slider, stage_row
from tests.conftest import start_server, stop_server
from tests.pg import running_postgres

pytestmark = pytest.mark.browser

CLASS = "hung"
TRACE = f"/explorables/transformer-block-trace?class={CLASS}"
QUESTION = "transformer-block-trace/prediction"
CHOICE = "keep-erase"
NOTICE = "Your progress is not being saved right now"
NOTICE_TIMEOUT_MS = 20_000  # the store counts as hung after 5 s; pages look every 4 s
LAND_TIMEOUT = 30.0  # seconds for the queued writes to reach the database once it answers again


def _kinds(store: EventStore) -> list[tuple[str, str, str]]:
    rows = csv.DictReader(io.StringIO(store.export_csv(CLASS)))
    return [(r["learner_id"], r["kind"], r["event_id"]) for r in rows]


def _open_dashboard(url: str, result: dict) -> None:
    request = urllib.request.Request(url, headers={"Authorization": "Basic " + base64.b64encode(b"t:pw").decode()})
    try:
        with urllib.request.urlopen(request, timeout=LAND_TIMEOUT + 30) as response:
            result["status"] = response.status
    except Exception as error:  # reported by the assertion in the test
        result["error"] = repr(error)


def test_a_hung_database_does_not_hold_up_the_pages(browser: Browser, tmp_path) -> None:
    with running_postgres() as pg:
        db_url = pg.create_database()
        server = start_server(tmp_path / "server.log", "--data-dir", str(tmp_path / "data"), "--db", db_url,
                              "--teacher-password", "pw")
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        try:
            page = context.new_page()
            page.on("pageerror", lambda err: errors.append(str(err)))
            page.goto(server.url(TRACE))
            assert any(c["name"] == "bt_learner" and c["httpOnly"] for c in page.context.cookies())  # set with the page
            expect(page.get_by_role("button", name="Commit prediction")).to_be_visible()
            attention = numbers(stage_row(page, "Attention update"))  # shown once the prediction is final

            pg.freeze()
            teacher: dict = {}
            dashboard = threading.Thread(target=_open_dashboard, args=(server.url(f"/teacher?class={CLASS}"), teacher))
            try:
                dashboard.start()  # the teacher's page waits for the database, and must not hold up anyone else
                page.get_by_text(PREDICTION_CHOICES[CHOICE]).click()
                page.get_by_role("button", name="Commit prediction").click()
                expect(page.get_by_text(SAVING)).to_be_visible()  # answered while the database hangs
                expect(page.get_by_text("Your prediction (final)")).to_have_count(0)

                other = browser.new_context(viewport={"width": 1024, "height": 800})
                try:  # a student arriving now gets a working page too
                    newcomer = other.new_page()
                    newcomer.goto(server.url(TRACE))
                    expect(newcomer.get_by_role("button", name="Commit prediction")).to_be_visible()
                finally:
                    other.close()

                expect(page.get_by_text(NOTICE)).to_be_visible(timeout=NOTICE_TIMEOUT_MS)
            finally:
                pg.thaw()

            expect(page.get_by_text("Your prediction (final)")).to_be_visible(timeout=NOTICE_TIMEOUT_MS + 10_000)
            expect(page.get_by_text(NOTICE)).to_be_hidden(timeout=NOTICE_TIMEOUT_MS + 10_000)
            expect(page.get_by_label(VECTOR)).to_be_enabled()  # the controls unlock once it is final
            expect(attention).not_to_have_text(["0.000"] * 5)
            handle = slider(page, "Attention update scale")
            handle.focus()
            page.keyboard.press("Home")
            expect(attention).to_have_text(["0.000"] * 5)
            dashboard.join(timeout=LAND_TIMEOUT)
            assert teacher.get("status") == 200, teacher
            learner = verify(next(c["value"] for c in context.cookies() if c["name"] == "bt_learner"),
                             load_or_create_secret(tmp_path / "data"))
            with EventStore(db_url) as store:
                deadline = time.monotonic() + LAND_TIMEOUT
                mine = [(kind, event) for who, kind, event in _kinds(store) if who == learner]
                while len(mine) < 2 and time.monotonic() < deadline:  # the param write follows its burst
                    time.sleep(0.2)
                    mine = [(kind, event) for who, kind, event in _kinds(store) if who == learner]
                assert [kind for kind, _ in mine] == ["prediction", "param"]
                assert len({event for _, event in mine}) == 2
                assert store.prediction(CLASS, learner, QUESTION).choice == CHOICE
            assert errors == []
        finally:
            context.close()
            stop_server(server)
        log = server.log()
        assert "Traceback" not in log
        assert not re.search(r" 5\d\d (GET|POST) ", log), "the server answered a request with a 5xx"
