"""What the server decides for every page request before Panel sees it: the session, and the learner.

- **The server picks the session.** Sessions are signed with a key derived from the server's secret
  (Bokeh's own `sign_sessions`), so a websocket token or session id the server did not make is refused.
  And a page request cannot name a session, even a signed one it copied from a classmate's page: the
  `bokeh-session-id` and `bokeh-token` arguments and the `Bokeh-Session-Id` header are taken out of the
  request, so every page gets a fresh session built for the browser that asked.
- **The server sets the learner cookie.** A page request without a valid learner cookie gets a new
  anonymous learner id, in a cookie that is HttpOnly, SameSite=Lax, Secure behind HTTPS; the id is put
  into the request too, so the session being built (and its token, should the websocket reach another
  worker) already knows it. A `?class=CODE` link sets the class cookie the same way, in the code's one spelling
  ("Period3" is "period3"), and only for a class the server lets students into (app/classroom/join.py): a code
  no class has leaves the cookie as it was, and the index says why.
- **A session's websocket must come from the browser it was made for.** The token carries the learner
  cookie of the page request; a websocket whose own learner cookie differs (a token copied into another
  browser) has its token taken out of the request, and Bokeh refuses it.
- **An LMS's launch names its learner in the address.** A page opened by an LTI launch carries `?lti=`, a token
  the server signed (app/lti/who.py): its learner and class are taken as if from cookies, and its websocket is
  accepted without them, since a browser may keep no cookie inside the LMS's frame.
- **New learners are rate-limited per client** (the `new_learners` setting): a class behind one NAT can all arrive
  at once, a script cannot make learners without end. Over the limit, the page is served without a
  learner: it works, records nothing, and says so.

This is a Tornado output transform (`transforms=` of the Tornado application, which Bokeh passes on): it
is made for each request before the handler runs, which is where it reads and tidies the request.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Iterable
from http.cookies import CookieError, SimpleCookie

from bokeh.util.token import get_token_payload
from tornado.httputil import HTTPServerRequest
from tornado.web import OutputTransform

from blocktrace.app.classroom.identity import (
    CLASS_COOKIE,
    COOKIE_NAME,
    class_code,
    new_learner_id,
    sign,
    verify,
)
from blocktrace.app.lti.who import read_token
from blocktrace.app.server.rate_limits import TokenBuckets, client_key
from blocktrace.app.settings import settings
from blocktrace.app.signing import LEARNER, derived_key

__all__ = ["LIMITED_HEADER", "NEW_HEADER", "page_requests", "same_browser", "session_signing"]

COOKIE_DAYS = LEARNER.max_age_days  # the browser keeps it as long as its signature is accepted
SESSION_ARGUMENTS = ("bokeh-session-id", "bokeh-token")
SESSION_HEADER = "Bokeh-Session-Id"
LIMITED_HEADER = "X-Blocktrace-No-Learner"  # set on the request (never by a browser) when none was made
NEW_HEADER = "X-Blocktrace-New-Learner"  # set on the request (never by a browser) when one was made
LTI_HEADER = "X-Blocktrace-Lti-Launch"  # set on the request (never by a browser) when an LTI token named the learner


def session_signing(secret: bytes) -> dict:
    """What `pn.serve` passes to Bokeh so that every session id and token is signed by this server."""
    return {"sign_sessions": True, "secret_key": derived_key(secret, "bokeh sessions"), "generate_session_ids": True}


def forget_session_choice(request: HTTPServerRequest) -> None:
    """Take out of a request every way it could name the session it wants."""
    for name in SESSION_ARGUMENTS:
        request.arguments.pop(name, None)
        request.query_arguments.pop(name, None)
    if SESSION_HEADER in request.headers:
        del request.headers[SESSION_HEADER]
    for own in (LIMITED_HEADER, NEW_HEADER, LTI_HEADER):  # only this module may say so
        if own in request.headers:
            del request.headers[own]


def _cookies(request: HTTPServerRequest) -> dict[str, str]:
    """The request's cookies, parsed here (not through `request.cookies`, which would keep a copy)."""
    jar = SimpleCookie()
    try:
        jar.load(request.headers.get("Cookie", ""))
    except CookieError:
        return {}
    return {name: morsel.value for name, morsel in jar.items()}


def _set_cookie(name: str, value: str, secure: bool) -> str:
    parts = [f"{name}={value}", "Path=/", f"Max-Age={round(COOKIE_DAYS * 24 * 3600)}", "HttpOnly", "SameSite=Lax"]
    return "; ".join(parts + (["Secure"] if secure else []))


def _add_request_cookie(request: HTTPServerRequest, name: str, value: str) -> None:
    cookie = request.headers.get("Cookie", "")
    kept = "; ".join(part for part in cookie.split(";") if part.strip() and
                     part.strip().split("=", 1)[0] != name)
    request.headers["Cookie"] = f"{kept}; {name}={value}" if kept else f"{name}={value}"


