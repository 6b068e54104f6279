"""app/server/page_requests.py on hand-made Tornado requests, and its per-address buckets."""

from __future__ import annotations

from http.cookies import SimpleCookie

import pytest
from bokeh.util.token import generate_jwt_token
from tornado.httputil import HTTPHeaders, HTTPServerRequest, RequestStartLine

from blocktrace.app.classroom.identity import COOKIE_NAME, sign, verify
from blocktrace.app.server.page_requests import LIMITED_HEADER, NEW_HEADER, page_requests, same_browser, session_signing
from blocktrace.app.server.rate_limits import TokenBuckets
from blocktrace.app.settings import overridden

SECRET = b"s" * 32
PAGE = "/explorables/transformer-block-trace"


def request(uri: str, cookie: str = "", remote_ip: str = "10.0.0.7", protocol: str = "http",
            **headers: str) -> HTTPServerRequest:
    all_headers = HTTPHeaders({"Host": "class.example", **headers})
    if cookie:
        all_headers["Cookie"] = cookie
    made = HTTPServerRequest(start_line=RequestStartLine("GET", uri, "HTTP/1.1"), headers=all_headers)
    made.remote_ip, made.protocol = remote_ip, protocol
    return made


def set_cookies(transform) -> dict[str, SimpleCookie]:
    headers = HTTPHeaders()
    transform.transform_first_chunk(200, headers, b"", True)
    out = {}
    for value in headers.get_list("Set-Cookie"):
        jar = SimpleCookie()
        jar.load(value)
        out.update(jar)
    return out


def test_every_way_of_naming_a_session_is_taken_out() -> None:
    made = request(f"{PAGE}?bokeh-session-id=fixated&bokeh-token=abc&theme=dark",
                   **{"Bokeh-Session-Id": "fixated", LIMITED_HEADER: "1"})
    page_requests(SECRET, [PAGE])(made)
    assert set(made.arguments) == set(made.query_arguments) == {"theme"}
    assert "Bokeh-Session-Id" not in made.headers and LIMITED_HEADER not in made.headers


def test_a_new_learner_gets_a_cookie_in_the_response_and_the_request() -> None:
    made = request(PAGE + "?class=period3", cookie="other=1")
    cookies = set_cookies(page_requests(SECRET, [PAGE], admitted=lambda code: True)(made))
    learner = cookies[COOKIE_NAME]
    assert verify(learner.value, SECRET) is not None
    assert learner["httponly"] and learner["samesite"] == "Lax" and not learner["secure"]
    assert cookies["bt_class"].value == "period3"
    sent_on = SimpleCookie(made.headers["Cookie"])  # what the session being built will read
    assert sent_on[COOKIE_NAME].value == learner.value and sent_on["other"].value == "1"
    assert sent_on["bt_class"].value == "period3"


@pytest.mark.parametrize(("link", "kept", "classes", "cookie"), [
    ("Period3", "", {"period3"}, "period3"),  # one spelling in the cookie
    ("%20PERIOD3%20", "bio2", {"period3"}, "period3"),
    ("period3", "period3", {"period3"}, None),  # already in it: nothing to set
    ("perod3", "bio2", {"period3"}, None),  # no class has it: the cookie stays as it was
    ("%3Cb%3E", "bio2", {"period3"}, None),  # not a code
])
def test_a_class_link_sets_the_class_cookie_only_for_a_class_the_server_has(link, kept, classes, cookie) -> None:
    """The class cookie holds a code in its one spelling, and only one the server let the browser into."""
    made = request(f"{PAGE}?class={link}", cookie=f"bt_class={kept}" if kept else "")
    cookies = set_cookies(page_requests(SECRET, [PAGE], admitted=lambda code: code in classes)(made))
    assert (cookies["bt_class"].value if "bt_class" in cookies else None) == cookie
    sent_on = SimpleCookie(made.headers.get("Cookie", ""))  # what the session being built reads
    assert (sent_on["bt_class"].value if "bt_class" in sent_on else None) == (cookie or kept or None)


