"""Send a page's HTML at once and build its session while the browser loads the scripts.

Bokeh's server builds a session's whole document (about 150-250 ms of Python for an explorable)
before it answers the page request, and the browser can start on the 2.7 MB of scripts only after
that answer. Yet the HTML needs nothing from the document: the scripts are the same for every
session of a route, and the document itself travels over the websocket once the scripts have run.

So, from the second request of a route on, `EarlyDocHandler` answers with the route's page frame
(the HTML of its first session, minus that session's root placeholders) and a fresh session token,
then builds the session a moment later (`BUILD_DELAY_S`), while the browser downloads and runs the
scripts. The websocket of the page finds the session built, or still building (Bokeh waits for it),
or, if it comes first, builds it itself: the session id and the request's query, cookies and headers
travel in the token, exactly as when Bokeh builds a session for a websocket on another worker.

Without placeholders, BokehJS appends the document's roots to the page's body, in order.

The frame also leaves out bokeh-gl.min.js (190 KB), which only draws figures whose output_backend
is "webgl"; no page here has one (tests/app/test_page_checks.py).

And the frame fetches Panel's component stylesheets as soon as the scripts have run, while the
websocket opens (`preload_script`). BokehJS would only ask for them once the document has arrived,
draw the page without them, and draw it again when they come. Not earlier: on top of the four
scripts they would exceed the browser's six connections to the server, and a script still waiting
when the session build starts would wait for all of it.

Panel's own `reuse_sessions="warm"` with a `session_key_func` is the same idea, and this handler
steps aside when it is on (`_ordinary`). It is not used instead because of what it lacks (Panel 1.9.4
and 1.10.0 alike): it keeps the route's first session, the first student's, alive for good
(`block_expiration`) and renders every later page again from that live document; it starts the
build at once, while the browser's requests for the scripts arrive; a build that fails leaves
Bokeh's pending session unresolved, so the page's websocket waits for good (`build` below resolves
it); and it lists bokeh-gl and no stylesheet preload. Nor was it quicker: put in this handler's
place, the tuned page was interactive in 2577 and 2155 ms (stock 3036 and 2367) against 1770 and
1772 ms (stock 1983 and 2153) with this handler, medians of two runs each of
`benchmarks/latency.py --compare-tuning` on a busy 2-core machine (app/tuning/UPSTREAM.md).

tests/app/test_early_page.py checks that each route's early page lists the same scripts and styles
as a page built the ordinary way (bokeh-gl aside), and that a session is built once, from the token
of its page.

Upstream: app/tuning/UPSTREAM.md, "early_page" (what would retire this patch).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping

from bokeh.document import Document
from bokeh.embed.util import RenderItem
from bokeh.models import ImportedStyleSheet
from bokeh.server.contexts import ApplicationContext
from bokeh.server.session import ServerSession
from bokeh.server.urls import per_app_patterns
from bokeh.util.token import generate_jwt_token, generate_session_id
from panel.config import config
from panel.io import server as panel_server
from panel.io.resources import BASE_TEMPLATE, Resources, bundle_resources, get_dist_path, patch_model_css
from panel.io.state import set_curdoc
from tornado.web import authenticated

from blocktrace.app.server.pages import theme_of

log = logging.getLogger(__name__)

# After the page is sent, the browser asks for the scripts within a few tens of milliseconds; serving
# them first keeps the build from holding them up, and the build still ends long before the scripts
# have run (about 400 ms on a school laptop) and the page opens its websocket.
BUILD_DELAY_S = 0.1
TOKEN_MARK = "__blocktrace_session_token__"
UNUSED_SCRIPTS = ("bokeh-gl",)
FRAMES: dict[tuple[str, str], str] = {}  # (path, theme) -> the page's HTML with TOKEN_MARK for the token


def frame_key(path: str, arguments: Mapping[str, list[bytes]]) -> tuple[str, str]:
    """Pages differ only by route and theme: the theme sets the page's background."""
    last = {k: v[-1].decode("utf-8", "replace") for k, v in arguments.items() if v}  # as session_query reads it
    return path, theme_of(last)


def imported_stylesheets(doc: Document) -> list[str]:
    """The URL of every stylesheet the document's models import (Panel's component CSS), once each."""
    urls = {str(sheet.url) for model in doc.models for sheet in getattr(model, "stylesheets", None) or ()
            if isinstance(sheet, ImportedStyleSheet)}
    return sorted(urls)


def page_frame(session: ServerSession, bokeh_resources) -> str:
    """The page of a session's route with TOKEN_MARK for the token, no root placeholders, and the
    preload of each stylesheet its models import."""
    doc = session.document
    with set_curdoc(doc):
        bundle = bundle_resources(doc.roots, Resources.from_bokeh(bokeh_resources))
        bundle.js_files = [url for url in bundle.js_files if not any(name in str(url) for name in UNUSED_SCRIPTS)]
        template = doc.template if doc.template not in (None, panel_server.FILE) else BASE_TEMPLATE
        page = panel_server.html_page_for_render_items(
            bundle, {}, [RenderItem(token=TOKEN_MARK, use_for_title=False)], doc.title,
            template=template, template_variables=doc.template_variables,
        )
    return page.replace("</head>", preload_script(imported_stylesheets(doc)) + "</head>", 1)


