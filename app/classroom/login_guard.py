"""The teacher password, the login page of the teacher's room, and the limit on wrong guesses of the password.

The teacher logs in at /teacher/login: one password field (an autoescaping template, Tornado's XSRF form token);
the right password sets a cookie signed by Tornado's `set_signed_cookie` (LOGIN_COOKIE, for the teacher's pages
only) and leads back to the page asked for. A browser without it asking for a teacher's page is sent to the login
page, never asked by the browser's own password box. Scripts may instead send the password in an HTTP Basic
`Authorization` header (any user name) on every request. The password is the one given to `blocktrace serve`, or
one it made and keeps in the data folder (PASSWORD_FILE, mode 0600) until `--new-password`.

What the limit is for: to slow anyone guessing the password, without handing them a way to keep the real
teacher out. Three rules do that:

- **Per address**: after `login_failures` wrong passwords in `login_window` seconds (app/settings.py),
  further logins from that address are not even checked (429) until the oldest failure is a window old. An
  IPv6 address counts by its /64, since one machine is usually given a whole /64 (rate_limits.client_key, as
  for every limit).
- **In total**: after `login_failures_total` wrong passwords in a window from all addresses together, new logins
  are refused everywhere. This bounds guessing from many addresses (a botnet, or a server trusting forwarded
  headers it should not: see deploy/README.md), and it bounds the failure table too: a refused login is not
  recorded, so at most `login_failures_total` addresses enter it per window; `login_clients` caps it regardless,
  evicting the addresses that failed longest ago.
- **The teacher's browser is not locked out by others**: a correct password also sets an HttpOnly cookie
  (TEACHER_COOKIE, kept when the teacher logs out), signed with the server's secret for 30 days (app/signing.py,
  TEACHER_DEVICE) around a tag of the current password that is itself keyed by the secret. A request carrying a
  valid one is always checked, whatever the limits say, and its failures are not counted. Only someone who knew
  the current password can hold that cookie, so exempting it gives a guesser nothing (OWASP's "device cookie"
  defence); and since the password enters it only under the server's secret, a copied cookie lets nobody test
  password guesses offline. A new password makes every remembered browser log in again.

Why not simply accept a correct password while an address is limited: the limit would then slow nothing,
since a 429 for a wrong guess and a 200 for the right one tell the guesser as much as 403 and 200 do. Why not
delay instead of refusing: concurrent requests make per-request delays cheap for the guesser, and the
teacher would wait behind them. What stays: a browser that has never logged in (or whose cookie expired) is
refused while someone on its address (a school's NAT) or on thirty addresses at once keeps guessing, until
the guessing stops for a minute; the teacher should log in once before the lesson. Each process keeps
its own counts (`--num-procs`, several machines).
"""

from __future__ import annotations

import base64
import hmac
import logging
import os
import secrets
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from tornado.web import HTTPError, RequestHandler

from blocktrace.app import signing
from blocktrace.app.classroom.rendering import render
from blocktrace.app.server.hardening import write_private_file
from blocktrace.app.server.rate_limits import client_key
from blocktrace.app.settings import settings

__all__ = ["DEVICE_LIFETIME", "Guard", "LOGIN_COOKIE", "LOGIN_PATH", "PASSWORD_FILE", "TEACHER_COOKIE", "Verdict",
           "admit_teacher", "basic_password", "generate_password", "load_or_create_password", "local_target",
           "login_patterns"]

TEACHER_COOKIE = signing.TEACHER_DEVICE.name
DEVICE_LIFETIME = signing.TEACHER_DEVICE.max_age_days * 86400  # seconds a browser stays recognised after a login
LOGIN_COOKIE = signing.TEACHER_LOGIN.name  # the teacher's login (Tornado's signed cookie)
LOGIN_PATH = "/teacher/login"
PASSWORD_FILE = "teacher-password"  # in the data folder, beside the cookie secret
HOME = "/teacher"

log = logging.getLogger(__name__)


def generate_password() -> str:
    return secrets.token_urlsafe(9)