def test_behind_https_the_cookie_is_secure() -> None:
    cookies = set_cookies(page_requests(SECRET, [PAGE])(request(PAGE, protocol="https")))
    assert cookies[COOKIE_NAME]["secure"]


def test_a_valid_cookie_is_kept_and_static_files_get_none() -> None:
    value = sign("ab" * 16, SECRET)
    assert set_cookies(page_requests(SECRET, [PAGE])(request(PAGE, cookie=f"{COOKIE_NAME}={value}"))) == {}
    assert set_cookies(page_requests(SECRET, [PAGE])(request("/static/js/bokeh.min.js"))) == {}
    assert set_cookies(page_requests(None, [PAGE])(request(PAGE))) == {}  # no classroom: no learner
    assert COOKIE_NAME in set_cookies(page_requests(SECRET, [PAGE])(request(PAGE + "/autoload.js")))


def test_new_learners_are_limited_per_address() -> None:
    """Past the burst, a page is served without a learner (and says so); another address is not affected."""
    transform = page_requests(SECRET, [PAGE], new_learners=(3, 0.001))
    made = [set_cookies(transform(request(PAGE))) for _ in range(4)]
    assert [COOKIE_NAME in cookies for cookies in made] == [True, True, True, False]
    limited = request(PAGE, cookie=f"{COOKIE_NAME}=forged.value")
    transform(limited)
    assert limited.headers[LIMITED_HEADER] == "1" and NEW_HEADER not in limited.headers
    assert COOKIE_NAME in set_cookies(transform(request(PAGE, remote_ip="10.0.0.8")))


def test_new_learners_from_ipv6_are_limited_per_64() -> None:
    """Two IPv6 addresses of one /64 share one budget of new learners; an address of another /64 has its own."""
    transform = page_requests(SECRET, [PAGE], new_learners=(2, 0.001))
    made = [set_cookies(transform(request(PAGE, remote_ip=address)))
            for address in ("2001:db8:1:2::10", "2001:db8:1:2::11", "2001:db8:1:2:ab::12")]
    assert [COOKIE_NAME in cookies for cookies in made] == [True, True, False]
    assert COOKIE_NAME in set_cookies(transform(request(PAGE, remote_ip="2001:db8:1:3::10")))


def test_the_new_learner_budget_comes_from_the_settings() -> None:
    """Without a budget given, the transform counts new learners by the `new_learners` setting."""
    with overridden(new_learners=(1.0, 0.001)):
        transform = page_requests(SECRET, [PAGE])
    made = [set_cookies(transform(request(PAGE))) for _ in range(2)]
    assert [COOKIE_NAME in cookies for cookies in made] == [True, False]


def test_a_school_behind_one_router_gets_a_learner_each() -> None:
    """With the default settings, 600 students arriving together from one address each get a learner of their own
    (issue 27: 49 of 300 predictions were lost when only the first 150 did)."""
    transform = page_requests(SECRET, [PAGE])
    made = [set_cookies(transform(request(PAGE, remote_ip="198.51.100.7"))) for _ in range(600)]
    assert all(COOKIE_NAME in cookies for cookies in made)
    assert len({cookies[COOKIE_NAME].value for cookies in made}) == 600


def token_for(cookie: str | None, minted: bool) -> str:
    payload = {"cookies": {COOKIE_NAME: cookie} if cookie else {}, "headers": {NEW_HEADER: "1"} if minted else {}}
    return generate_jwt_token("an-id", extra_payload=payload)