def preload_script(urls: list[str]) -> str:
    """A script that, once the page's scripts have run, has the browser fetch `urls` as stylesheets."""
    if not urls:
        return ""
    # JSON inside <script>: with no <, > or & left as such, nothing in it can end the element or
    # open a comment that swallows the page.
    listed = json.dumps(urls).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return ("<script>document.addEventListener('DOMContentLoaded', () => { for (const href of " + listed + ") {"
            " const link = document.createElement('link'); link.rel = 'preload'; link.as = 'style';"
            " link.href = href; document.head.appendChild(link); } }, {once: true});</script>\n")


async def build(context: ApplicationContext, session_id: str, request, token: str) -> ServerSession:
    """Build (or join the build of) a session, as its websocket would; a failure ends every wait for it."""
    try:
        session = await context.create_session_if_needed(session_id, request, token)
    except Exception as error:
        pending = context._pending_sessions.pop(session_id, None)  # Bokeh leaves it unresolved
        if pending is not None and not pending.done():
            pending.set_exception(error)
        raise
    doc = session.document
    with set_curdoc(doc):  # what Panel does to a session while writing its page
        doc._template_variables["theme_name"] = config.theme
        dist_url = doc._template_variables.setdefault("dist_url", get_dist_path(cdn=False))
        for root in doc.roots:
            patch_model_css(root, dist_url=dist_url)
    return session


def schedule_build(context: ApplicationContext, session_id: str, request, token: str) -> asyncio.Future:
    """Build the session of a page just sent, BUILD_DELAY_S from now; the future ends with the build."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    async def run() -> None:
        try:
            done.set_result(await build(context, session_id, request, token))
        except Exception as error:  # the page's websocket will try again, and report it
            log.warning("could not build session %s ahead of its page: %s", session_id, error)
            done.set_exception(error)
            done.exception()  # seen: not to be logged again when the future is dropped

    loop.call_later(BUILD_DELAY_S, lambda: loop.create_task(run()))
    return done


class EarlyDocHandler(panel_server.DocHandler):
    """Panel's page handler, answering from the route's page frame when it has one."""

    def _ordinary(self) -> bool:
        """Requests for a given session, requests whose query changes the page's own URLs, or servers
        set up in ways this handler does not cover.

        A page asked for with `bokeh-absolute-url` (which a script-tag embed sends, and anyone can add)
        takes its stylesheet and icon URLs from it (app/tuning/panel_fixes.py); kept as the route's frame,
        it would send every later student to that host.
        """
        if self._admin_route():
            return True
        names_session = any(self.get_argument(k, None) is not None
                            for k in ("bokeh-token", "bokeh-session-id", "bokeh-absolute-url"))
        prefix = self.application.prefix
        return (names_session or "Bokeh-Session-Id" in self.request.headers or bool(config.authorize_callback)
                or bool(config.reuse_sessions) or not self.application.generate_session_ids
                or bool(prefix and self.request.path == prefix and not prefix.endswith("/")))

    def _admin_route(self) -> bool:
        """Whether this is Panel's admin application, whose access Panel 1.10's `DocHandler.get` checks
        (`_admin_access`); such a page goes through Panel's own handler, so the check runs. Panel 1.9
        has no such check (and no panel.io.admin_auth). blocktrace serves no admin route, but a
        server started another way might."""
        try:
            from panel.io.admin_auth import is_admin_application
        except ImportError:
            return False
        return is_admin_application(self.application_context.application)

    @authenticated
    async def get(self, *args, **kwargs):
        if self._ordinary():
            return await super().get(*args, **kwargs)
        self.set_header("Cache-Control", "no-store")  # the page holds a short-lived token
        panel_server._set_request_route_context(self, *args, **kwargs)
        app = self.application
        session_id = generate_session_id(secret_key=app.secret_key, signed=app.sign_sessions)
        token = generate_jwt_token(session_id, secret_key=app.secret_key, signed=app.sign_sessions,
                                   expiration=app.session_token_expiration,
                                   extra_payload=self._generate_token_payload())
        key = frame_key(self.request.path, self.request.arguments)
        frame = FRAMES.get(key)
        if frame is None:  # the route's first page: build now, and keep its frame for the next ones
            session = await build(self.application_context, session_id, self.request, token)
            frame = FRAMES[key] = page_frame(session, app.resources())
        else:
            schedule_build(self.application_context, session_id, self.request, token)
        self.set_header("Content-Type", "text/html")
        self.write(frame.replace(TOKEN_MARK, token))


def apply() -> None:
    """Serve every Panel route's page with EarlyDocHandler (idempotent; before the server is made)."""
    for i, (pattern, handler, *rest) in enumerate(per_app_patterns):
        if handler is panel_server.DocHandler:
            per_app_patterns[i] = (pattern, EarlyDocHandler, *rest)
