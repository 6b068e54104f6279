"""The teacher password and the limit on wrong guesses of it (shared by the teacher's handlers of one process).

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
- **The teacher's browser is not locked out by others**: a correct password sets an HttpOnly cookie
  (TEACHER_COOKIE), signed with the server's secret for 30 days (app/signing.py, TEACHER_DEVICE) around a tag
  of the current password that is itself keyed by the secret. A request carrying a valid one is always
  checked, whatever the limits say, and its failures are not counted. Only someone who knew the current
  password can hold that cookie, so exempting it gives a guesser nothing (OWASP's "device cookie" defence);
  and since the password enters it only under the server's secret, a copied cookie lets nobody test
  password guesses offline. A new password makes every remembered browser log in again.

Why not simply accept a correct password while an address is limited: the limit would then slow nothing,
since a 429 for a wrong guess and a 200 for the right one tell the guesser as much as 401 and 200 do. Why not
delay instead of refusing: concurrent requests make per-request delays cheap for the guesser, and the
teacher would wait behind them. What stays: a browser that has never logged in (or whose cookie expired) is
refused while someone on its address (a school's NAT) or on thirty addresses at once keeps guessing, until
the guessing stops for a minute; the teacher should open /teacher once before the lesson. Each process keeps
its own counts (`--num-procs`, several machines).
"""

from __future__ import annotations

import base64
import hmac
import logging
import secrets
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from tornado.web import RequestHandler

from blocktrace.app import signing
from blocktrace.app.server.rate_limits import client_key
from blocktrace.app.settings import settings

__all__ = ["DEVICE_LIFETIME", "Guard", "TEACHER_COOKIE", "Verdict", "admit_teacher", "generate_password"]

TEACHER_COOKIE = signing.TEACHER_DEVICE.name
DEVICE_LIFETIME = signing.TEACHER_DEVICE.max_age_days * 86400  # seconds a browser stays recognised after a login

log = logging.getLogger(__name__)


def generate_password() -> str:
    return secrets.token_urlsafe(9)


class Verdict(Enum):
    ADMITTED = "admitted"  # the right password
    DENIED = "denied"  # no password or a wrong one: 401
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

    def admit(self, address: str, authorization: str | None, device: str | None = None) -> Admission:
        """Check the Basic `authorization` header of a request from `address` carrying cookie `device`."""
        if self.recognises(device):
            return Admission(Verdict.ADMITTED if self._matches(authorization) else Verdict.DENIED)
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
            if self._matches(authorization):
                return Admission(Verdict.ADMITTED)
            if authorization:  # a browser's first request carries no password: that is not a guess
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

    def _matches(self, authorization: str | None) -> bool:
        given = b""
        if authorization and authorization.startswith("Basic "):
            try:
                given = base64.b64decode(authorization[6:], validate=True).split(b":", 1)[-1]
            except ValueError:
                given = b""
        return hmac.compare_digest(given, self.password)

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


def admit_teacher(handler: RequestHandler, guard: Guard) -> bool:
    """Let a request to a teacher's page through (True), or answer it with 429 or 401 (False)."""
    device = handler.get_cookie(TEACHER_COOKIE)
    admission = guard.admit(handler.request.remote_ip or "?", handler.request.headers.get("Authorization"), device)
    if admission.verdict is Verdict.LIMITED:
        handler.set_status(429)
        handler.set_header("Retry-After", str(max(1, round(admission.retry_after))))
        where = "from every address" if admission.everywhere else "from this address"
        handler.finish(f"Too many wrong passwords {where}; wait a minute. A browser that has logged in as the "
                       "teacher before is let in even now.\n")
        return False
    if admission.verdict is Verdict.DENIED:
        handler.set_status(401)
        handler.set_header("WWW-Authenticate", 'Basic realm="blocktrace teacher", charset="UTF-8"')
        handler.finish("The teacher's pages need the teacher password.\n")
        return False
    if not guard.recognises(device):
        handler.set_cookie(TEACHER_COOKIE, guard.device_cookie(), path="/teacher", expires_days=DEVICE_LIFETIME / 86400,
                           httponly=True, samesite="Lax", secure=handler.request.protocol == "https")
    return True
