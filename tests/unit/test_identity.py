"""Learner identity: the signed cookie, the cookie secret file, display names and class codes."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest

from blocktrace.app.classroom.identity import (
    SECRET_FILE,
    class_code,
    clean_display_name,
    load_or_create_secret,
    new_learner_id,
    sign,
    valid_class_code,
    valid_learner_id,
    verify,
)

SECRET = b"s" * 32


def test_sign_verify_round_trip():
    """A cookie signed with the secret gives back the learner id it was made for."""
    learner = new_learner_id()
    assert valid_learner_id(learner)
    assert verify(sign(learner, SECRET), SECRET) == learner


def test_new_learner_ids_differ():
    """Every new anonymous id is a fresh 32-hex-digit value."""
    ids = {new_learner_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(valid_learner_id(i) for i in ids)


def test_tampered_cookie_refused():
    """Changing the id, the signature, or grafting one learner's signature onto another id is refused."""
    alice, bob = new_learner_id(), new_learner_id()
    cookie = sign(alice, SECRET)
    head, _, mac = cookie.rpartition("|")
    flipped = mac[:-1] + ("0" if mac[-1] != "0" else "1")
    assert verify(f"{head}|{flipped}", SECRET) is None
    assert verify(cookie.replace(base64.b64encode(alice.encode()).decode(), base64.b64encode(bob.encode()).decode()),
                  SECRET) is None
    assert verify(alice, SECRET) is None  # no signature at all
    assert verify(cookie + "0", SECRET) is None
    assert verify(cookie.upper(), SECRET) is None


@pytest.mark.parametrize("value", [None, "", ".", "not-a-cookie", "x" * 500, "é.é", 42])
def test_malformed_cookie_refused(value):
    """Missing or malformed cookie values verify to None instead of raising."""
    assert verify(value, SECRET) is None


def test_wrong_secret_refused():
    """A cookie signed under another secret (another server's, or an old one) is refused."""
    cookie = sign(new_learner_id(), SECRET)
    assert verify(cookie, b"t" * 32) is None


def test_sign_refuses_bad_ids_and_short_secrets():
    """Only real learner ids are signed, and only with a secret of at least 16 bytes."""
    with pytest.raises(ValueError):
        sign("../../etc", SECRET)
    with pytest.raises(ValueError):
        sign(new_learner_id(), b"short")


def test_secret_file_created_private_and_reused(tmp_path: Path):
    """The secret is made once, 32 bytes, mode 0600, in a directory made on first use, and then reused."""
    data_dir = tmp_path / "data" / "nested"
    first = load_or_create_secret(data_dir)
    assert len(first) == 32
    mode = stat.S_IMODE((data_dir / SECRET_FILE).stat().st_mode)
    assert mode == 0o600
    assert load_or_create_secret(data_dir) == first
    assert [p.name for p in data_dir.iterdir()] == [SECRET_FILE]  # no temporary file left behind


def test_secret_file_permissions_tightened(tmp_path: Path):
    """A secret file restored with loose permissions is put back to 0600 and still read."""
    first = load_or_create_secret(tmp_path)
    (tmp_path / SECRET_FILE).chmod(0o644)
    assert load_or_create_secret(tmp_path) == first
    assert stat.S_IMODE((tmp_path / SECRET_FILE).stat().st_mode) == 0o600


def test_corrupt_secret_file_is_an_error(tmp_path: Path):
    """A secret file that does not hold hex is reported, not silently replaced."""
    (tmp_path / SECRET_FILE).write_text("not hex\n")
    with pytest.raises(ValueError, match="delete it"):
        load_or_create_secret(tmp_path)


@pytest.mark.parametrize(("raw", "clean"), [
    ("  Ada  ", "Ada"),
    ("Ada \t\n Lovelace", "Ada Lovelace"),
    ("<script>alert(1)</script>", "<script>alert(1)</script>"),  # kept as typed: the page escapes it
    ("Zoë", "Zoë"),
    ("Zoe\u0308", "Zoë"),  # NFC: the combining form becomes the one precomposed character
    ("x" * 40, "x" * 40),
    ("👩‍🔬 Marie", "👩‍🔬 Marie"),  # an emoji sequence with a zero-width joiner is allowed
])
def test_display_names_cleaned(raw, clean):
    """Names are stripped, whitespace collapsed and normalised, but never escaped."""
    assert clean_display_name(raw) == clean


@pytest.mark.parametrize("raw", [
    None, "", "   ", "x" * 41, "Ada\x00", "Ada\x1b[31m", "Ada\x7f", "Ada\u202eevil", "Ada\ud800", 7,
])
def test_display_names_refused(raw):
    """Empty, over-long names and names with control or bidirectional characters are refused."""
    assert clean_display_name(raw) is None


@pytest.mark.parametrize(("typed", "code"), [
    ("period3", "period3"), ("Period3", "period3"), (" period3 ", "period3"), ("PERIOD3", "period3"),
    ("\u00a0Period3\t", "period3"), ("A", "a"), ("Class_2025", "class_2025"), ("x" * 24, "x" * 24),
    ("lti-0123456789abcdef0123", "lti-0123456789abcdef0123"),
])
def test_class_codes_have_one_spelling(typed, code):
    """A code compares without case and without the spaces around it: every spelling is the lower-case one."""
    assert class_code(typed) == code
    assert valid_class_code(code)


@pytest.mark.parametrize("code", ["", "  ", "x" * 25, "a b", "a/b", "ä", "\u212aelvin", "<b>", None, 3])
def test_class_codes_refused(code):
    """Anything else (spaces inside, slashes, non-ASCII even where it lowers to ASCII, markup, non-strings) is not
    a class code; and a code as stored is lower case, with nothing around it."""
    assert class_code(code) is None
    assert not valid_class_code(code)
    assert not valid_class_code("Period3") and not valid_class_code("period3\n")