def load_or_create_password(data_dir: Path, *, new: bool = False) -> str:
    """The teacher password kept in `data_dir` (PASSWORD_FILE, mode 0600): made on first use, or afresh if `new`.

    Made as the cookie secret is (whole or not at all), so several processes starting at once on one folder
    all read the one that was written first."""
    path = Path(data_dir) / PASSWORD_FILE
    if new or not path.exists():
        write_private_file(path, generate_password() + "\n", replace=new)
    if path.stat().st_mode & 0o077:
        os.chmod(path, 0o600)  # a copied or restored file may have come with looser permissions
    password = path.read_text(encoding="utf-8").strip()
    if not password:
        raise ValueError(f"{path} holds no password; start with --new-password to make one")
    return password


def basic_password(authorization: str | None) -> str | None:
    """The password of an HTTP Basic `Authorization` header (whatever its user name), or None without one."""
    if not authorization or not authorization.startswith("Basic "):
        return None
    try:
        return base64.b64decode(authorization[6:], validate=True).split(b":", 1)[-1].decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return ""  # a header that is no password: a wrong one


def local_target(target: str | None) -> str:
    """`target` if it is a path on this server (what the login page may lead back to), else the teacher's room.

    Refused: anything with a scheme or host (`https://…`, `//host/…`), a backslash (browsers read `/\\host` as
    `//host`), control characters, or a path that does not start with a single `/`."""
    if not target or len(target) > 2000 or not target.startswith("/") or target.startswith("//") \
            or "\\" in target or any(ord(c) < 32 or ord(c) == 127 for c in target):
        return HOME
    parts = urlsplit(target)
    return target if not parts.scheme and not parts.netloc else HOME


class Verdict(Enum):
    ADMITTED = "admitted"  # the right password
    DENIED = "denied"  # no password or a wrong one
    LIMITED = "limited"  # not checked: too many wrong passwords (429)


@dataclass(frozen=True)
class Admission:
    verdict: Verdict
    retry_after: float = 0.0  # seconds until a limited login may be checked again
    everywhere: bool = False  # limited by the total of all addresses, not this address's own


