"""The class database goes away mid-lesson: the student is told, nothing is shown as final before it is
stored, and nothing is lost.

A server on a throwaway PostgreSQL (tests/pg.py); a student opens the block trace; PostgreSQL is shut
down (fast shutdown: every connection is dropped). The student commits a prediction: the page says it
is not saved yet (never "final") and that their progress is not being saved. PostgreSQL comes back on
the same data directory and port; within the outbox's retry period the prediction becomes final, the
notice goes, and the prediction is in the database exactly once; a change after recovery lands too.
The same on SQLite with a real full disk (a tmpfs data folder): once space is freed, writing resumes
without a restart, and the teacher's dashboard said what was waiting meanwhile.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import re
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from blocktrace.app.classroom.identity import load_or_create_secret, verify
from blocktrace.app.classroom.store import EventStore, StoreUnavailable, default_url, new_event_id
from blocktrace.explorables.components.prediction import SAVING_DELAYED
from blocktrace.explorables.transformer_block_trace.state import PREDICTION_CHOICES
from tests.browser.test_transformer_block_trace import VECTOR, numbers, slider, stage_row
from tests.conftest import Server, start_server, stop_server
from tests.mounts import small_disk
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


def _wait_for_events(store: EventStore, n: int) -> list[dict]:
    deadline = time.monotonic() + LAND_TIMEOUT
    while len(rows := _events(store)) < n and time.monotonic() < deadline:
        time.sleep(0.2)
    return rows


def _dashboard(server: Server) -> str:
    request = urllib.request.Request(server.url(f"/teacher?class={CLASS}"), headers={
        "Authorization": "Basic " + base64.b64encode(b"teacher:pw").decode()})
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read().decode("utf-8")


def _open_trace(page, server: Server):
    page.goto(server.url(TRACE))
    attention = numbers(stage_row(page, "Attention update"))
    expect(page.get_by_role("button", name="Commit prediction")).to_be_visible()
    return attention


def _commit_while_unsaved(page) -> None:
    """Commit during the outage: the page says it is not saved yet, never that it is final."""
    page.get_by_text(PREDICTION_CHOICES[CHOICE]).click()
    page.get_by_role("button", name="Commit prediction").click()
    expect(page.get_by_text(SAVING_DELAYED)).to_be_visible(timeout=RECOVERY_TIMEOUT_MS)
    expect(page.get_by_text(NOTICE)).to_be_visible()
    expect(page.get_by_text("Your prediction (final)")).to_have_count(0)


def _learner(context, data_dir: Path) -> str:
    learner = verify(next(c["value"] for c in context.cookies() if c["name"] == "bt_learner"),
                     load_or_create_secret(data_dir))
    assert learner is not None
    return learner


def _final_then_a_change_lands(page, attention, store: EventStore, learner: str) -> None:
    """After recovery: final, the notice gone, the prediction stored once; a change is written as usual."""
    expect(page.get_by_text("Your prediction (final)")).to_be_visible(timeout=RECOVERY_TIMEOUT_MS)
    expect(page.get_by_text(NOTICE)).to_be_hidden(timeout=RECOVERY_TIMEOUT_MS)
    rows = _events(store)  # final only once stored
    assert [(r["learner_id"], r["kind"]) for r in rows] == [(learner, "prediction")]
    assert store.prediction(CLASS, learner, QUESTION).choice == CHOICE
    assert store.distribution(CLASS, QUESTION) == {CHOICE: 1}
    expect(page.get_by_label(VECTOR)).to_be_enabled()  # the controls unlock once it is final
    handle = slider(page, "Attention update scale")
    handle.focus()
    page.keyboard.press("Home")
    expect(handle).to_have_attribute("aria-valuenow", re.compile(r"^0(\.0+)?$"))
    expect(attention).to_have_text(["0.000"] * 5)
    rows = _wait_for_events(store, 2)
    assert [r["kind"] for r in rows] == ["prediction", "param"]
    assert json.loads(rows[1]["payload"]) == {"name": "attention_scale", "value": 0}


def _clean(server: Server) -> None:
    log = server.log()
    assert "Traceback" not in log
    assert not re.search(r" 5\d\d (GET|POST) ", log), "the server answered a request with a 5xx"


def test_students_are_told_and_nothing_is_lost_while_postgres_is_down(browser: Browser, tmp_path) -> None:
    """Stop PostgreSQL under a student: the commit waits, unsaved and said so; after a restart it lands once."""
    with running_postgres() as pg:
        db_url = pg.create_database()
        server = start_server(tmp_path / "server.log", "--data-dir", str(tmp_path / "data"), "--db", db_url,
                              "--teacher-password", "pw")
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        try:
            page = context.new_page()
            page.on("pageerror", lambda err: errors.append(str(err)))
            attention = _open_trace(page, server)

            pg.stop()  # the outage: connections dropped, the port closed
            _commit_while_unsaved(page)
            assert "not saved yet" in _dashboard(server) or "cannot be reached" in _dashboard(server)
            assert "Traceback" not in server.log()

            pg.start()  # the same data directory and port
            with EventStore(db_url) as store:
                _final_then_a_change_lands(page, attention, store, _learner(context, tmp_path / "data"))
            assert "store-status" not in _dashboard(server)
            assert errors == []
        finally:
            context.close()
            stop_server(server)
        _clean(server)


def test_students_are_told_and_nothing_is_lost_while_the_disk_is_full(browser: Browser, tmp_path) -> None:
    """SQLite on a full disk (a real tmpfs): the commit waits, the teacher sees it waiting; freed space saves it."""
    with small_disk(tmp_path / "disk", 8 * 1024 * 1024) as filler:
        data_dir = tmp_path / "disk" / "data"
        server = start_server(tmp_path / "server.log", "--data-dir", str(data_dir), "--teacher-password", "pw")
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        try:
            page = context.new_page()
            page.on("pageerror", lambda err: errors.append(str(err)))
            attention = _open_trace(page, server)
            with EventStore(default_url(data_dir)) as other:
                filler()
                while True:  # use up the pages SQLite still had free in its file
                    try:
                        other.record(new_event_id(), "filler", "filler", "param", {"parts": ["x" * 2000] * 7})
                    except StoreUnavailable:
                        break

            _commit_while_unsaved(page)
            teacher = _dashboard(server)
            assert "1 learner action not saved yet" in teacher and "full" in teacher

            filler.release()  # space again: no restart
            with EventStore(default_url(data_dir)) as store:
                _final_then_a_change_lands(page, attention, store, _learner(context, data_dir))
            assert "store-status" not in _dashboard(server)
            assert errors == []
        finally:
            context.close()
            stop_server(server)
        _clean(server)
