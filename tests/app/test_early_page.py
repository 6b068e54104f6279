"""app/tuning/early_page.py: a page's HTML goes out before its session is built, and the session is built once.

Each route's early page is compared with the page Panel writes for a named session. Most tests run the
server inside the test's own event loop, so they can see which sessions exist when a page has been sent
and when its websocket opens.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import urllib.request
from html.parser import HTMLParser
from urllib.parse import quote, urljoin

import pytest
from bokeh.util.token import get_session_id, get_token_payload
from panel.io.server import get_server
from tornado.httpclient import AsyncHTTPClient

from blocktrace.app.server.pages import page_title
from blocktrace.app.server.routes import page_titles, routes, server_kwargs
from blocktrace.app.tuning import early_page
from tests.app.bokeh_ws_client import Session, models, pull_document
from tests.conftest import free_port

PAGES = routes()
TITLES = page_titles(PAGES)
TRACE = "/explorables/transformer-block-trace"


class PageParts(HTMLParser):
    """What a page loads and says: its title, scripts, stylesheets and inline styles."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.title, self.scripts, self.links, self.styles, self.roots = "", [], [], [], 0
        self._in = None
        self.feed(html)

    def handle_starttag(self, tag, attrs) -> None:
        a = dict(attrs)
        self._in = tag
        if tag == "script" and a.get("src"):
            self.scripts.append(a["src"])
        elif tag == "link":
            self.links.append((a.get("rel"), a.get("href")))
        elif "data-root-id" in a:
            self.roots += 1

    def handle_endtag(self, tag) -> None:
        self._in = None

    def handle_data(self, data) -> None:
        if self._in == "title":
            self.title += data
        elif self._in == "style":
            self.styles.append(data.strip())


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=60) as r:
        return r.read().decode("utf-8")


def page_token(html: str) -> str:
    return re.search(r'"token":\s*"([^"]+)"', html).group(1)


@pytest.mark.parametrize("path", sorted(PAGES))
def test_every_page_has_its_own_title(server, path: str) -> None:
    """The browser tab names the page and the site (Panel alone would say "Panel Application")."""
    expected = page_title(PAGES[path].title)
    for _ in range(2):  # the route's first page, then an early one
        assert PageParts(fetch(server.url(path))).title == expected
    assert "Panel Application" not in expected


@pytest.mark.parametrize("path", sorted(PAGES))
@pytest.mark.parametrize("query", ["", "?theme=dark", "?embed=1&predict=off"])
def test_an_early_page_loads_what_panels_own_page_loads(path: str, query: str) -> None:
    """Same scripts (but bokeh-gl), stylesheets, inline styles and title as the page Panel writes.

    In-process server without blocktrace serve's request transform, which takes `bokeh-session-id` out of
    every request (app/server/page_requests.py): here a named session still reaches Panel's own handler.
    """
    sep = "&" if query else "?"

    async def compare(base: str, _context) -> None:
        client = AsyncHTTPClient()
        await client.fetch(base + path + query)  # the route's first page leaves its frame behind
        early = PageParts((await client.fetch(base + path + query)).body.decode())
        named = f"{base}{path}{query}{sep}bokeh-session-id={secrets.token_urlsafe(32)}"
        panels = PageParts((await client.fetch(named)).body.decode())
        assert panels.roots >= 1 and early.roots == 0  # Panel places the roots; BokehJS appends them to the body
        assert early.scripts == [s for s in panels.scripts if "bokeh-gl" not in s]
        assert len(early.scripts) == len(panels.scripts) - 1
        assert (early.links, early.styles, early.title) == (panels.links, panels.styles, panels.title)

    asyncio.run(with_server(compare, early_page.BUILD_DELAY_S))


def preloaded(html: str) -> list[str]:
    """The stylesheet URLs an early page's preload script lists."""
    found = re.search(r"for \(const href of (\[.*?\])\)", html)
    return json.loads(found.group(1)) if found else []


def test_an_early_page_preloads_the_stylesheets_its_document_imports(server) -> None:
    """The frame's list is exactly the ImportedStyleSheet URLs of the session document the page gets."""

    page_url = server.url(TRACE)
    fetch(page_url)
    html = fetch(page_url)
    listed = preloaded(html)
    assert any(url.endswith("/css/loading.css") for url in listed), listed
    assert len(listed) == len(set(listed))
    # As the browser resolves them: a session built by its websocket writes them relative to /ws.
    imported = {m["attributes"]["url"] for m in models(pull_document(page_url, page_token(html)))
                if m.get("name") == "ImportedStyleSheet"}
    assert {urljoin(page_url, url) for url in listed} == {urljoin(page_url, url) for url in imported}


