"""An LTI launch in real Chromium, inside a test LMS's course page on another site that frames the tool, with
the tool's frame keeping no cookies: the platform's storage carries the launch's proof, and the page opened
records the LMS's learner in the LMS's course."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlencode

import pytest
from playwright.sync_api import Browser, expect, sync_playwright

from blocktrace.app.classroom.store import EventStore, default_url
from blocktrace.app.lti import who
from blocktrace.app.server.session_setup import question_id
from tests.conftest import Server, module_server
from tests.lti_platform import TestPlatform, registered_platform
from tests.smoke import CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.browser

PAGE = "/explorables/transformer-block-trace"
# Chromium's own switch for browsers that block third-party cookies (as Safari and Firefox do by default)
BLOCKING = [*CHROMIUM_ARGS, "--test-third-party-cookie-phaseout"]


@pytest.fixture(scope="module")
def lti_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from module_server(tmp_path_factory, "lti-browser")


@pytest.fixture(scope="module")
def lms(lti_server: Server) -> Iterator[TestPlatform]:
    # the tool at localhost: another site than the LMS's 127.0.0.1
    with registered_platform(lti_server.data_dir, f"http://localhost:{lti_server.port}") as platform:
        yield platform


@pytest.fixture(scope="module")
def blocking_browser() -> Iterator[Browser]:
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=BLOCKING, headless=True)
        yield chromium
        chromium.close()


def test_a_framed_launch_without_cookies_opens_the_page_for_the_lms_learner(
        lti_server: Server, lms: TestPlatform, blocking_browser: Browser) -> None:
    target = f"{lms.tool_url}{PAGE}"
    lms.next_launch = {"target": target, "sub": "student-7"}
    context = blocking_browser.new_context(viewport={"width": 1300, "height": 1000})
    page = context.new_page()
    outside: list[str] = []
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(
        (lms.url, lms.tool_url, "data:", "blob:")) else None)
    # The tool's frame goes between the two sites (our login, the LMS's authorisation, our launch and the
    # storage page), so Chromium moves it between renderer processes. A query into it while it moved hung past
    # its own timeout about once in ten runs here: so wait, on this side, for the frame to reach the page.
    with page.expect_event("framenavigated", predicate=lambda frame: frame.url.startswith(lms.tool_url + PAGE),
                           timeout=60_000) as reached:
        page.goto(f"{lms.url}/course?{urlencode({'target': target, 'storage': '1'})}")
    frame = reached.value
    assert "lti=" in frame.url
    tool = page.frame_locator("iframe[title=blocktrace]")
    expect(tool.get_by_role("heading", name="Predict first")).to_be_visible(timeout=60_000)
    # The tool's frame really keeps no cookie: what it sets is gone at once.
    assert frame.evaluate("() => { document.cookie = 'probe=1; path=/'; return document.cookie; }") == ""
    choice = tool.get_by_role("radio").first
    choice.check()
    tool.get_by_role("button", name="Commit prediction").click()
    expect(tool.get_by_text("Your prediction (final):")).to_be_visible(timeout=60_000)
    secret = lti_server.secret()
    learner = who.learner_for(secret, lms.issuer, "student-7")
    course = who.class_for(secret, lms.issuer, lms.deployment_id, "course-101")
    with EventStore(default_url(lti_server.data_dir)) as store:
        assert store.prediction(course, learner, question_id("transformer-block-trace")) is not None
    assert outside == []
    context.close()
