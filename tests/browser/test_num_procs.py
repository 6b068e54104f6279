"""`blocktrace serve --num-procs 2`: every student is one learner, and SIGTERM stops the whole server.

With several workers on one port, a page's request and its websocket may be accepted by different
workers, and each builds the session. Only the worker holding the websocket may register the learner;
otherwise the class list gains a phantom learner for about every other student.
"""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import Browser
from sqlalchemy import select

from blocktrace.app.classroom.identity import load_or_create_secret, verify
from blocktrace.app.classroom.schema import learners
from blocktrace.app.classroom.store import EventStore, default_url
from blocktrace.app.serve import child_pids
from tests.conftest import start_server, stop_server

pytestmark = pytest.mark.browser

CLASS = "procs"
STUDENTS = 6  # with two workers, six fresh students all landing cleanly by chance: about 1 in 64
SETTLE_TIMEOUT = 20.0  # seconds for joins (written by the store thread) to reach the database
STOP_TIMEOUT = 15.0


def _stored_learners(store: EventStore) -> set[str]:
    with store.engine.connect() as conn:
        return set(conn.execute(select(learners.c.id).where(learners.c.class_code == CLASS)).scalars())


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_two_workers_register_each_student_once_and_stop_together(browser: Browser, tmp_path) -> None:
    data = tmp_path / "data"
    server = start_server(tmp_path / "server.log", "--data-dir", str(data), "--num-procs", "2",
                          "--teacher-password", "pw")
    try:
        workers = child_pids(server.process.pid)
        assert len(workers) == 2
        secret = load_or_create_secret(data)
        ids = set()
        for _ in range(STUDENTS):
            context = browser.new_context()
            try:
                page = context.new_page()
                page.goto(server.url(f"/explorables/transformer-block-trace?class={CLASS}"))
                assert any(c["name"] == "bt_learner" and c["httpOnly"] for c in page.context.cookies())
                page.get_by_role("button", name="Commit prediction").wait_for()
                cookie = next(c["value"] for c in context.cookies() if c["name"] == "bt_learner")
                ids.add(verify(cookie, secret))
            finally:
                context.close()
        assert None not in ids and len(ids) == STUDENTS
        with EventStore(default_url(data)) as store:
            deadline = time.monotonic() + SETTLE_TIMEOUT
            while (stored := _stored_learners(store)) != ids and time.monotonic() < deadline:
                time.sleep(0.2)
            assert stored == ids  # no phantom learners, nobody missing
    finally:
        stop_server(server)  # SIGTERM to the parent
    deadline = time.monotonic() + STOP_TIMEOUT
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in workers), "a worker kept running after the parent was stopped"
    assert server.process.returncode == 0
    assert "Traceback" not in server.log()