def test_the_preload_script_keeps_its_urls_inside_it() -> None:
    """URLs go into the page as JSON that can neither end the script element nor open a comment
    (in a script, "<!--<script>" keeps the element open past its end tag), and no list means no script."""
    urls = ["a.css", "</script><script>alert(1)</script>.css", "http://<!--<script>/x.css?a=1&b=2"]
    script = early_page.preload_script(urls)
    assert script.count("<") == 2 and script.startswith("<script>") and script.endswith("</script>\n")
    assert preloaded(script) == urls
    assert early_page.preload_script([]) == ""


def test_the_theme_picks_the_frame() -> None:
    """Dark and light pages of a route differ (their background), so each theme has its own frame."""
    assert early_page.frame_key(TRACE, {"theme": [b"dark"]}) == (TRACE, "dark")
    assert early_page.frame_key(TRACE, {"theme": [b"dark", b"light"]}) == (TRACE, "light")  # the last one counts
    assert early_page.frame_key(TRACE, {"predict": [b"off"]}) == (TRACE, "light")


# --- the server inside the test's event loop -------------------------------------------------------------


BUILDS: dict[str, asyncio.Future] = {}  # session id -> the build the page handler scheduled


def recording(schedule):
    def schedule_and_record(context, session_id, request, token):
        BUILDS[session_id] = schedule(context, session_id, request, token)
        return BUILDS[session_id]

    return schedule_and_record


async def with_server(scenario, delay_s: float) -> None:
    saved, early_page.BUILD_DELAY_S = early_page.BUILD_DELAY_S, delay_s
    port = free_port()
    server = get_server(PAGES, port=port, address="127.0.0.1", start=False, show=False, title=TITLES,
                        websocket_origin=[f"127.0.0.1:{port}"], **server_kwargs())
    server.start()
    try:
        context = server._tornado._applications[TRACE]
        await scenario(f"http://127.0.0.1:{port}", context)
    finally:
        early_page.BUILD_DELAY_S = saved
        server.stop()
        server.unlisten()


def run_without_frames(scenario) -> None:
    """Run a server scenario with no page frame kept from earlier tests, and put those back after."""
    saved = dict(early_page.FRAMES)
    early_page.FRAMES.clear()
    try:
        asyncio.run(with_server(scenario, delay_s=0.0))
    finally:
        early_page.FRAMES.clear()
        early_page.FRAMES.update(saved)


async def get_page(base: str, query: str = "") -> tuple[str, str]:
    response = await AsyncHTTPClient().fetch(base + TRACE + query, request_timeout=60)
    token = page_token(response.body.decode("utf-8"))
    return token, get_session_id(token)


def session_ids(context) -> set[str]:
    return {s.id for s in context.sessions}


def test_the_session_of_an_early_page_is_built_once_and_its_websocket_gets_it(monkeypatch) -> None:
    """After the page is sent, its session is built with the page's query, and the page's websocket
    gets that very document."""

    async def scenario(base: str, context) -> None:
        # The route's first page: built while the request waits, or, when an earlier test left its frame,
        # an early page whose build must be finished too before the sessions are counted.
        _, first_id = await get_page(base)
        if first_id in BUILDS:
            await asyncio.wait_for(BUILDS[first_id], 60)
        token, session_id = await get_page(base, "?predict=off&v=1,2,3,4")
        build = BUILDS[session_id]
        session = await asyncio.wait_for(build, 60)
        assert session.id == session_id and session_id in session_ids(context)
        assert session.document.session_context.request.arguments["predict"] == [b"off"]
        assert get_token_payload(token)["arguments"]["v"] == [b"1,2,3,4"]
        count = len(context.sessions)
        client = await Session.open(base.replace("http", "ws") + TRACE + "/ws", token)
        try:
            pulled = {r["id"] for r in client.document["doc"]["roots"]}
            assert pulled == {r.id for r in session.document.roots}
            assert len(context.sessions) == count  # the websocket built nothing more
        finally:
            client.close()

    monkeypatch.setattr(early_page, "schedule_build", recording(early_page.schedule_build))
    asyncio.run(with_server(scenario, delay_s=0.0))


