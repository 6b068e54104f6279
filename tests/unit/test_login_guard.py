"""The teacher login (app/classroom/login_guard.py): its limiter on a clock the tests move by hand, the password kept
in the data folder, where the login page may lead back to, and the password of a script's header."""

from __future__ import annotations

import base64
import stat

import pytest

from blocktrace.app.classroom.login_guard import (
    DEVICE_LIFETIME,
    PASSWORD_FILE,
    Guard,
    Verdict,
    basic_password,
    load_or_create_password,
    local_target,
)
from blocktrace.app.server.rate_limits import client_key
from blocktrace.app.settings import Settings, overridden
from tests.clock import Clock

PASSWORD = "the teacher's password"
SECRET = b"the server's secret, 32 bytes..."
DEFAULTS = Settings()
MAX_FAILURES, MAX_GLOBAL_FAILURES = DEFAULTS.login_failures, DEFAULTS.login_failures_total
FAILURE_WINDOW = DEFAULTS.login_window
TEACHER = "10.0.0.5"  # the school's NAT: the teacher and every student share it
NOW = 1_800_000_000.0  # the test clock starts at a plausible wall time (it serves as monotonic and wall clock)


def guard(clock: Clock, **limits: int) -> Guard:
    defaults = {"max_failures": MAX_FAILURES, "max_global": MAX_GLOBAL_FAILURES, "window": FAILURE_WINDOW}
    return Guard(PASSWORD, SECRET, clock=clock, wall_clock=clock, **{**defaults, **limits})


def test_five_wrong_passwords_limit_that_address_for_a_window() -> None:
    """Five wrong guesses from one address: the sixth login there is not checked (429) until the window passes."""
    clock = Clock(NOW)
    g = guard(clock)
    verdicts = [g.admit(TEACHER, f"guess {n}").verdict for n in range(MAX_FAILURES + 1)]
    assert verdicts == [Verdict.DENIED] * MAX_FAILURES + [Verdict.LIMITED]
    limited = g.admit(TEACHER, PASSWORD)
    assert limited.verdict is Verdict.LIMITED and not limited.everywhere
    assert 0 < limited.retry_after <= FAILURE_WINDOW
    assert g.admit("10.0.0.6", PASSWORD).verdict is Verdict.ADMITTED  # other addresses are not affected
    clock.now += FAILURE_WINDOW + 1
    assert g.admit(TEACHER, PASSWORD).verdict is Verdict.ADMITTED


def test_a_request_without_a_password_is_not_a_guess() -> None:
    """No password at all (a request without one, an empty form) is refused and counts for nothing."""
    g = guard(Clock(NOW))
    assert [g.admit(TEACHER, None).verdict for _ in range(20)] == [Verdict.DENIED] * 20
    assert g.tracked() == 0
    assert g.admit(TEACHER, PASSWORD).verdict is Verdict.ADMITTED


def test_a_new_address_per_guess_is_limited_in_total() -> None:
    """300 guesses from 300 addresses: only MAX_GLOBAL_FAILURES are checked, and the table holds no more than that."""
    g = guard(Clock(NOW))
    verdicts = [g.admit(f"198.51.100.{n % 250}" if n < 250 else f"203.0.113.{n - 250}", f"guess {n}")
                for n in range(300)]
    assert [v.verdict for v in verdicts[:MAX_GLOBAL_FAILURES]] == [Verdict.DENIED] * MAX_GLOBAL_FAILURES
    assert {v.verdict for v in verdicts[MAX_GLOBAL_FAILURES:]} == {Verdict.LIMITED}
    assert all(v.everywhere for v in verdicts[MAX_GLOBAL_FAILURES:])
    assert g.tracked() == MAX_GLOBAL_FAILURES


