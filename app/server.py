"""Routes of the Panel server. Every route is a function, so each session builds its own objects."""

from __future__ import annotations

from collections.abc import Callable

import panel as pn
from tornado.web import RequestHandler

from explorables.components.focus import focus_design
from explorables.components.style import STATIC_DIR
from explorables.components.url_state import session_query

from . import (
    compressed_static,
    design_params,
    early_page,
    first_load,
    lean_properties,
    panel_fixes,
    shared_stylesheets,
    socket_tuning,
    update_serializer,
)
from .lessons import lesson_for_explorable
from .pages import apply_theme, index_page, page_title, query_flag, shell
from .registry import EXPLORABLE_SPECS, ExplorableSpec
from .session_setup import attach_explorable, learner_bar, start_session

# Before any widget is built: every Panel component gets the keyboard focus ring (explorables/components/focus.py).
pn.config.design = focus_design()


class HealthHandler(RequestHandler):
    """GET /health: 200 and a short body, for load balancers and start-up checks."""

    def get(self) -> None:
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.write("ok\n")


def explorable_page(spec: ExplorableSpec) -> Callable[[], pn.viewable.Viewable]:
    """The route function of one explorable: reads the query, builds a fresh explorable for the session."""

    def page() -> pn.viewable.Viewable:
        query = session_query()
        apply_theme(query)
        panel_fixes.use_absolute_dist_url(query)
        embed = query_flag(query, "embed", False)
        predict = query.get("predict", "on") != "off"
        explorable = spec.load()(query=query, embed=embed, predict=predict)
        recorder = start_session(query, lesson=lesson_for_explorable(spec.id))
        attach_explorable(explorable, spec.id, recorder)
        bar = None if embed else learner_bar(recorder)
        body = explorable if bar is None else pn.Column(bar, explorable, sizing_mode="stretch_width")
        return shell(body, spec.title(), embed=embed)

    page.__name__ = spec.id.replace("-", "_") + "_page"
    page.title = spec.title()
    return page


def routes() -> dict[str, Callable[[], pn.viewable.Viewable]]:
    from .lesson_page import lesson_routes

    panel_fixes.apply()
    socket_tuning.apply()
    update_serializer.apply()
    design_params.apply()
    first_load.apply()
    early_page.apply()
    compressed_static.apply()
    shared_stylesheets.apply()
    lean_properties.apply()

    out: dict[str, Callable[[], pn.viewable.Viewable]] = {"/": index_page}
    out.update({spec.route(): explorable_page(spec) for spec in EXPLORABLE_SPECS.values()})
    out.update(lesson_routes())
    return out


def page_titles(pages: dict[str, Callable[[], pn.viewable.Viewable]]) -> dict[str, str]:
    """Each route's browser-tab title, for `pn.serve` (which would otherwise call every page "Panel Application")."""
    return {path: page_title(page.title) for path, page in pages.items()}


def server_kwargs() -> dict:
    """What `pn.serve` needs besides the routes: our static files, gzipped scripts and /health."""
    return {
        "static_dirs": {"assets": str(STATIC_DIR), panel_fixes.PANEL_DIST_ALIAS: panel_fixes.PANEL_DIST_DIR},
        "extra_patterns": [(r"/health", HealthHandler), *compressed_static.static_patterns()],
    }
