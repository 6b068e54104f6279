"""Routes of the Panel server. Every route is a function, so each session builds its own objects."""

from __future__ import annotations

from collections.abc import Callable

import panel as pn
from tornado.web import RequestHandler

from explorables.components.style import STATIC_DIR
from explorables.components.url_state import session_query

from .pages import index_page, query_flag, shell


class HealthHandler(RequestHandler):
    """GET /health: 200 and a short body, for load balancers and start-up checks."""

    def get(self) -> None:
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.write("ok\n")


def transformer_block_trace_page() -> pn.viewable.Viewable:
    from explorables.transformer_block_trace import TraceExplorable
    from explorables.transformer_block_trace.view import TITLE

    query = session_query()
    embed = query_flag(query, "embed", False)
    predict = query.get("predict", "on") != "off"
    return shell(TraceExplorable(query=query, embed=embed, predict=predict), TITLE, embed=embed)


def block_floor_page() -> pn.viewable.Viewable:
    from explorables.block_floor import FloorExplorable
    from explorables.block_floor.view import TITLE

    query = session_query()
    embed = query_flag(query, "embed", False)
    predict = query.get("predict", "on") != "off"
    return shell(FloorExplorable(query=query, embed=embed, predict=predict), TITLE, embed=embed)


ROUTES: dict[str, Callable[[], pn.viewable.Viewable]] = {
    "/": index_page,
    "/explorables/transformer-block-trace": transformer_block_trace_page,
    "/explorables/block-floor": block_floor_page,
}


def server_kwargs() -> dict:
    """What `pn.serve` needs besides the routes: our static files and /health."""
    return {
        "static_dirs": {"assets": str(STATIC_DIR)},
        "extra_patterns": [(r"/health", HealthHandler)],
        "title": {route: "blocktrace" for route in ROUTES},
    }