def test_the_failure_table_is_bounded_and_forgets_the_oldest() -> None:
    """However many addresses fail, the table keeps at most max_tracked, dropping those that failed longest ago."""
    clock = Clock(NOW)
    g = guard(clock, max_tracked=100, max_global=10**6)
    for n in range(5000):
        clock.now += 0.001
        assert g.admit(f"2001:db8:{n:x}::1", "wrong").verdict is Verdict.DENIED
        assert g.tracked() <= 100
    assert g.tracked() == 100
    for _ in range(MAX_FAILURES - 1):  # the most recent address is still counted ...
        g.admit("2001:db8:1387::1", "wrong")
    assert g.admit("2001:db8:1387::1", PASSWORD).verdict is Verdict.LIMITED
    for _ in range(MAX_FAILURES - 1):  # ... the first one was evicted, so its count started again
        g.admit("2001:db8:0::1", "wrong")
    assert g.admit("2001:db8:0::1", PASSWORD).verdict is Verdict.ADMITTED


def test_failures_older_than_the_window_are_forgotten() -> None:
    """Once a window has passed since an address's last failure, it leaves the table."""
    clock = Clock(NOW)
    g = guard(clock)
    for n in range(20):
        g.admit(f"192.0.2.{n}", "wrong")
    assert g.tracked() == 20
    clock.now += FAILURE_WINDOW + 0.1
    assert g.tracked() == 0


def test_guesses_naming_the_teachers_address_do_not_lock_out_the_teachers_browser() -> None:
    """After a login the teacher's browser holds a signed cookie: it is let in though its address and the total
    are over their limits, while a browser without it is refused."""
    clock = Clock(NOW)
    g = guard(clock)
    assert g.admit(TEACHER, PASSWORD).verdict is Verdict.ADMITTED
    cookie = g.device_cookie()
    for n in range(MAX_GLOBAL_FAILURES):
        g.admit(TEACHER if n < MAX_FAILURES else f"192.0.2.{n}", f"guess {n}")
    assert g.admit(TEACHER, PASSWORD).verdict is Verdict.LIMITED  # a browser that never logged in here
    assert g.admit("192.0.2.200", PASSWORD).verdict is Verdict.LIMITED  # the total is spent too
    assert g.admit(TEACHER, PASSWORD, cookie).verdict is Verdict.ADMITTED
    assert g.admit(TEACHER, "typo", cookie).verdict is Verdict.DENIED  # still needs the password
    assert g.admit(TEACHER, None, cookie).verdict is Verdict.DENIED


def test_only_a_cookie_this_server_signed_recently_for_this_password_is_recognised() -> None:
    """Forged, altered, expired, other-password or other-server cookies are not the teacher's."""
    clock = Clock(NOW)
    g = guard(clock)
    cookie = g.device_cookie()
    head, _, signature = cookie.rpartition("|")
    assert g.recognises(cookie)
    assert not g.recognises(None) and not g.recognises("") and not g.recognises("garbage")
    assert not g.recognises(f"{head}|{'0' * len(signature)}")
    assert "|10:1800000000|" in cookie
    assert not g.recognises(cookie.replace("|10:1800000000|", "|10:1800000001|"))  # a later issue time
    assert not Guard("another password", SECRET, clock=clock, wall_clock=clock).recognises(cookie)
    assert not Guard(PASSWORD, b"another server's secret, 32 byte", clock=clock, wall_clock=clock).recognises(cookie)
    clock.now += DEVICE_LIFETIME + 1
    assert not g.recognises(cookie)


def test_an_ipv6_client_counts_by_its_64() -> None:
    """One machine usually has a whole IPv6 /64: guesses from five of its addresses limit all of it."""
    g = guard(Clock(NOW))
    for n in range(MAX_FAILURES):
        g.admit(f"2001:db8:aa:bb::{n + 1:x}", "wrong")
    assert g.admit("2001:db8:aa:bb:ffff::9", PASSWORD).verdict is Verdict.LIMITED
    assert g.admit("2001:db8:aa:bc::1", PASSWORD).verdict is Verdict.ADMITTED
    assert client_key("::ffff:192.0.2.7") == "192.0.2.7" == client_key("192.0.2.7")
    assert client_key("?") == "?"