def test_the_page_goes_out_before_its_session_is_built(monkeypatch) -> None:
    """The page is sent with no session behind it yet; a websocket that opens before the build's turn
    builds the session itself, and the build, when its turn comes, finds it and builds nothing."""

    async def scenario(base: str, context) -> None:
        await get_page(base)
        token, session_id = await get_page(base)
        assert session_id not in session_ids(context) and not BUILDS[session_id].done()
        client = await Session.open(base.replace("http", "ws") + TRACE + "/ws", token)
        try:
            assert session_id in session_ids(context)
            count = len(context.sessions)
            again = await early_page.build(context, session_id, None, token)  # what the late timer would do
            assert again is context.get_session(session_id) and len(context.sessions) == count
        finally:
            client.close()

    monkeypatch.setattr(early_page, "schedule_build", recording(early_page.schedule_build))
    asyncio.run(with_server(scenario, delay_s=3600.0))


def test_a_page_asked_for_with_an_absolute_url_leaves_no_frame() -> None:
    """`bokeh-absolute-url` (sent by script-tag embeds, and addable by anyone) points a page's stylesheets
    and icons at the host it names; such a page is Panel's own and the next students' frame never has it."""

    async def scenario(base: str, context) -> None:
        evil = "?bokeh-absolute-url=" + quote("http://evil.example/", safe="")
        first = await AsyncHTTPClient().fetch(base + TRACE + evil, request_timeout=60)
        assert first.code == 200 and early_page.FRAMES == {}  # served by Panel's own handler, not kept
        later = (await AsyncHTTPClient().fetch(base + TRACE, request_timeout=60)).body.decode()
        again = (await AsyncHTTPClient().fetch(base + TRACE, request_timeout=60)).body.decode()
        assert "evil.example" not in later and "evil.example" not in again
        assert set(early_page.FRAMES) == {(TRACE, "light")}

    run_without_frames(scenario)


def test_a_failed_build_ends_the_wait_of_its_websocket() -> None:
    """Bokeh leaves a failed build's pending session unresolved; build() resolves it with the error."""

    class Broken(RuntimeError):
        pass

    class Context:  # the part of Bokeh's ApplicationContext that build() uses
        def __init__(self) -> None:
            self._pending_sessions: dict[str, asyncio.Future] = {}
            self.waiting: asyncio.Future | None = None

        async def create_session_if_needed(self, session_id, request=None, token=None):
            self.waiting = self._pending_sessions[session_id] = asyncio.get_running_loop().create_future()
            raise Broken("the page function raised")

    async def scenario() -> None:
        context = Context()
        with pytest.raises(Broken):
            await early_page.build(context, "s1", None, "token")
        assert "s1" not in context._pending_sessions
        with pytest.raises(Broken):  # a websocket waiting on this session gets the error, not a hang
            await asyncio.wait_for(context.waiting, 5)

    asyncio.run(scenario())


def test_panels_admin_access_check_still_runs_for_an_admin_route(monkeypatch) -> None:
    """Panel 1.10 checks admin access in its page handler; an admin application's page goes through that
    handler (a login redirect), never out of a frame. Panel 1.9 has no such check to keep."""
    try:
        from panel.io import admin_auth
    except ImportError:  # Panel 1.9: nothing to restore; the early handler says no route is an admin one
        handler = early_page.EarlyDocHandler.__new__(early_page.EarlyDocHandler)
        assert early_page.EarlyDocHandler._admin_route(handler) is False
        return
    import panel as pn

    async def scenario(base: str, context) -> None:
        monkeypatch.setattr(context.application, "_panel_admin", True, raising=False)
        assert admin_auth.is_admin_application(context.application)
        response = await AsyncHTTPClient().fetch(base + TRACE, request_timeout=60, follow_redirects=False,
                                                 raise_error=False)
        assert response.code in (302, 403), response.code
        assert "login" in response.headers.get("Location", "login")
        assert early_page.FRAMES == {}

    monkeypatch.setattr(pn.config, "admin_password", "a teacher's secret")
    run_without_frames(scenario)


def test_with_panels_own_session_reuse_on_the_early_handler_steps_aside(monkeypatch) -> None:
    """A server started with Panel's reuse_sessions gets Panel's own reuse (root placeholders, a new session
    per page), and no page frame of ours is kept beside it."""
    import panel as pn
    from panel.io.state import state

    monkeypatch.setattr(pn.config, "reuse_sessions", "warm")
    monkeypatch.setattr(state, "_sessions", {})  # Panel keeps the reused sessions here, per process
    monkeypatch.setattr(state, "_session_key_funcs", {})

    async def scenario(base: str, context) -> None:
        pages = [(await AsyncHTTPClient().fetch(base + TRACE, request_timeout=60)).body.decode() for _ in range(2)]
        assert [PageParts(page).roots >= 1 for page in pages] == [True, True]  # Panel's page, not a frame
        assert get_session_id(page_token(pages[0])) != get_session_id(page_token(pages[1]))
        assert early_page.FRAMES == {}

    run_without_frames(scenario)