class Guard:
    """The teacher password, its wrong-guess limits and the teacher's device cookie (one per process).

    `secret` is the server's (the one every signed value uses); it keys the device cookie, never the password."""

    def __init__(self, password: str, secret: bytes, *, max_failures: int | None = None,
                 max_global: int | None = None, window: float | None = None, max_tracked: int | None = None,
                 clock: Callable[[], float] = time.monotonic, wall_clock: Callable[[], float] = time.time):
        self.password = password.encode("utf-8")
        self._secret = secret
        # What the device cookie holds: the password as only this server's secret can tell it (a new password
        # makes every remembered browser log in again; a copied cookie tells nobody anything of the password).
        self._password_tag = signing.derived_key(secret, f"teacher password\x00{password}").decode("ascii")
        limits = settings()  # whatever is not given
        self.max_failures = limits.login_failures if max_failures is None else max_failures
        self.max_global = limits.login_failures_total if max_global is None else max_global
        self.window = limits.login_window if window is None else window
        self.max_tracked = limits.login_clients if max_tracked is None else max_tracked
        self._clock, self._wall_clock = clock, wall_clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()  # least recently failed first
        self._all_failures: deque[float] = deque(maxlen=self.max_global)
        self._lock = threading.Lock()

    def admit(self, address: str, given: str | None, device: str | None = None) -> Admission:
        """Check the password `given` (None: none was) by a request from `address` carrying cookie `device`."""
        if self.recognises(device):
            return Admission(Verdict.ADMITTED if self._matches(given) else Verdict.DENIED)
        key = client_key(address)
        with self._lock:  # the limit check and the failure it may record are one step
            now = self._clock()
            self._forget_before(now - self.window)
            own = self._failures.get(key, deque())
            while own and own[0] <= now - self.window:
                own.popleft()
            if len(own) >= self.max_failures:
                return Admission(Verdict.LIMITED, own[0] + self.window - now)
            if len(self._all_failures) >= self.max_global:
                return Admission(Verdict.LIMITED, self._all_failures[0] + self.window - now, everywhere=True)
            if self._matches(given):
                return Admission(Verdict.ADMITTED)
            if given:  # no password at all (an empty form) is not a guess
                self._record(key, now)
        return Admission(Verdict.DENIED)

    def tracked(self) -> int:
        """How many addresses the failure table holds now."""
        with self._lock:
            self._forget_before(self._clock() - self.window)
            return len(self._failures)

    def device_cookie(self) -> str:
        """A value for TEACHER_COOKIE: the password's tag, signed now with the server's secret."""
        return signing.sign(self._secret, signing.TEACHER_DEVICE, self._password_tag, clock=self._wall_clock)

    def recognises(self, device: str | None) -> bool:
        """Whether `device` is a cookie this server signed for the current password within DEVICE_LIFETIME."""
        tag = signing.unsign(self._secret, signing.TEACHER_DEVICE, device, clock=self._wall_clock)
        return tag is not None and hmac.compare_digest(tag, self._password_tag)

    def login_value(self) -> str:
        """What the login cookie holds: the password's tag (a new password logs every browser out)."""
        return self._password_tag

    def logged_in(self, value: bytes | None) -> bool:
        """Whether `value`, a login cookie's content as Tornado checked its signature and age, is of this password."""
        return value is not None and hmac.compare_digest(value, self._password_tag.encode("ascii"))

    def _matches(self, given: str | None) -> bool:
        return hmac.compare_digest((given or "").encode("utf-8"), self.password)

    def _record(self, key: str, now: float) -> None:
        times = self._failures.pop(key, None)
        if times is None:
            times = deque(maxlen=self.max_failures)
            while len(self._failures) >= self.max_tracked:
                self._failures.popitem(last=False)  # the address that failed longest ago
        times.append(now)
        self._failures[key] = times  # now the most recent
        self._all_failures.append(now)
        if len(times) == self.max_failures:
            log.warning("teacher login: %s refused for %.0f s after %d wrong passwords", key, self.window,
                        self.max_failures)
        if len(self._all_failures) == self.max_global:
            log.warning("teacher login: new logins refused from every address for up to %.0f s after %d wrong "
                        "passwords in total", self.window, self.max_global)

    def _forget_before(self, cutoff: float) -> None:
        while self._all_failures and self._all_failures[0] <= cutoff:
            self._all_failures.popleft()
        while self._failures:  # ordered by last failure: stop at the first address still within the window
            key, times = next(iter(self._failures.items()))
            if times[-1] > cutoff:
                break
            del self._failures[key]


def _refuse_limited(handler: RequestHandler, admission: Admission) -> str:
    """Status 429 and Retry-After for a login that was not checked; the message to show."""
    handler.set_status(429)
    handler.set_header("Retry-After", str(max(1, round(admission.retry_after))))
    where = "from every address" if admission.everywhere else "from this address"
    return (f"Too many wrong passwords {where}; wait a minute and try again. A browser that has logged in as "
            "the teacher before is let in even now.")


def _remember_device(handler: RequestHandler, guard: Guard) -> None:
    if not guard.recognises(handler.get_cookie(TEACHER_COOKIE)):
        handler.set_cookie(TEACHER_COOKIE, guard.device_cookie(), path=HOME, expires_days=DEVICE_LIFETIME / 86400,
                           httponly=True, samesite="Lax", secure=handler.request.protocol == "https")


def login_url(target: str) -> str:
    return f"{LOGIN_PATH}?{urlencode({'next': local_target(target)})}"