@pytest.mark.parametrize(("made_for", "minted", "sent", "same"), [
    ("a.1", False, "a.1", True),  # the browser the page went to
    ("a.1", False, "b.2", False),  # a token copied into another learner's browser
    ("a.1", False, None, False),  # ... or into a browser that drops its cookies: the page's browser sent one
    ("a.1", True, None, True),  # a learner made with the page, by a browser that keeps no cookies (a frame)
    ("a.1", True, "b.2", False),
    (None, False, None, True),  # no classroom learner either way
])
def test_a_websocket_must_come_from_the_browser_of_its_token(made_for, minted, sent, same) -> None:
    ws = request(PAGE + "/ws", cookie=f"{COOKIE_NAME}={sent}" if sent else "")
    assert same_browser(ws, token_for(made_for, minted)) is same


def test_a_copied_token_loses_its_subprotocol() -> None:
    """Bokeh then finds no token and refuses the socket."""
    ws = request(PAGE + "/ws", cookie=f"{COOKIE_NAME}=b.2",
                 **{"Sec-WebSocket-Protocol": f"bokeh, {token_for('a.1', False)}"})
    page_requests(SECRET, [PAGE])(ws)
    assert "Sec-WebSocket-Protocol" not in ws.headers
    mine = request(PAGE + "/ws", cookie=f"{COOKIE_NAME}=a.1",
                   **{"Sec-WebSocket-Protocol": f"bokeh, {token_for('a.1', False)}"})
    page_requests(SECRET, [PAGE])(mine)
    assert "Sec-WebSocket-Protocol" in mine.headers


def test_session_signing_uses_a_key_of_its_own() -> None:
    settings = session_signing(SECRET)
    assert settings["sign_sessions"] is True and settings["generate_session_ids"] is True
    assert settings["secret_key"] != SECRET and len(settings["secret_key"]) >= 32
    assert session_signing(SECRET) == settings and session_signing(b"t" * 32) != settings


def test_buckets_refill_and_the_table_is_bounded() -> None:
    now = [0.0]
    buckets = TokenBuckets(capacity=2, per_second=1.0, max_keys=3, clock=lambda: now[0])
    assert [buckets.allow("a") for _ in range(3)] == [True, True, False]
    now[0] = 1.0
    assert buckets.allow("a") and not buckets.allow("a")
    for key in "bcdefg":
        buckets.allow(key)
    assert len(buckets) == 3  # spoofed or many addresses cannot grow it


@pytest.mark.parametrize("args", [(0, 1.0), (1, 0.0), (1, 1.0, 0)])
def test_buckets_refuse_nonsense_settings(args) -> None:
    with pytest.raises(ValueError):
        TokenBuckets(*args)


def test_buckets_and_counts_are_shared_with_forked_workers() -> None:
    """With --num-procs the workers are forked after the tables are made: what one worker spends or counts,
    the others see, so a client has one budget however its requests are spread."""
    import os
    import warnings

    from blocktrace.app.server.rate_limits import SharedCounts

    buckets = TokenBuckets(capacity=3, per_second=1e-6)
    counts = SharedCounts()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12+ warns about fork with threads
        child = os.fork()
    if child == 0:  # the other worker: spends two of the address's three, and counts a page
        spent = buckets.allow("10.0.0.7") and buckets.allow("10.0.0.7")
        counts.add("10.0.0.7", 1)
        os._exit(0 if spent else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert [buckets.allow("10.0.0.7") for _ in range(2)] == [True, False]
    assert buckets.allow("10.0.0.8"), "another address has its own budget"
    assert counts.add("10.0.0.7", 1) == 1 and counts.get("10.0.0.7") == 2
    assert counts.add("10.0.0.7", -2) == 2 and counts.get("10.0.0.7") == 0


def test_a_refused_spend_says_how_long_to_wait() -> None:
    now = [0.0]
    buckets = TokenBuckets(capacity=1, per_second=0.5, clock=lambda: now[0])
    assert buckets.wait("a") == 0.0
    assert buckets.wait("a") == pytest.approx(2.0)
    now[0] = 1.5
    assert buckets.wait("a") == pytest.approx(0.5)
    now[0] = 2.0
    assert buckets.wait("a") == 0.0
