"""The server picks every session and sets the learner cookie (app/server/page_requests.py), on the real server.

A classmate's link cannot choose the session a page gets, a websocket token the server did not sign is
refused, and the learner cookie comes from the server, HttpOnly and SameSite=Lax.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from http.cookies import SimpleCookie

import pytest
from bokeh.util.token import generate_jwt_token, generate_session_id, get_session_id, get_token_payload
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

from blocktrace.app.classroom.identity import COOKIE_NAME, load_or_create_secret, sign, verify
from tests.app.bokeh_ws_client import READ_TIMEOUT_S, Session, token_in
from tests.conftest import Server, start_server, stop_server

TRACE = "/explorables/transformer-block-trace"
FIXATED = "fixated0123456789"


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Server:
    """A server of this module's own: the refusals here are logged (as warnings and Bokeh's own errors), and
    other modules check the shared server's log for errors."""
    running = start_server(tmp_path_factory.mktemp("page-requests") / "server.log")
    yield running
    stop_server(running)


def get(server: Server, path: str, cookie: str | None = None) -> tuple[str, list[str]]:
    """The page's HTML and its Set-Cookie headers."""
    request = urllib.request.Request(server.url(path), headers={"Cookie": cookie} if cookie else {})
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read().decode("utf-8"), response.headers.get_all("Set-Cookie") or []


def cookies_of(set_cookies: list[str]) -> dict[str, SimpleCookie]:
    out = {}
    for header in set_cookies:
        jar = SimpleCookie()
        jar.load(header)
        out.update({name: morsel for name, morsel in jar.items()})
    return out


def secret_of(server: Server) -> bytes:
    return load_or_create_secret(server.log_path.parent / "data")


def logged_after(server: Server, start: int, text: str, timeout_s: float = 30.0) -> str:
    """The server's log from offset `start`, once it holds `text` (or at the deadline)."""
    deadline = time.monotonic() + timeout_s
    while text not in (logged := server.log()[start:]) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling the file the server writes to; the condition decides
    return logged


def ws_url(server: Server, path: str = TRACE) -> str:
    return server.url(path).replace("http://", "ws://", 1) + "/ws"


async def first_reply(url: str, token: str, cookie: str | None = None) -> str | None:
    """The first message the server sends on a websocket opened with `token` (None: it closed instead)."""
    ws = await websocket_connect(HTTPRequest(url, headers={"Cookie": cookie} if cookie else {}),
                                 subprotocols=["bokeh", token])
    try:
        reply = await asyncio.wait_for(ws.read_message(), READ_TIMEOUT_S)
    finally:
        ws.close()
    while reply is not None and await asyncio.wait_for(ws.read_message(), READ_TIMEOUT_S) is not None:
        pass  # until the server's side has closed too: no socket left for the collector to find
    return reply


def test_a_page_request_cannot_choose_its_session(server: Server) -> None:
    """A fixated `bokeh-session-id` in a link is ignored: the page gets a fresh id the server signed."""
    html, _ = get(server, f"{TRACE}?class=period3&bokeh-session-id={FIXATED}")
    session_id = get_session_id(token_in(html))
    assert session_id != FIXATED and FIXATED not in html
    assert "." in session_id  # Bokeh's signed form: <id>.<signature>


def test_a_copied_token_in_a_link_does_not_join_that_session(server: Server) -> None:
    """Even a real token copied from a classmate's page, put into a link, gets the victim a session of their own."""
    theirs = token_in(get(server, TRACE)[0])
    html, _ = get(server, f"{TRACE}?bokeh-token={theirs}")
    assert get_session_id(token_in(html)) != get_session_id(theirs)


@pytest.mark.parametrize("key", [None, b"a key that is not the server's own secret key"],
                         ids=["unsigned", "signed-elsewhere"])
def test_a_websocket_with_a_token_the_server_did_not_make_is_refused(server: Server, key) -> None:
    """The fixated-session attack's second half: a token made by the client opens nothing."""
    forged = generate_jwt_token(generate_session_id(secret_key=key, signed=key is not None),
                                secret_key=key, signed=key is not None)
    before = len(server.log())
    assert asyncio.run(first_reply(ws_url(server), forged)) is None
    logged = logged_after(server, before, "websocket refused: Invalid token signature")
    assert "websocket refused: Invalid token signature" in logged
    assert "Traceback" not in logged


def test_a_websocket_with_the_pages_own_token_opens(server: Server) -> None:
    """The page's own token still works (the refusal above is not a refusal of everything)."""
    token = token_in(get(server, TRACE)[0])

    async def open_and_close() -> dict:
        session = await Session.open(ws_url(server), token)
        try:
            return session.document
        finally:
            await session.close_and_wait()

    assert asyncio.run(open_and_close())["doc"]["roots"]


def test_the_server_sets_the_learner_cookie_httponly(server: Server) -> None:
    """A first visit gets a signed learner id from the server: HttpOnly, SameSite=Lax, the whole site."""
    html, set_cookies = get(server, f"{TRACE}?class=period3")
    cookies = cookies_of(set_cookies)
    learner = cookies[COOKIE_NAME]
    assert learner["httponly"] and learner["samesite"] == "Lax" and learner["path"] == "/"
    assert not learner["secure"]  # plain http here; behind HTTPS it is Secure (tests/unit/test_page_requests.py)
    learner_id = verify(learner.value, secret_of(server))
    assert learner_id is not None
    assert cookies["bt_class"].value == "period3" and cookies["bt_class"]["httponly"]
    # The session being built already knows the learner: the cookie travels in its token.
    assert get_token_payload(token_in(html))["cookies"][COOKIE_NAME] == learner.value
    assert "document.cookie" not in html


def test_a_returning_learner_keeps_their_cookie(server: Server) -> None:
    """With a valid cookie no new learner is made."""
    value = sign("0123456789abcdef0123456789abcdef", secret_of(server))
    html, set_cookies = get(server, TRACE, cookie=f"{COOKIE_NAME}={value}")
    assert COOKIE_NAME not in cookies_of(set_cookies)
    assert get_token_payload(token_in(html))["cookies"][COOKIE_NAME] == value


def test_a_forged_cookie_is_replaced(server: Server) -> None:
    """A cookie naming a learner without the server's signature gets a fresh learner instead."""
    forged = "0123456789abcdef0123456789abcdef." + "0" * 64
    html, set_cookies = get(server, TRACE, cookie=f"{COOKIE_NAME}={forged}")
    fresh = cookies_of(set_cookies)[COOKIE_NAME].value
    assert fresh != forged and verify(fresh, secret_of(server)) is not None
    assert get_token_payload(token_in(html))["cookies"][COOKIE_NAME] == fresh


def test_a_token_works_only_in_the_browser_it_was_made_for(server: Server) -> None:
    """A page's token copied into another learner's browser (or sent without the cookie the page had) opens
    nothing; in the page's own browser it opens."""
    secret = secret_of(server)
    victim = f"{COOKIE_NAME}={sign('0123456789abcdef0123456789abcdef', secret)}"
    other = f"{COOKIE_NAME}={sign('fedcba9876543210fedcba9876543210', secret)}"
    token = token_in(get(server, TRACE, cookie=victim)[0])
    before = len(server.log())
    assert asyncio.run(first_reply(ws_url(server), token, cookie=other)) is None
    assert asyncio.run(first_reply(ws_url(server), token)) is None
    logged = logged_after(server, before, "websocket refused")
    assert "websocket refused" in logged and "Traceback" not in logged
    assert asyncio.run(first_reply(ws_url(server), token, cookie=victim)) is not None  # the ACK
