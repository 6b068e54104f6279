"""Every value this server signs, in one place: Tornado's signed values, each under a purpose of its own.

A signed value is Tornado's (`tornado.web.create_signed_value`, version 2: HMAC-SHA256 with the server's
secret over the value, the time it was signed and the purpose's name). The name is signed with the value,
so a learner cookie is no exercise ticket and no predict-off link, even when the text inside is the same;
the time makes every purpose's age limit something the server checks, not something the value says.

Only the server's secret keys a signature (the data dir's key file, or BLOCKTRACE_SECRET): no user's
password does, so nothing a server hands out lets anyone test a password guess offline.

    value = sign(secret, LEARNER, learner_id)
    unsign(secret, LEARNER, value)  # the learner id, or None if forged, for another purpose or too old

`derived_key` gives a library that signs on its own (Bokeh's session ids and tokens) a key of its own.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass

from tornado.web import create_signed_value, decode_signed_value

__all__ = ["EXERCISE_TICKET", "LEARNER", "LTI_SESSION", "LTI_TEACHER", "PREDICT_OFF", "TEACHER_DEVICE", "TEACHER_LOGIN",
           "Purpose", "cookie_secret", "derived_key", "sign", "unsign"]

MIN_SECRET_BYTES = 16


@dataclass(frozen=True)
class Purpose:
    """What a signed value is for: its name (signed with it) and how long the server accepts it."""

    name: str
    max_age_days: float


LEARNER = Purpose("bt_learner", 180)  # the anonymous learner's cookie (identity.py); as long as the cookie lives
TEACHER_DEVICE = Purpose("bt_teacher", 30)  # a browser that logged in as the teacher (login_guard.py)
# The teacher's login (login_guard.py): Tornado's own signed cookie (`set_signed_cookie`, the same version-2
# signature with the cookie's name), keyed by the application's cookie_secret, which is `cookie_secret(secret)`.
TEACHER_LOGIN = Purpose("bt_teacher_login", 1)
PREDICT_OFF = Purpose("predict_off", 366)  # a teacher's link without the gate; its own end is inside the value
EXERCISE_TICKET = Purpose("exercise_ticket", 366)  # a downloaded exercise's ticket (exercises/bundle.py)
LTI_SESSION = Purpose("bt_lti", 0.5)  # who an LMS launched, carried in the page's address (app/lti/who.py)
LTI_TEACHER = Purpose("bt_lti_teacher", 0.5)  # a course's teacher let into its class's room (app/lti/teacher_room.py)


def _checked(secret: bytes) -> bytes:
    if len(secret) < MIN_SECRET_BYTES:
        raise ValueError(f"the server's secret must be at least {MIN_SECRET_BYTES} bytes")
    return secret


def sign(secret: bytes, purpose: Purpose, value: str, clock: Callable[[], float] = time.time) -> str:
    """`value`, signed now for `purpose` (ASCII: fit for a cookie, and for a link once URL-encoded)."""
    return create_signed_value(_checked(secret), purpose.name, value, clock=clock).decode("ascii")


def unsign(secret: bytes, purpose: Purpose, signed: object, clock: Callable[[], float] = time.time) -> str | None:
    """The value inside `signed`, if this secret signed it for `purpose` within the purpose's age; else None."""
    if not isinstance(signed, str) or not signed.isascii() or len(signed) > 4096:
        return None
    value = decode_signed_value(_checked(secret), purpose.name, signed, max_age_days=purpose.max_age_days,
                                clock=clock, min_version=2)
    if value is None:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return None


def derived_key(secret: bytes, purpose: str) -> bytes:
    """A key for `purpose` alone (hex, 64 characters), derived from the server's secret."""
    return hmac.new(_checked(secret), b"blocktrace key\x00" + purpose.encode("utf-8"), hashlib.sha256) \
        .hexdigest().encode("ascii")


def cookie_secret(secret: bytes) -> str:
    """The Tornado application's `cookie_secret` (for `set_signed_cookie`): a key of its own from the server's."""
    return derived_key(secret, "tornado signed cookies").decode("ascii")
