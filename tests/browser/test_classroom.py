"""The classroom through real browsers: identity across reloads, final predictions, reveal, the teacher's page."""

from __future__ import annotations

import base64
import urllib.error
import urllib.parse
import urllib.request
from http.cookiejar import CookieJar

import pytest
from playwright.sync_api import Browser, expect

from tests.browser.teacher_login import logged_in_page
from tests.conftest import module_server

pytestmark = pytest.mark.browser
PASSWORD = "correct horse"
TRACE = "/explorables/transformer-block-trace"
XSS = '<img src=x onerror="window.__pwned=1">'


@pytest.fixture(scope="module")
def classroom(tmp_path_factory):
    yield from module_server(tmp_path_factory, "classroom", "--teacher-password", PASSWORD)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # the redirect itself is the answer


def _get_with_headers(url: str, data: dict | None, opener: urllib.request.OpenerDirector):
    request = urllib.request.Request(url, data=urllib.parse.urlencode(data).encode() if data else None)
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, response.read().decode(), response.headers
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(), err.headers


def _get(url: str, password: str | None = None, data: dict | None = None,
         opener: urllib.request.OpenerDirector | None = None) -> tuple[int, str]:
    """A request without cookies, or through `opener` (a browser's cookie jar)."""
    request = urllib.request.Request(url, data=urllib.parse.urlencode(data).encode() if data else None)
    opener = opener or urllib.request.build_opener()
    if password is not None:
        token = base64.b64encode(f"teacher:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def _commit(page, answer: str, note: str = "") -> None:
    page.get_by_text(answer).click()
    if note:
        page.get_by_label("Why? (optional)").fill(note)
    page.get_by_role("button", name="Commit prediction").click()
    expect(page.get_by_text("Your prediction (final)")).to_be_visible()


def test_prediction_survives_reload_and_is_final(browser: Browser, classroom) -> None:
    """A reload keeps the learner (signed cookie) and their committed answer; a second tab cannot change it."""
    context = browser.new_context()
    first = context.new_page()
    first.goto(classroom.url(TRACE + "?class=period1"))
    assert any(c["name"] == "bt_learner" and c["httpOnly"] for c in first.context.cookies())  # set with the page
    second = context.new_page()  # same learner, opened before the first commits
    second.goto(classroom.url(TRACE + "?class=period1"))
    _commit(first, "Zero updates return the input unchanged")
    _commit(second, "The input comes out unchanged either way")
    expect(second.get_by_text("You had already committed an answer earlier")).to_be_visible()
    expect(second.locator(".bt-committed")).to_contain_text("Zero updates return the input unchanged")
    first.reload()
    expect(first.locator(".bt-committed")).to_contain_text("Zero updates return the input unchanged")
    status, page = _get(classroom.url("/teacher?class=period1"), PASSWORD)
    assert status == 200 and "<strong>1</strong> learner committed a prediction" in page
    context.close()


def test_reveal_shows_the_class_only_to_those_who_committed(browser: Browser, classroom) -> None:
    """After the teacher reveals, a committed learner sees the distribution; one who has not committed does not."""
    committed = browser.new_context().new_page()
    committed.goto(classroom.url(TRACE + "?class=period2"))
    _commit(committed, "Zero updates return a zero vector")
    waiting = browser.new_context().new_page()
    waiting.goto(classroom.url(TRACE + "?class=period2"))
    expect(waiting.get_by_role("button", name="Commit prediction")).to_be_visible()
    teachers_browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))  # its _xsrf
    status, dashboard = _get(classroom.url("/teacher?class=period2"), PASSWORD, opener=teachers_browser)
    token = dashboard.split('name="_xsrf" value="', 1)[1].split('"', 1)[0]
    status, _ = _get(classroom.url("/teacher/reveal"), PASSWORD,
                     {"_xsrf": token, "class": "period2", "question": "transformer-block-trace/prediction"},
                     opener=teachers_browser)
    assert status == 200  # followed the redirect back to the dashboard
    expect(committed.get_by_text("The class answered (revealed by your teacher)")).to_be_visible(timeout=20_000)
    own = committed.locator("tr.bt-own")  # the learner's own answer, marked among the class's bars
    expect(own).to_have_count(1)
    expect(own).to_contain_text("Zero updates return a zero vector")
    expect(own).to_contain_text("(your answer)")
    waiting.reload()
    expect(waiting.get_by_role("button", name="Commit prediction")).to_be_visible()
    assert waiting.get_by_text("The class answered").count() == 0
    committed.context.close()
    waiting.context.close()


