"""The class database goes away mid-lesson: the student keeps exploring, is told, and nothing is lost.

A server on a throwaway PostgreSQL (tests/pg.py); a student opens the block trace; PostgreSQL is shut
down (fast shutdown: every connection is dropped). The student commits a prediction and moves the
attention scale: the page keeps answering and says their progress is not being saved. PostgreSQL
comes back on the same data directory and port; within the outbox's retry period the notice goes,
and the prediction and the change are in the database exactly once; a change after recovery lands too.
"""

from __future__ import annotations

import csv
import io
import json
import re
import time

import pytest
from playwright.sync_api import Browser, expect

from blocktrace.app.classroom.identity import load_or_create_secret, verify
from blocktrace.app.classroom.learner import COALESCE_MS
from blocktrace.app.classroom.store import EventStore
from blocktrace.explorables.transformer_block_trace.state import PREDICTION_CHOICES
from tests.browser.test_transformer_block_trace import numbers, slider, stage_row
from tests.conftest import start_server, stop_server
from tests.pg import running_postgres

pytestmark = pytest.mark.browser

CLASS = "outage"
TRACE = f"/explorables/transformer-block-trace?class={CLASS}"
QUESTION = "transformer-block-trace/prediction"
CHOICE = "keep-erase"
NOTICE = "Your progress is not being saved right now"
RECOVERY_TIMEOUT_MS = 30_000  # the outbox retries every 4 s; reconnecting to a restarted server takes a moment
LAND_TIMEOUT = 20.0  # seconds for a change made after recovery to reach the database


def _events(store: EventStore) -> list[dict]:
    return list(csv.DictReader(io.StringIO(store.export_csv(CLASS))))


def test_students_keep_exploring_while_the_database_is_down(browser: Browser, tmp_path) -> None:
    """Stop PostgreSQL under a student: the page works and warns; after a restart everything lands once."""
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
            attention = numbers(stage_row(page, "Attention update"))
            expect(attention).not_to_have_text(["0.000"] * 5)

            pg.stop()  # the outage: connections dropped, the port closed

            page.get_by_text(PREDICTION_CHOICES[CHOICE]).click()
            page.get_by_role("button", name="Commit prediction").click()
            expect(page.get_by_text("Your prediction (final)")).to_be_visible()  # final on the page at once
            notice = page.get_by_text(NOTICE)
            expect(notice).to_be_visible()
            handle = slider(page, "Attention update scale")
            handle.focus()
            page.keyboard.press("Home")
            expect(handle).to_have_attribute("aria-valuenow", re.compile(r"^0(\.0+)?$"))
            expect(attention).to_have_text(["0.000"] * 5)  # the page still computes and updates
            expect(page).to_have_url(re.compile(r"[?&]attention_scale=0(&|$)"))
            # The change is written once its burst ends (COALESCE_MS after it); wait until the server says it
            # went to the outbox, so it is queued during the outage rather than sent to a database already back.
            deadline = time.monotonic() + COALESCE_MS / 1000 + LAND_TIMEOUT
            while "a 'param' event waits in the outbox" not in server.log() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert "a 'param' event waits in the outbox" in server.log()
            expect(notice).to_be_visible()
            assert "Traceback" not in server.log()

            pg.start()  # the same data directory and port

            expect(notice).to_be_hidden(timeout=RECOVERY_TIMEOUT_MS)
            learner = verify(next(c["value"] for c in context.cookies() if c["name"] == "bt_learner"),
                             load_or_create_secret(tmp_path / "data"))
            assert learner is not None
            with EventStore(db_url) as store:
                rows = _events(store)  # the notice goes only once the outbox is empty: all of it is stored
                assert [(r["learner_id"], r["kind"]) for r in rows] == [(learner, "prediction"), (learner, "param")]
                assert json.loads(rows[1]["payload"]) == {"name": "attention_scale", "value": 0}
                assert store.prediction(CLASS, learner, QUESTION).choice == CHOICE
                assert store.distribution(CLASS, QUESTION) == {CHOICE: 1}

                page.keyboard.press("End")  # a change after recovery is written as usual
                expect(attention).not_to_have_text(["0.000"] * 5)
                deadline = time.monotonic() + LAND_TIMEOUT
                while len(rows := _events(store)) < 3 and time.monotonic() < deadline:
                    time.sleep(0.2)
                assert [r["kind"] for r in rows] == ["prediction", "param", "param"]
                assert len({r["event_id"] for r in rows}) == 3
            expect(notice).to_be_hidden()
            assert errors == []
        finally:
            context.close()
            stop_server(server)
        log = server.log()
        assert "Traceback" not in log
        assert not re.search(r" 5\d\d (GET|POST) ", log), "the server answered a request with a 5xx"