def admit_teacher(handler: RequestHandler, guard: Guard) -> bool:
    """Let a request to a teacher's page through (True), or answer it (False).

    A browser logged in (LOGIN_COOKIE) goes through. A request with an `Authorization` header (a script) is checked
    like a login: 429 when limited, 403 for a wrong password (never 401: that would open the browser's own password
    box). Any other is sent to the login page, which leads back here (a form's POST: back to the teacher's room)."""
    if guard.logged_in(handler.get_signed_cookie(LOGIN_COOKIE, max_age_days=signing.TEACHER_LOGIN.max_age_days)):
        return True
    given = basic_password(handler.request.headers.get("Authorization"))
    if given is None:
        target = handler.request.uri if handler.request.method in ("GET", "HEAD") else HOME
        handler.redirect(login_url(target), status=302 if handler.request.method in ("GET", "HEAD") else 303)
        return False
    admission = guard.admit(handler.request.remote_ip or "?", given, handler.get_cookie(TEACHER_COOKIE))
    if admission.verdict is Verdict.LIMITED:
        handler.finish(_refuse_limited(handler, admission) + "\n")
        return False
    if admission.verdict is Verdict.DENIED:
        handler.set_status(403)
        handler.finish("That is not the teacher password.\n")
        return False
    _remember_device(handler, guard)
    return True


class _LoginPages(RequestHandler):
    def initialize(self, guard: Guard) -> None:
        self.guard = guard

    def prepare(self) -> None:
        self.set_header("Cache-Control", "no-store")
        self.set_header("X-Frame-Options", "DENY")
        self.set_header("Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:")

    def page(self, target: str, message: str = "", note: str = "") -> None:
        theme = "dark" if self.get_argument("theme", "") == "dark" else "light"
        other = {"next": target, **({} if theme == "dark" else {"theme": "dark"})}
        self.finish(render("login.html", title="Teacher login", tagline="teacher's room · log in", theme=theme,
                           refresh=False, refresh_seconds=0, other_theme=f"{LOGIN_PATH}?{urlencode(other)}", logout="",
                           target=target, message=message, note=note, xsrf=self.xsrf_form_html()))


class LoginHandler(_LoginPages):
    """GET /teacher/login?next=PATH: the password form; POST: check it, and lead back to PATH (on this server)."""

    def get(self) -> None:
        target = local_target(self.get_argument("next", HOME))
        if self.guard.logged_in(self.get_signed_cookie(LOGIN_COOKIE,
                                                       max_age_days=signing.TEACHER_LOGIN.max_age_days)):
            self.redirect(target)
            return
        self.page(target, note="You have logged out." if self.get_argument("out", "") else "")

    def post(self) -> None:
        target = local_target(self.get_body_argument("next", HOME))
        try:
            self.check_xsrf_cookie()
        except HTTPError:
            self.set_status(403)
            self.page(target, "This form had expired. Type the password again.")
            return
        given = self.get_body_argument("password", "")
        if not given:
            self.set_status(400)
            self.page(target, "Type the teacher password.")
            return
        admission = self.guard.admit(self.request.remote_ip or "?", given, self.get_cookie(TEACHER_COOKIE))
        if admission.verdict is Verdict.LIMITED:
            self.page(target, _refuse_limited(self, admission))
            return
        if admission.verdict is Verdict.DENIED:
            self.set_status(403)
            self.page(target, "That is not the teacher password. Check it for typing mistakes and try again.")
            return
        self.set_signed_cookie(LOGIN_COOKIE, self.guard.login_value(), expires_days=None, path=HOME, httponly=True,
                               samesite="Lax", secure=self.request.protocol == "https")
        _remember_device(self, self.guard)
        self.redirect(target, status=303)


class LogoutHandler(_LoginPages):
    """POST /teacher/logout (from the teacher's pages, with their form token): forget this browser's login."""

    def post(self) -> None:
        try:
            self.check_xsrf_cookie()
        except HTTPError:
            self.set_status(403)
            self.finish("This form did not come from the teacher's page.\n")
            return
        from blocktrace.app.lti.teacher_room import COOKIE as LMS_COOKIE  # a course's teacher let in by their LMS

        self.clear_cookie(LOGIN_COOKIE, path=HOME)
        self.clear_cookie(LMS_COOKIE, path=HOME)
        self.redirect(f"{LOGIN_PATH}?out=1", status=303)  # the device cookie stays: see the module's doc


def login_patterns(guard: Guard) -> list[tuple]:
    return [(LOGIN_PATH, LoginHandler, {"guard": guard}), (r"/teacher/logout", LogoutHandler, {"guard": guard})]
