"""Nothing the teacher's pages hand out lets anyone test a password guess offline (issue 24's hole).

The teacher's remembered-browser cookie and the forms' token used to be HMACs keyed by the password, and the
token sat in every teacher page: one saved page was enough to try passwords at any speed. Now the cookie is
signed with the server's secret and the forms carry Tornado's random XSRF token.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.cookiejar import CookieJar

import pytest

from blocktrace.app.classroom.login_guard import TEACHER_COOKIE
from tests.conftest import Server, module_server

PASSWORD = "correct horse battery"
GUESSES = [PASSWORD, "wrong guess", "another guess"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from module_server(tmp_path_factory, "teacher-secrets", "--teacher-password", PASSWORD)


class Teacher:
    """A teacher's browser: the password on every request, and a cookie jar."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.jar = CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        self.auth = "Basic " + base64.b64encode(f"teacher:{PASSWORD}".encode()).decode()
        self.headers: list[str] = []  # every Set-Cookie header the server sent

    def open(self, path: str, form: dict[str, str] | None = None) -> tuple[int, str]:
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        request = urllib.request.Request(self.server.url(path), data=data, headers={"Authorization": self.auth})
        try:
            with self.opener.open(request, timeout=30) as response:
                self.headers += response.headers.get_all("Set-Cookie") or []
                return response.status, response.read().decode("utf-8")
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode("utf-8")

    def cookie(self, name: str) -> str:
        return next(c.value for c in self.jar if c.name == name)


def served_material(server: Server) -> tuple[Teacher, str]:
    """Everything a teacher's browser is handed: each teacher page's HTML and every cookie set on the way."""
    teacher = Teacher(server)
    pages = [teacher.open("/teacher?class=room1")[1], teacher.open("/teacher/present?class=room1")[1]]
    token = re.search(r'name="_xsrf" value="([^"]+)"', pages[0]).group(1)
    status, confirmation = teacher.open("/teacher/archive", {"_xsrf": token, "class": "room1"})
    assert status == 200 and "Archive and reset" in confirmation
    return teacher, "\n".join(pages + [confirmation] + teacher.headers)


def words(material: str) -> set[str]:
    """Every run of token characters in the material, and what each decodes to where it is base64."""
    found = set(re.findall(r"[A-Za-z0-9+/=_-]{8,}", material))
    for word in list(found):
        try:
            found.add(base64.b64decode(word + "=" * (-len(word) % 4), validate=False).decode("ascii"))
        except (ValueError, UnicodeDecodeError):
            pass
    return found


def derived_from(guess: str, material: str) -> set[str]:
    """What an offline guesser would compute from a guess: keyed hashes of the guess over every string the
    pages show (and over the constants the code used to sign with), and plain hashes of it."""
    key = guess.encode()
    found = words(material)
    messages = {m.encode() for m in found} | {b"blocktrace-teacher-form"}
    messages |= {b"blocktrace-teacher-device:" + m.encode() for m in found if m.isdigit()}  # the old cookie's
    out = {hashlib.sha256(key).hexdigest(), hashlib.sha256(key).digest().hex()}
    for message in messages:
        for digest in (hmac.new(key, message, "sha256").hexdigest(), hmac.new(message, key, "sha256").hexdigest()):
            out |= {digest, digest[:32]}
    return out


def test_no_page_or_cookie_lets_a_password_be_confirmed_offline(server) -> None:
    """No keyed or plain hash of the true password over anything served appears in what the teacher is served,
    the password does not appear in it, and the remembered-browser cookie is one the server signed."""
    teacher, material = served_material(server)
    assert PASSWORD not in material
    served = words(material)
    for guess in GUESSES:
        assert not derived_from(guess, material) & served, f"a value served is derived from {guess!r} alone"
    device = teacher.cookie(TEACHER_COOKIE).strip('"')  # quoted by Tornado, for its "=" signs
    assert device.startswith("2|") and "bt_teacher" in device, "Tornado's signed value, named for its purpose"


def test_the_forms_token_is_tornados_xsrf_check(server) -> None:
    """A teacher's form is taken only with the XSRF token that matches its browser's cookie: another browser's
    token, or none, is refused with 403 and a message."""
    teacher, _ = served_material(server)
    other, _ = served_material(server)
    token = re.search(r'name="_xsrf" value="([^"]+)"', teacher.open("/teacher?class=room1")[1]).group(1)
    assert teacher.open("/teacher/archive", {"_xsrf": token, "class": "room1"})[0] == 200
    status, body = other.open("/teacher/archive", {"_xsrf": "2|00000000|" + "0" * 32 + "|1", "class": "room1"})
    assert status == 403 and "did not come from the teacher's page" in body
    status, _ = Teacher(server).open("/teacher/archive", {"_xsrf": token, "class": "room1"})  # no cookie of its own
    assert status == 403
