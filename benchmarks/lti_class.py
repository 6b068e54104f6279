"""Issue 26's figures: launches from an LMS, 100 learners' scores to its gradebook, and a class's learning
records to an LRS.

usage: python benchmarks/lti_class.py [--launches 20] [--browser-launches 5] [--learners 100] [--students 30]
                                      [--duration 30]

1. Launch: a fresh `blocktrace serve` and the tests' LMS (tests/lti_platform.py: real RS256 keys, its JWKS over
   HTTP). Over HTTP, --launches launches from login initiation to the launched page's HTML (login, PyLTI1p3's
   cookie check answered, authorisation, id_token posted, page); in Chromium, --browser-launches launches from
   opening the LMS's course page (which frames the tool, third-party cookies blocked, through the platform's
   storage) to the page's prediction gate on screen. Medians.
2. Scores: --learners learners, each with work in one lesson, queued and posted to the LMS's gradebook in one
   round (token, line item, one score each): the round's time, and the scores a second.
3. Learning records: a server sending to Ralph's LRS (tests/ralph.py); --students students on real Bokeh
   websocket sessions (benchmarks/classroom.py's Student) join, commit and move a slider for --duration seconds.
   The outbox's backlog (statements kept, not yet sent) sampled every second, the statements the LRS took a
   second over the window, and how long the backlog took to drain after the class stopped.
It prints figures; it never asserts them.

Measured 2026-12-04 on this project's 2-core test machine: launch over HTTP median 281 ms (max 403 ms, 20
launches); in Chromium, framed, without cookies, median 1,552 ms to the gate on screen (max 1,701 ms, 5 launches);
100 learners' scores posted in 0.32-0.44 s (one token, one line item, 228-310 scores a second; two runs); 30
students for 30 s: 392 statements in Ralph's LRS, 8.5 a second, the outbox's backlog median 0 and at most 31,
empty as soon as the class stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from classroom import ROUTE, Student, table_texts  # noqa: E402

from blocktrace.app.classroom.store import EventStore, default_url  # noqa: E402
from blocktrace.app.lti import grades, platforms, tool_keys, who  # noqa: E402
from blocktrace.app.xapi import delivery  # noqa: E402
from tests.conftest import start_server, stop_server  # noqa: E402
from tests.lti_platform import TestPlatform, serving_json  # noqa: E402
from tests.ralph import PASSWORD, USER, start_ralph  # noqa: E402

PAGE = "/explorables/transformer-block-trace"


def launches(n: int, browser_n: int, folder: Path) -> None:
    (folder / "launch").mkdir(parents=True)
    server = start_server(folder / "launch" / "server.log")
    try:
        with TestPlatform() as lms:
            lms.tool_url = f"http://localhost:{server.port}"
            subprocess.run([sys.executable, "-m", "blocktrace.app.cli", "lti", "--data-dir", str(server.data_dir),
                            "add-platform", *lms.registration_args()], check=True, capture_output=True)
            times = []
            for i in range(n + 1):
                started = time.perf_counter()
                session = requests.Session()
                params = lms.login_params(server.url(PAGE))
                session.get(server.url("/lti/login"), params=params)  # PyLTI1p3's cookie check page
                answer = session.get(server.url("/lti/login"), params={**params, "lti1p3_new_window": "1"},
                                     allow_redirects=False)
                auth = dict(parse_qsl(urlsplit(answer.headers["Location"]).query))
                token = lms.sign(lms.claims(auth["nonce"], server.url(PAGE), sub=f"student-{i}"))
                opened = session.post(server.url("/lti/launch"), data={"id_token": token, "state": auth["state"]},
                                      allow_redirects=False)
                page = session.get(server.url(opened.headers["Location"]))
                assert page.status_code == 200
                if i:  # the first warms the server
                    times.append(1000 * (time.perf_counter() - started))
            print(f"launch over HTTP, login initiation to the page's HTML: median {statistics.median(times):.0f} ms, "
                  f"max {max(times):.0f} ms ({n} launches)")
            if browser_n:
                browser_launches(server, lms, browser_n)
    finally:
        stop_server(server)


def browser_launches(server, lms: TestPlatform, n: int) -> None:
    from playwright.sync_api import expect, sync_playwright

    from tests.smoke import CHROMIUM, CHROMIUM_ARGS

    times = []
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                      args=[*CHROMIUM_ARGS, "--test-third-party-cookie-phaseout"])
        for i in range(n + 1):
            context = chromium.new_context(viewport={"width": 1300, "height": 1000})
            page = context.new_page()
            target = f"{lms.tool_url}{PAGE}"
            lms.next_launch = {"target": target, "sub": f"browser-{i}"}
            started = time.perf_counter()
            page.goto(f"{lms.url}/course?{urlencode({'target': target, 'storage': '1'})}")
            expect(page.frame_locator("iframe[title=blocktrace]").get_by_role(
                "heading", name="Predict first")).to_be_visible(timeout=60_000)
            if i:
                times.append(1000 * (time.perf_counter() - started))
            context.close()
        chromium.close()
    print(f"launch in Chromium, the LMS's course page opened to the framed page's gate on screen (no cookies, "
          f"platform storage): median {statistics.median(times):.0f} ms, max {max(times):.0f} ms ({n} launches)")


def scores(n: int, folder: Path) -> None:
    data_dir = folder / "scores"
    with TestPlatform() as lms:
        keys = tool_keys.load_or_create(data_dir)
        platforms.add(data_dir, platforms.Platform(lms.issuer, lms.client_id, (lms.deployment_id,),
                                                   lms.url + "/auth", lms.url + "/token", lms.url + "/jwks.json"))
        with serving_json(keys.jwks) as tool:
            lms.tool_url = tool
            score_a_class(lms, data_dir, n)


def score_a_class(lms: TestPlatform, data_dir: Path, n: int) -> None:
    store = EventStore(f"sqlite:///{data_dir}/classroom.db")
    secret = b"k" * 32
    course = who.class_for(secret, lms.issuer, lms.deployment_id, "course-101")
    scopes = ["https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
              "https://purl.imsglobal.org/spec/lti-ags/scope/score"]
    for i in range(n):
        learner = who.learner_for(secret, lms.issuer, f"student-{i}")
        store.lti_link(course, learner, {"issuer": lms.issuer, "client_id": lms.client_id, "user_id": f"student-{i}",
                                         "lineitems": lms.url + "/lineitems", "scope": scopes})
        store.record(str(uuid.uuid4()), course, learner, "checkpoint",
                     {"checkpoint": "zero-updates", "answer": "a", "correct": True}, "transformer-block", None)
    started = time.perf_counter()
    queued = grades.queue_scores(store)
    sent, failed = grades.send_scores(store, data_dir)
    took = time.perf_counter() - started
    store.close()
    print(f"scores: {n} learners' scores queued and posted in {took:.2f} s ({sent / took:.0f} a second; "
          f"{queued} queued, {sent} sent, {failed} put back; {lms.token_requests} token request(s), "
          f"{len(lms.line_items)} line item(s) made)")

async def a_class(port: int, students_n: int, duration: float, store: EventStore) -> tuple[list[int], float]:
    url = f"http://127.0.0.1:{port}{ROUTE}"
    tables = table_texts()
    students = [Student(n, url, tables, choice_index=1 + n % 4) for n in range(students_n)]
    for student in students:
        await student.join("xapi-bench")
    for student in students:
        await student.commit()
    backlog: list[int] = []
    until = time.perf_counter() + duration
    rng = random.Random(1)

    async def sample() -> None:
        while time.perf_counter() < until:
            backlog.append(store.delivery_counts(delivery.KIND)[0])
            await asyncio.sleep(1.0)

    await asyncio.gather(sample(), *(s.explore(until, rng) for s in students))
    return backlog, time.perf_counter()


def records(students_n: int, duration: float, folder: Path) -> None:
    ralph = start_ralph(folder / "ralph")
    os.environ.update(BLOCKTRACE_XAPI_USERNAME=USER, BLOCKTRACE_XAPI_PASSWORD=PASSWORD)
    (folder / "records").mkdir(parents=True)
    server = start_server(folder / "records" / "server.log", "--xapi-endpoint", ralph.endpoint)
    store = EventStore(default_url(server.data_dir))
    try:
        sent_before = delivered(store)
        started = time.perf_counter()
        backlog, ended = asyncio.run(a_class(server.port, students_n, duration, store))
        sent_in_window = delivered(store) - sent_before
        drain_started = time.perf_counter()
        while store.delivery_counts(delivery.KIND)[0] and time.perf_counter() - drain_started < 120:
            time.sleep(0.5)
        drained = time.perf_counter() - drain_started
        total = delivered(store) - sent_before
        print(f"learning records: {students_n} students for {duration:.0f} s: {total} statements in the LRS, "
              f"{sent_in_window / (ended - started):.1f} a second over the class; outbox backlog each second: "
              f"median {statistics.median(backlog):.0f}, max {max(backlog)}; drained {drained:.1f} s after the "
              "class stopped")
    finally:
        store.close()
        stop_server(server)
        ralph.stop()


def delivered(store: EventStore) -> int:
    from sqlalchemy import func, select

    from blocktrace.app.classroom.schema import deliveries

    with store.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(deliveries).where(
            deliveries.c.kind == delivery.KIND, deliveries.c.delivered_at.is_not(None))).scalar_one()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=20)
    parser.add_argument("--browser-launches", type=int, default=5)
    parser.add_argument("--learners", type=int, default=100)
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--duration", type=float, default=30.0)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="lti-bench-"))
    launches(args.launches, args.browser_launches, folder)
    scores(args.learners, folder)
    records(args.students, args.duration, folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