def _admitted(code: str) -> bool:
    """Whether the server lets a student into class `code` (the process's classroom decides: join.admits)."""
    from blocktrace.app.classroom.classroom import current  # the classroom imports the store: only when asked

    classroom = current()
    return classroom is not None and classroom.admits(code)


def learner_cookies(request: HTTPServerRequest, secret: bytes, buckets: TokenBuckets,
                    admitted: Callable[[str], bool] = _admitted) -> list[str]:
    """The Set-Cookie values this page response needs; the request is changed to carry them already.

    `admitted(code)`: whether a `?class=` code may go into the class cookie."""
    cookies = _cookies(request)
    secure = request.protocol == "https"
    out = []
    launched = read_token(secret, request.query_arguments.get("lti", [b""])[-1].decode("ascii", "replace"))
    if launched is not None:  # the LMS's learner and class, whatever cookies the browser kept
        for name, value in ((COOKIE_NAME, sign(launched.learner_id, secret)), (CLASS_COOKIE, launched.class_code)):
            _add_request_cookie(request, name, value)
            out.append(_set_cookie(name, value, secure))
        request.headers[LTI_HEADER] = "1"
        return out
    if verify(cookies.get(COOKIE_NAME), secret) is None:
        if buckets.allow(client_key(request.remote_ip or "unknown")):
            value = sign(new_learner_id(), secret)
            _add_request_cookie(request, COOKIE_NAME, value)
            request.headers[NEW_HEADER] = "1"
            out.append(_set_cookie(COOKIE_NAME, value, secure))
        else:  # the session finds no valid learner cookie and records nothing
            request.headers[LIMITED_HEADER] = "1"
    linked = class_code(request.query_arguments.get("class", [b""])[-1].decode("utf-8", "replace"))
    if linked is not None and cookies.get(CLASS_COOKIE) != linked and admitted(linked):
        _add_request_cookie(request, CLASS_COOKIE, linked)
        out.append(_set_cookie(CLASS_COOKIE, linked, secure))
    return out


def socket_token(request: HTTPServerRequest) -> str | None:
    """The session token a websocket request offers (BokehJS sends it as the second subprotocol)."""
    offered = [part.strip() for part in request.headers.get("Sec-WebSocket-Protocol", "").split(",")]
    return offered[1] if len(offered) == 2 and offered[0] == "bokeh" else None


def same_browser(request: HTTPServerRequest, token: str) -> bool:
    """Whether a websocket comes from the browser its token was made for, as far as cookies tell.

    The same learner cookie as the page request: yes. Another learner cookie: no. None at all: only if
    the page request brought none either (its learner was made then, or named by an LTI launch), as from a
    browser that keeps no cookies or a page framed by another site; a browser that sent one sends it again.
    """
    try:
        payload = get_token_payload(token)
        made_for = str(payload.get("cookies", {}).get(COOKIE_NAME) or "")
        minted = any(k.lower() in (NEW_HEADER.lower(), LTI_HEADER.lower()) for k in payload.get("headers", {}))
    except Exception:  # not a token at all: Bokeh refuses it on its own
        return True
    sent = _cookies(request).get(COOKIE_NAME) or ""
    if not sent:
        return minted or not made_for
    return hmac.compare_digest(made_for.encode(), sent.encode())


def is_page(path: str, pages: frozenset[str]) -> bool:
    """A page of an app (or its script-tag loader), as opposed to static files, /ws or /teacher."""
    return path in pages or (path.endswith("/autoload.js") and path[: -len("/autoload.js")] in pages)


def page_requests(secret: bytes | None, pages: Iterable[str], new_learners: tuple[float, float] | None = None,
                  admitted: Callable[[str], bool] = _admitted) -> type[OutputTransform]:
    """The transform for a server with these page paths; `secret` None: no classroom, no learner cookie.
    `admitted(code)`: whether a `?class=` code may go into the class cookie (the classroom's word by default)."""
    page_set = frozenset(pages)
    buckets = TokenBuckets(*(settings().new_learners if new_learners is None else new_learners))

    class PageRequests(OutputTransform):
        def __init__(self, request: HTTPServerRequest) -> None:
            super().__init__(request)
            forget_session_choice(request)
            self.set_cookies: list[str] = []
            if secret is None or request.method != "GET":
                return
            if is_page(request.path, page_set):
                self.set_cookies = learner_cookies(request, secret, buckets, admitted)
            elif request.path.endswith("/ws") and (token := socket_token(request)) is not None \
                    and not same_browser(request, token):
                del request.headers["Sec-WebSocket-Protocol"]  # no token: Bokeh refuses the socket

        def transform_first_chunk(self, status_code, headers, chunk, finishing):
            for value in self.set_cookies:
                headers.add("Set-Cookie", value)
            return status_code, headers, chunk

    PageRequests.buckets = buckets
    return PageRequests
