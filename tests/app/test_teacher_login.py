"""The teacher's login page (app/classroom/login_guard.py): one password field, back to the page asked for (on this
server only), a clear word for a wrong password, the limit on guesses, and logging out.

The server trusts X-Forwarded-For, so each test comes from an address of its own and one test's wrong guesses do
not limit another's."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import requests

from blocktrace.app.classroom.login_guard import LOGIN_COOKIE, TEACHER_COOKIE
from blocktrace.app.settings import Settings
from tests.conftest import Server, module_server, sent_to_login

PASSWORD = "a teacher's password"
FAILURES = Settings().login_failures  # the default: this server sets no BLOCKTRACE_LOGIN_FAILURES


@pytest.fixture(scope="module")
def teacher_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from module_server(tmp_path_factory, "login", f"--teacher-password={PASSWORD}", "--use-xheaders")


def browser(address: str) -> requests.Session:
    """A browser on the classroom network at `address` (it keeps cookies)."""
    session = requests.Session()
    session.headers["X-Forwarded-For"] = address
    return session


def form_token(page: str) -> str:
    return re.search(r'name="_xsrf" value="([^"]+)"', page).group(1)


def log_in(server: Server, session: requests.Session, password: str, target: str = "/teacher") -> requests.Response:
    """Open the login page as the teacher's room sends a browser there, and send the form (redirects not followed)."""
    page = session.get(server.url("/teacher/login"), params={"next": target})
    return session.post(server.url("/teacher/login"), allow_redirects=False,
                        data={"_xsrf": form_token(page.text), "next": target, "password": password})


def test_a_wrong_password_is_said_next_to_the_field_and_the_right_one_leads_back(teacher_server: Server) -> None:
    """The page asked for sends the browser to the login page; a wrong password is named there (403, the field
    marked); the right one sets the login cookie and leads back to that page, which now opens."""
    session = browser("192.0.2.10")
    first = session.get(teacher_server.url("/teacher?class=period9&theme=dark"), allow_redirects=False)
    assert sent_to_login(first)
    page = session.get(teacher_server.url(first.headers["Location"]))
    assert page.status_code == 200 and 'type="password"' in page.text and page.text.count('type="password"') == 1
    assert 'name="next" value="/teacher?class=period9&amp;theme=dark"' in page.text
    wrong = log_in(teacher_server, session, "guess", "/teacher?class=period9&theme=dark")
    assert wrong.status_code == 403 and "That is not the teacher password." in wrong.text
    assert 'aria-invalid="true"' in wrong.text and LOGIN_COOKIE not in wrong.headers.get("Set-Cookie", "")
    right = log_in(teacher_server, session, PASSWORD, "/teacher?class=period9&theme=dark")
    assert right.status_code == 303 and right.headers["Location"] == "/teacher?class=period9&theme=dark"
    cookie = next(c for c in session.cookies if c.name == LOGIN_COOKIE)
    assert cookie.path == "/teacher" and cookie.has_nonstandard_attr("HttpOnly") and cookie.expires is None
    room = session.get(teacher_server.url(right.headers["Location"]), allow_redirects=False)
    assert room.status_code == 200 and "class period9" in room.text and ">Log out</button>" in room.text


@pytest.mark.parametrize("target", ["//evil.example/teacher", "https://evil.example/", "/\\evil.example/"])
def test_the_login_leads_back_only_to_a_page_of_this_server(teacher_server: Server, target: str) -> None:
    """A `next` that points away from this server is neither put in the form nor followed."""
    session = browser("192.0.2.20")
    page = session.get(teacher_server.url("/teacher/login"), params={"next": target})
    assert 'name="next" value="/teacher"' in page.text
    sent = session.post(teacher_server.url("/teacher/login"), allow_redirects=False,
                        data={"_xsrf": form_token(page.text), "next": target, "password": PASSWORD})
    assert sent.status_code == 303 and sent.headers["Location"] == "/teacher"


@pytest.mark.parametrize(("data", "status", "words"), [
    ({"password": PASSWORD}, 403, "This form had expired"),  # no form token
    ({"password": ""}, 400, "Type the teacher password."),
], ids=["no-form-token", "empty"])
def test_a_login_form_that_is_not_a_login_is_refused_with_a_word(teacher_server: Server, data, status, words) -> None:
    """A form without its token, or with nothing typed, logs nobody in and says why."""
    session = browser("192.0.2.30")
    page = session.get(teacher_server.url("/teacher/login"))
    if data["password"] == "":
        data = {**data, "_xsrf": form_token(page.text)}
    sent = session.post(teacher_server.url("/teacher/login"), data=data, allow_redirects=False)
    assert sent.status_code == status and words in sent.text and LOGIN_COOKIE not in sent.headers.get("Set-Cookie", "")


def test_logging_out_ends_the_login_and_keeps_the_browser_known(teacher_server: Server) -> None:
    """"Log out" (a form with the page's token) ends the login: the room sends the browser to the login page again.
    The browser stays known (its device cookie), so guessing on its address cannot keep it out."""
    session = browser("192.0.2.40")
    assert log_in(teacher_server, session, PASSWORD).status_code == 303
    room = session.get(teacher_server.url("/teacher"))
    forged = session.post(teacher_server.url("/teacher/logout"), allow_redirects=False)
    assert forged.status_code == 403  # a logout without the page's token (another site's form) does nothing
    out = session.post(teacher_server.url("/teacher/logout"), data={"_xsrf": form_token(room.text)},
                       allow_redirects=False)
    assert out.status_code == 303 and out.headers["Location"] == "/teacher/login?out=1"
    assert "You have logged out." in session.get(teacher_server.url(out.headers["Location"])).text
    assert sent_to_login(session.get(teacher_server.url("/teacher"), allow_redirects=False))
    assert TEACHER_COOKIE in session.cookies and LOGIN_COOKIE not in session.cookies


def test_guessing_is_limited_but_a_browser_that_logged_in_before_gets_in(teacher_server: Server) -> None:
    """After `login_failures` wrong passwords from one address the form is not checked (429, with a message),
    even for the right password; a browser that logged in here before is still let in."""
    teacher = browser("192.0.2.50")
    assert log_in(teacher_server, teacher, PASSWORD).status_code == 303
    teacher.cookies.set(LOGIN_COOKIE, None)  # the browser was closed: its login (a session cookie) is gone
    guesser = browser("192.0.2.50")  # a student on the same school network
    statuses = [log_in(teacher_server, guesser, f"guess {n}").status_code for n in range(FAILURES + 1)]
    assert statuses == [403] * FAILURES + [429]
    limited = log_in(teacher_server, guesser, PASSWORD)
    assert limited.status_code == 429 and "Too many wrong passwords" in limited.text
    assert int(limited.headers["Retry-After"]) > 0
    again = log_in(teacher_server, teacher, PASSWORD)
    assert again.status_code == 303 and teacher.get(teacher_server.url("/teacher")).status_code == 200
