"""Anonymous learner identity: a random id in a signed cookie, plus checks on names and class codes.

A class code has one spelling, lower case (``class_code``): "Period3", " period3 " and "PERIOD3" are the class
"period3" wherever a code comes in (the index's field, a link, the class cookie, the teacher's pages, the CSV
export). Lower case because a phone's keyboard capitalises the first letter while the teacher's own hint, the
classes an LMS makes ("lti-" and hex digits) and "default" are lower case already: those keep their spelling.

A learner is a uuid4 hex id. The browser keeps it in a cookie signed with the server's secret
(app/signing.py, purpose LEARNER), so a reload or a dropped connection keeps the learner's
progress, and a learner cannot pose as another by editing the cookie. The secret
lives in a file in the data directory (mode 0600), shared by every app process on that
directory; several machines behind a balancer need the same file.

Nothing here escapes text for HTML: names are stored as given and escaped where rendered.
"""

from __future__ import annotations

import os
import re
import secrets
import unicodedata
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from blocktrace.app import signing
from blocktrace.app.server.hardening import write_private_file

__all__ = [
    "CLASS_CODE_PATTERN", "CLASS_COOKIE", "COOKIE_NAME", "DEFAULT_CLASS", "SECRET_FILE", "chosen_class", "class_code",
    "clean_display_name", "load_or_create_secret", "new_learner_id", "sign", "valid_class_code", "valid_learner_id",
    "verify"
]

COOKIE_NAME = "bt_learner"  # the signed learner id; the server sets it (app/server/page_requests.py)
CLASS_COOKIE = "bt_class"  # the class code of the last ?class= link the server let the browser into
SECRET_FILE = "learner-cookie.key"
SECRET_BYTES = 32
MAX_NAME = 40

_LEARNER_ID = re.compile(r"[0-9a-f]{32}")
_CLASS_CODE = re.compile(r"[a-z0-9_-]{1,24}")  # as stored: lower case (class_code)
# A form field's `pattern`: any case, spaces around (the server tidies both). "\-" because Chromium reads a
# pattern with the `v` flag, where an unescaped "-" at the end of a class is an error and the check is dropped.
CLASS_CODE_PATTERN = r"\s*[A-Za-z0-9_\-]{1,24}\s*"
DEFAULT_CLASS = "default"  # the class of a student who chose none
# Bidirectional formatting characters can make a name display backwards on the teacher's screen.
_BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def new_learner_id() -> str:
    """A fresh anonymous learner id: 32 lowercase hex digits (uuid4)."""
    return uuid.uuid4().hex


def valid_learner_id(text: object) -> bool:
    """True for a learner id as ``new_learner_id`` makes them."""
    return isinstance(text, str) and _LEARNER_ID.fullmatch(text) is not None


def sign(learner_id: str, secret: bytes) -> str:
    """The cookie value for a learner: its id, signed for the learner cookie."""
    if not valid_learner_id(learner_id):
        raise ValueError(f"not a learner id: {learner_id!r}")
    return signing.sign(secret, signing.LEARNER, learner_id)


def verify(cookie_value: object, secret: bytes) -> str | None:
    """The learner id in a cookie value signed with ``secret``, or None if it is missing, malformed, forged or
    too old."""
    learner_id = signing.unsign(secret, signing.LEARNER, cookie_value)
    return learner_id if valid_learner_id(learner_id) else None


def load_or_create_secret(data_dir: Path) -> bytes:
    """The cookie secret kept in ``data_dir``; made (32 random bytes, file mode 0600) on first use.

    Safe when several processes start at once: the file appears complete or not at all
    (hardening.write_private_file), and every process reads the one that won.
    """
    data_dir = Path(data_dir)
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = data_dir / SECRET_FILE
    if not path.exists():  # the first of several processes starting at once wins; every one reads its file
        write_private_file(path, secrets.token_hex(SECRET_BYTES) + "\n", replace=False)
    if path.stat().st_mode & 0o077:
        os.chmod(path, 0o600)  # a copied or restored file may have come with looser permissions
    try:
        secret = bytes.fromhex(path.read_text(encoding="ascii").strip())
    except (UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"{path} does not hold a hex secret; delete it to make a new one") from error
    if len(secret) < 16:
        raise ValueError(f"{path} holds a secret shorter than 16 bytes; delete it to make a new one")
    return secret


def clean_display_name(text: object) -> str | None:
    """A display name tidied for storage, or None if there is none or it is refused.

    Unicode NFC, whitespace collapsed to single spaces and stripped; refused (None) when
    empty, longer than 40 characters, or holding control, surrogate or bidirectional
    formatting characters. Markup such as ``<b>`` is kept as typed: escaping is the page's job.
    """
    if not isinstance(text, str):
        return None
    name = " ".join(unicodedata.normalize("NFC", text).split())
    if not name or len(name) > MAX_NAME:
        return None
    if any(unicodedata.category(ch) in ("Cc", "Cs") or ch in _BIDI for ch in name):
        return None
    return name


def valid_class_code(text: object) -> bool:
    """True for a class code as stored: 1 to 24 lower-case ASCII letters, digits, '_' or '-' (see class_code)."""
    return isinstance(text, str) and _CLASS_CODE.fullmatch(text) is not None


def class_code(text: object) -> str | None:
    """The one spelling of a class code as typed, linked or kept: without the spaces around it, in lower case;
    None if it is not a class code (1 to 24 ASCII letters, digits, '_' or '-')."""
    if not isinstance(text, str):
        return None
    code = text.strip()  # Unicode spaces too: a phone's keyboard may add a no-break space
    if not code.isascii():  # checked before lowering: the Kelvin sign "\u212a" lowers to an ASCII "k"
        return None
    code = code.lower()
    return code if _CLASS_CODE.fullmatch(code) else None


def chosen_class(query: Mapping[str, str], cookies: Mapping[str, str],
                 admits: Callable[[str, bool], bool] | None = None) -> str:
    """The class a page records into: the link's `?class=`, else the class cookie's, else DEFAULT_CLASS.

    A value that is not a class code is passed over. `admits(code, kept)` is the server's word on a class
    (join.admits: does this server have it, or may students start classes); `kept` says the code came from the
    class cookie, which the server set. A class it refuses is passed over too, so a crafted link or cookie puts
    nobody into a class the server does not have.
    """
    for code, kept in ((class_code(query.get("class")), False), (class_code(cookies.get(CLASS_COOKIE)), True)):
        if code is not None and (code == DEFAULT_CLASS or admits is None or admits(code, kept)):
            return code
    return DEFAULT_CLASS