def test_names_and_explanations_are_text_on_every_page(browser: Browser, classroom) -> None:
    """HTML typed as a name is shown as text to the teacher and never runs, in the teacher's browser too."""
    page = browser.new_context().new_page()
    page.goto(classroom.url(TRACE + "?class=period3"))
    page.get_by_label("Your name (optional)").fill(XSS[:40])
    page.get_by_role("button", name="Save name").click()
    expect(page.get_by_text("Saved.")).to_be_visible()
    _commit(page, "The input comes out unchanged either way", note=XSS)
    teacher = logged_in_page(browser, classroom.url("/teacher?class=period3"), PASSWORD)
    expect(teacher.get_by_text("Replacing the residual stream is harmless")).to_be_visible()
    expect(teacher.locator("main")).to_contain_text(XSS[:40])
    assert teacher.evaluate("window.__pwned") is None
    assert teacher.locator("main img:not(.bt-qr)").count() == 0  # only the join link's QR code
    page.context.close()
    teacher.context.close()


def test_the_explanation_counts_as_you_type_and_a_long_one_is_refused_not_cut(browser: Browser, classroom) -> None:
    """The counter under the explanation follows the typing in the browser; 3,000 characters are kept in the box,
    said to be 1,000 too many, and refused with a message next to the field; a shorter one is then saved."""
    page = browser.new_context().new_page()
    page.goto(classroom.url("/lessons/transformer-block?class=period4"))
    box = page.get_by_label("Your explanation")
    box.fill("x" * 3000)
    expect(page.locator(".bt-counter")).to_have_text("3,000 / 2,000 characters: 1,000 too many")
    page.get_by_role("button", name="Submit explanation").click()
    expect(page.get_by_role("alert")).to_contain_text("3,000 characters, 1,000 more than the 2,000 kept")
    expect(box).to_have_value("x" * 3000)
    box.fill("Adding keeps the input; replacing it erases the signs and sizes it came in with.")
    expect(page.locator(".bt-counter")).to_have_text("80 / 2,000 characters")
    page.get_by_role("button", name="Submit explanation").click()
    expect(page.locator(".bt-explained")).to_have_text("Saved.")
    expect(page.get_by_role("alert")).to_have_count(0)
    page.context.close()


def test_teacher_pages_refuse_students(classroom) -> None:
    """No login: sent to the login page (never a 401 that opens the browser's password box); a script's wrong
    password: 403; a post without the page's token: 403; guessing: 429."""
    stay = urllib.request.build_opener(_NoRedirects)
    for path, data, status in (("/teacher", None, 302), ("/teacher/events.csv?class=a", None, 302),
                               ("/teacher/reveal", {"class": "x", "question": "q"}, 303)):
        answer, _body, headers = _get_with_headers(classroom.url(path), data, stay)
        assert answer == status and "WWW-Authenticate" not in headers
        assert headers["Location"].startswith("/teacher/login?next=")
    assert _get(classroom.url("/teacher/reveal"), PASSWORD, {"class": "x", "question": "q"})[0] == 403
    status, csv_text = _get(classroom.url("/teacher/events.csv"), PASSWORD)
    assert status == 200 and csv_text.startswith("event_id,")
    statuses = [_get(classroom.url("/teacher"), "wrong")[0] for _ in range(6)]
    assert statuses[:5] == [403] * 5 and statuses[5] == 429
    assert _get(classroom.url("/teacher"), PASSWORD)[0] == 429  # the address is refused for a while
