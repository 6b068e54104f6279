"""GET /embed-check: does this server accept the page asking? For static/js/embed-host.js on a page that
embeds an explorable.

A script-tag embed from a page whose origin the server does not accept loads (autoload.js answers
anyone) and then stays blank: its websocket is refused (403). An iframe from such a page is refused by
the framing policy (app/server/hardening.py), which lists the same origins. So embed-host.js asks here,
and shows the answer's message and command in place of the embed. The check is Bokeh's own
(`bokeh.server.util.check_allowlist` against the Bokeh application's websocket origins). Open to any
origin (CORS `*`, no cookies): the answer only repeats the caller's own origin.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from urllib.parse import urlsplit

from bokeh.server.util import check_allowlist
from bokeh.settings import settings
from tornado.web import RequestHandler

__all__ = ["EmbedCheckHandler", "embed_answer", "page_host"]

MAX_HOST_CHARS = 200


def page_host(origin: str) -> str | None:
    """The HOST[:PORT] of an Origin header, as Bokeh compares it; None if it is no http(s) origin."""
    try:
        parts = urlsplit(origin)
    except ValueError:
        return None
    host = parts.netloc.lower()
    if parts.scheme not in ("http", "https") or not host or len(host) > MAX_HOST_CHARS:
        return None
    if not all(c.isalnum() or c in ".-:[]" for c in host):
        return None
    return host


def embed_answer(origin: str | None, allowed: Iterable[str]) -> dict[str, object]:
    """What embed-host.js shows: `allowed`, and when not, a message and the command that would allow the page.

    No Origin header: a page of this server itself (or no browser), which is always accepted."""
    if origin is None:
        return {"allowed": True, "host": "", "message": "", "command": ""}
    if origin == "null":  # a page opened from a file
        return {"allowed": False, "host": "", "command": "",
                "message": "This page was opened as a file, so it cannot show an explorable: put it on a web "
                           "server (even `python -m http.server` on this computer) and open it from there."}
    host = page_host(origin)
    if host is None:
        return {"allowed": False, "host": "", "command": "",
                "message": "The explorable's server cannot tell this page's address, so it cannot show here."}
    if check_allowlist(host, list(allowed)):
        return {"allowed": True, "host": host, "message": "", "command": ""}
    return {"allowed": False, "host": host, "command": f"blocktrace serve --allow-websocket-origin {host}",
            "message": f"The explorable's server does not accept pages from {host}, so the explorable cannot "
                       "show here. Whoever runs the server should start it with this option added "
                       "(and keep the options it has):"}


class EmbedCheckHandler(RequestHandler):
    """GET /embed-check: the embed_answer for the request's Origin, as JSON."""

    def get(self) -> None:
        allowed = settings.allowed_ws_origin() or self.application.websocket_origins  # as Bokeh's websocket
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.set_header("Access-Control-Allow-Origin", "*")
        self.write(json.dumps(embed_answer(self.request.headers.get("Origin"), allowed)))