def test_a_guard_takes_its_limits_from_the_settings() -> None:
    """Without numbers of its own, the login's limits are the settings' (BLOCKTRACE_LOGIN_*)."""
    clock = Clock(NOW)
    with overridden(login_failures=2, login_failures_total=7, login_window=5.0, login_clients=9):
        g = Guard(PASSWORD, SECRET, clock=clock, wall_clock=clock)
    assert (g.max_failures, g.max_global, g.window, g.max_tracked) == (2, 7, 5.0, 9)
    for n in range(2):
        g.admit(TEACHER, f"guess {n}")
    assert g.admit(TEACHER, PASSWORD).verdict is Verdict.LIMITED
    clock.now += 5.1
    assert g.admit(TEACHER, PASSWORD).verdict is Verdict.ADMITTED


def test_the_password_is_kept_in_the_data_folder_until_a_new_one_is_asked_for(tmp_path) -> None:
    """The password made on first start is read again at every restart, from a file only its owner reads;
    `new` (serve's --new-password) replaces it, and the new one is kept in turn."""
    first = load_or_create_password(tmp_path)
    path = tmp_path / PASSWORD_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(first) >= 12
    assert load_or_create_password(tmp_path) == first
    second = load_or_create_password(tmp_path, new=True)
    assert second != first and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_password(tmp_path) == second
    assert sorted(p.name for p in tmp_path.iterdir()) == [PASSWORD_FILE]  # nothing left aside
    path.chmod(0o644)  # restored from a copy with looser permissions
    assert load_or_create_password(tmp_path) == second and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_an_emptied_password_file_is_refused_with_its_remedy(tmp_path) -> None:
    """A password file someone emptied is not an empty password: the server says how to make a new one."""
    (tmp_path / PASSWORD_FILE).write_text("\n")
    with pytest.raises(ValueError, match="--new-password"):
        load_or_create_password(tmp_path)


@pytest.mark.parametrize(("target", "kept"), [
    ("/teacher?class=period3&theme=dark", True),
    ("/teacher/events.csv?class=a", True),
    ("/", True),
    ("https://evil.example/teacher", False),
    ("//evil.example/teacher", False),
    ("/\\evil.example/teacher", False),
    ("/teacher\r\nSet-Cookie: x=1", False),
    ("teacher", False),
    ("javascript:alert(1)", False),
    ("", False),
])
def test_the_login_leads_back_only_to_a_page_of_this_server(target: str, kept: bool) -> None:
    """The login page's `next` is followed only when it is a path here; anything else leads to the teacher's room."""
    assert local_target(target) == (target if kept else "/teacher")


@pytest.mark.parametrize(("header", "password"), [
    (None, None),
    ("Bearer x", None),
    ("Basic " + base64.b64encode(b"teacher:pw:with:colons").decode(), "pw:with:colons"),
    ("Basic " + base64.b64encode(b"any name:pw").decode(), "pw"),
    ("Basic !!!", ""),
])
def test_a_script_may_send_the_password_as_basic_authentication(header, password) -> None:
    """Scripts send `Authorization: Basic` with any user name; no header is no password, a broken one a wrong one."""
    assert basic_password(header) == password


def test_a_login_holds_only_for_the_password_it_was_made_with() -> None:
    """The login cookie's content is the password's tag under the server's secret: a new password (or another
    server's secret) ends every login, and the cookie tells nothing of the password."""
    login = guard(Clock(NOW)).login_value()
    assert Guard(PASSWORD, SECRET).logged_in(login.encode())
    assert not Guard("a new password", SECRET).logged_in(login.encode())
    assert not Guard(PASSWORD, b"another server's secret, 32 byte").logged_in(login.encode())
    assert not Guard(PASSWORD, SECRET).logged_in(None) and PASSWORD not in login
