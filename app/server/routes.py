"""Routes of the Panel server. Every route is a function, so each session builds its own objects."""

from __future__ import annotations

from collections.abc import Callable

import panel as pn
from bokeh.settings import settings as bokeh_settings

from blocktrace.app import tuning
from blocktrace.app.lessons.loading import lesson_for_explorable
from blocktrace.app.server import build_limits, predict_links
from blocktrace.app.server.embed_check import EmbedCheckHandler
from blocktrace.app.server.health import HealthHandler, MemoryHandler
from blocktrace.app.server.pages import apply_theme, index_page, page_title, query_flag, shell
from blocktrace.app.server.registry import EXPLORABLE_SPECS, ExplorableSpec
from blocktrace.app.server.session_setup import attach_explorable, learner_bar, restore_explorable, start_session
from blocktrace.app.settings import settings
from blocktrace.explorables.components import url_state
from blocktrace.explorables.components.focus import focus_design
from blocktrace.explorables.components.style import STATIC_DIR
from blocktrace.explorables.components.url_state import session_query

__all__ = ["explorable_page", "page_titles", "routes", "server_kwargs"]

# Before any widget is built: every Panel component gets the keyboard focus ring (explorables/components/focus.py).
pn.config.design = focus_design()


def explorable_page(spec: ExplorableSpec) -> Callable[[], pn.viewable.Viewable]:
    """The route function of one explorable: reads the query, builds a fresh explorable for the session."""

    def page() -> pn.viewable.Viewable:
        query = session_query()
        apply_theme(query)
        if tuning.is_applied("panel_fixes"):
            tuning.panel_fixes.use_absolute_dist_url(query)
        embed = query_flag(query, "embed", False)
        gate = predict_links.decide(spec.route(), query)  # predict=off only from the teacher's signed link

        def content() -> pn.viewable.Viewable:
            explorable = spec.load()(query=query, embed=embed, predict=gate.predict)
            explorable.notices += gate.notices
            recorder = start_session(query, lesson=lesson_for_explorable(spec.id))
            attach_explorable(explorable, spec.id, recorder)
            restore_explorable(explorable, spec.id, recorder, query)
            bar = None if embed else learner_bar(recorder)
            return explorable if bar is None else pn.Column(bar, explorable, sizing_mode="stretch_width")

        # now, once loaded, or refused; the question shown while the scripts load is the route's, whatever the link
        return shell(build_limits.limited(content), spec.title(), embed=embed, question=spec.question())

    page.__name__ = spec.id.replace("-", "_") + "_page"
    page.title = spec.title()
    return page


def configure() -> None:
    """Public settings of Panel and Bokeh for every session of this server, with or without `--no-tuning`
    (they are configuration, not patches of internals):

    - no BrowserInfo on the pages: its view opens a WebGL context on every load (about 20 ms of a cold load
      in headless Chromium, a GPU start-up on a laptop) to report what nothing here reads (`pn.state.browser_info`;
      the theme comes from the page's address);
    - the browser's address follows a change after the `url_write_ms` setting (explorables/components/url_state.py);
    - no per-session integrity check of the document (Bokeh only logs what it finds) and no signature check of
      every callback registered on a model (Panel registers a few thousand per session, about a tenth of a
      session build; it also drops Bokeh's "did you mean" hint for a property that does not exist). Every
      session of a route builds the same kind of document: tests/app/test_page_checks.py runs both checks on
      each route's.
    """
    pn.config.browser_info = False
    url_state.WRITES.delay_ms = settings().url_write_ms
    bokeh_settings.perform_document_validation.set_value(False)
    bokeh_settings.perform_error_diagnostics.set_value(False)


def routes(tuned: bool = True) -> dict[str, Callable[[], pn.viewable.Viewable]]:
    """Every page's route function. First sets the server's public settings (configure) and applies the
    tuning layer unless `tuned` is False; the first call in a process decides (tuning.apply)."""
    from blocktrace.app.lessons.page import lesson_routes

    configure()
    tuning.apply(tuned, without=tuple(name for name in settings().tuning_without.split(",") if name))

    out: dict[str, Callable[[], pn.viewable.Viewable]] = {"/": index_page}
    out.update({spec.route(): explorable_page(spec) for spec in EXPLORABLE_SPECS.values()})
    out.update(lesson_routes())
    return out


def page_titles(pages: dict[str, Callable[[], pn.viewable.Viewable]]) -> dict[str, str]:
    """Each route's browser-tab title, for `pn.serve` (which would otherwise call every page "Panel Application")."""
    return {path: page_title(page.title) for path, page in pages.items()}


def server_kwargs() -> dict:
    """What `pn.serve` needs besides the routes: our static files, /health and /embed-check (asked by a page
    that embeds an explorable), plus what the tuning layer serves."""
    static_dirs = {"assets": str(STATIC_DIR)}
    patterns: list[tuple] = [(r"/health", HealthHandler), (r"/health/memory", MemoryHandler),
                             (r"/embed-check", EmbedCheckHandler)]
    if tuning.is_applied("panel_fixes"):
        static_dirs[tuning.panel_fixes.PANEL_DIST_ALIAS] = tuning.panel_fixes.PANEL_DIST_DIR
    if tuning.is_applied("compressed_static"):
        patterns += tuning.compressed_static.static_patterns()
    return {"static_dirs": static_dirs, "extra_patterns": patterns}
