"""Two `blocktrace serve` behind HAProxy (deploy/haproxy.cfg) on one PostgreSQL, driven by a class of browsers.

Everything runs on loopback: a throwaway PostgreSQL (tests/pg.py), two app processes sharing the cookie
secret and the teacher password, and HAProxy started with the shipped configuration as it is (its
"${...}" placeholders come from HAProxy's environment). Twelve students, each in their own browser
context, go through the balancer: both backends must get students, each student's page and websocket
must reach the same backend, every commit and change must land in the database exactly once, and the
teacher's dashboard, fetched through the balancer, must count the whole class.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import os
import re
import secrets
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from unittest import mock

import pytest
from playwright.sync_api import Browser, Page, expect

from blocktrace.app.classroom.identity import verify
from blocktrace.app.classroom.store import EventStore
from blocktrace.app.serve import SECRET_ENV
from blocktrace.explorables.transformer_block_trace.state import PREDICTION_CHOICES
from tests.browser.test_transformer_block_trace import VECTOR, numbers, slider, stage_row
from tests.conftest import Server, free_port, start_server, stop_server
from tests.haproxy import START_TIMEOUT, start_haproxy, stop_process
from tests.pg import running_postgres

pytestmark = pytest.mark.browser

CLASS = "lb"
TRACE = f"/explorables/transformer-block-trace?class={CLASS}"
QUESTION = "transformer-block-trace/prediction"
PASSWORD = "balanced teacher"
STUDENTS = 6  # three per backend under round robin
LAND_TIMEOUT = 30.0  # seconds for the coalesced parameter events to reach the database
ANSWERS = list(PREDICTION_CHOICES)  # choice keys, in the page's order


@dataclass
class Balanced:
    """The balancer's address, the app servers behind it (app1, app2), the database and the shared secret."""

    port: int
    apps: dict[str, Server]
    db_url: str
    secret: bytes
    haproxy_log: Path

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def start_app(log_path: Path, secret: str, *args: str) -> Server:
    """`start_server` with BLOCKTRACE_SECRET set for the child (conftest's starter passes os.environ on)."""
    with mock.patch.dict(os.environ, {SECRET_ENV: secret}):
        return start_server(log_path, *args)


def _get(url: str, password: str | None = None) -> tuple[int, str, Message]:
    """(status, body, headers: case-insensitive, as HAProxy sends header names in lower case); 0 if unreachable."""
    request = urllib.request.Request(url)
    if password is not None:
        request.add_header("Authorization", "Basic " + base64.b64encode(f"teacher:{password}".encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode(), response.headers
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(), err.headers
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, "", Message()


@pytest.fixture(scope="module")
def balanced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Balanced]:
    folder = tmp_path_factory.mktemp("balanced")
    secret = secrets.token_urlsafe(32)
    port = free_port()
    apps: dict[str, Server] = {}
    haproxy = None
    with running_postgres() as pg:
        db_url = pg.create_database()
        try:
            for name in ("app1", "app2"):
                (folder / name).mkdir()
                apps[name] = start_app(
                    folder / name / "server.log", secret, "--db", db_url, "--teacher-password", PASSWORD,
                    "--use-xheaders",  # as deploy/README.md runs them: the student's address from HAProxy
                    "--access-log",  # the checks below count each app's pages, websockets and health checks
                    "--allow-websocket-origin", f"127.0.0.1:{port}", "--allow-websocket-origin", f"localhost:{port}")
            haproxy = start_haproxy(port, {name: app.port for name, app in apps.items()}, folder / "haproxy.log")
            yield Balanced(port, apps, db_url, secret.encode("utf-8"), folder / "haproxy.log")
        finally:
            if haproxy is not None:
                stop_process(haproxy)
            for app in apps.values():
                stop_server(app)
    for name, app in apps.items():
        assert "Traceback" not in app.log(), f"{name} logged a traceback"


def _commit_and_change(page: Page, answer: str) -> None:
    """Commit a prediction, then move the attention scale to 0 and see the page update."""
    page.get_by_text(answer).click()
    page.get_by_role("button", name="Commit prediction").click()
    expect(page.get_by_text("Your prediction (final)")).to_be_visible()
    expect(page.get_by_label(VECTOR)).to_be_enabled()  # the controls unlock with it (a key on a locked one is lost)
    handle = slider(page, "Attention update scale")
    handle.focus()
    page.keyboard.press("Home")
    expect(handle).to_have_attribute("aria-valuenow", re.compile(r"^0(\.0+)?$"))
    expect(numbers(stage_row(page, "Attention update"))).to_have_text(["0.000"] * 5)


def _cookie(page: Page, name: str) -> str:
    return next(c["value"] for c in page.context.cookies() if c["name"] == name)


def _rows(store: EventStore) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(store.export_csv(CLASS))))


def test_a_class_through_the_balancer_lands_once(browser: Browser, balanced: Balanced) -> None:
    """A class via HAProxy: both backends used, page and websocket on one backend, every event stored once."""
    pages = []
    try:
        for _ in range(STUDENTS):  # the whole class opens the link first, as in a lesson
            page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            pages.append(page)
            page.goto(balanced.url(TRACE))
        expected: dict[str, str] = {}  # learner id -> committed choice key
        backend_of: dict[str, str] = {}  # learner id -> the BTSRV cookie HAProxy gave their browser
        for n, page in enumerate(pages):
            choice = ANSWERS[n % len(ANSWERS)]
            _commit_and_change(page, PREDICTION_CHOICES[choice])
            assert any(c["name"] == "bt_learner" and c["httpOnly"] for c in page.context.cookies())  # set with the page
            learner = verify(_cookie(page, "bt_learner"), balanced.secret)
            assert learner is not None, "the learner cookie is not signed with the shared secret"
            expected[learner] = choice
            backend_of[learner] = _cookie(page, "BTSRV")
    finally:
        for page in pages:
            page.context.close()

    assert len(expected) == STUDENTS, "two students got the same learner id"
    spread = Counter(backend_of.values())
    assert set(spread) == {"app1", "app2"}, f"the balancer did not spread the class: {spread}"
    for name, app in balanced.apps.items():  # each page's websocket reached the process that built the page
        log = app.log()
        pages_built = len(re.findall(r" 200 GET /explorables/transformer-block-trace\?class=lb ", log))
        sockets = len(re.findall(r" 101 GET /explorables/transformer-block-trace/ws", log))
        assert pages_built == sockets == spread[name], f"{name}: {pages_built} pages, {sockets} websockets"

    with EventStore(balanced.db_url) as store:
        deadline = time.monotonic() + LAND_TIMEOUT  # a parameter change is written once its burst has ended
        while sum(r["kind"] == "param" for r in _rows(store)) < STUDENTS and time.monotonic() < deadline:
            time.sleep(0.2)
        rows = _rows(store)
        ids = [r["event_id"] for r in rows]
        assert len(ids) == len(set(ids)), "an event id appears twice"
        kinds = Counter((r["learner_id"], r["kind"]) for r in rows)
        assert kinds == Counter({(learner, kind): 1 for learner in expected for kind in ("prediction", "param")})
        params = [json.loads(r["payload"]) for r in rows if r["kind"] == "param"]
        assert params == [{"name": "attention_scale", "value": 0}] * STUDENTS, params
        assert store.distribution(CLASS, QUESTION) == dict(Counter(expected.values()))
        assert sum(store.distribution(CLASS, QUESTION).values()) == STUDENTS
        for learner, choice in expected.items():
            assert store.prediction(CLASS, learner, QUESTION).choice == choice

    status, dashboard, headers = _get(balanced.url(f"/teacher?class={CLASS}"), PASSWORD)
    assert status == 200, dashboard
    assert f"<strong>{STUDENTS}</strong> learners joined the class" in dashboard
    assert f"<strong>{STUDENTS}</strong> learners committed a prediction" in dashboard
    assert f"({STUDENTS} answers)" in dashboard
    assert any(v.startswith("BTSRV=") for v in headers.get_all("Set-Cookie") or []), \
        "HAProxy did not insert its affinity cookie"
    status, body, _headers = _get(balanced.url(f"/teacher?class={CLASS}"))  # no login: the login page
    assert status == 200 and "Teacher password" in body


def test_the_balancer_checks_backends_and_skips_one_that_is_down(balanced: Balanced) -> None:
    """HAProxy's checks of /health reach both apps; once one stops, HAProxy marks it down and sends everyone else.

    Runs last in this module: it stops app2.
    """
    for name, app in balanced.apps.items():
        assert re.search(r" 200 GET /health ", app.log()), f"HAProxy's health check never reached {name}"
    stop_server(balanced.apps["app2"])
    deadline = time.monotonic() + START_TIMEOUT
    while "app2 is DOWN" not in balanced.haproxy_log.read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "app2 is DOWN" in balanced.haproxy_log.read_text(), "HAProxy did not notice that app2 stopped"
    given = []
    for _ in range(6):  # new visitors (no cookie) are all sent to the backend that is up
        status, _body, headers = _get(balanced.url("/health"))
        assert status == 200
        given.append(headers.get("Set-Cookie", "").split(";", 1)[0])
    assert given == ["BTSRV=app1"] * 6
    status, _body, _headers = _get(balanced.url(f"/teacher?class={CLASS}"), PASSWORD)
    assert status == 200  # the teacher's page still works, from the other machine
