"""Narrow fixes for Panel 1.9's script-tag embedding (Bokeh's server_document).

A page loaded through autoload.js lives inside someone else's page, so every URL Panel writes must be
absolute to this server. Panel 1.9 gets three of them wrong: its bundled scripts are prefixed with the
request's relative path ("../../static/…"), its theme stylesheets fall back to its CDN, and the loading
stylesheet is relative to the host page. Each fix applies only to script-tag sessions.

Upstream: app/tuning/UPSTREAM.md, "panel_fixes" (what would retire this patch).
"""

from __future__ import annotations

from panel import reactive as panel_reactive
from panel.io import resources as panel_resources
from panel.io.state import state

_original = panel_resources.Resources.adjust_paths
PANEL_DIST_ALIAS = "panel-dist"
PANEL_DIST_DIR = str(panel_resources.DIST_DIR)


def _adjust_paths(self, resources):
    if not (self.absolute and self.mode == "server" and state.rel_path):
        return _original(self, resources)
    saved = state.rel_path
    try:
        state.rel_path = None
        return _original(self, resources)
    finally:
        state.rel_path = saved


_original_dist_path = panel_reactive.get_dist_path


def _dist_path(cdn="auto") -> str:
    """Panel's dist folder for component stylesheets; absolute in a script-tag embed (see below)."""
    doc = state.curdoc
    url = doc._template_variables.get("dist_url", "") if doc is not None else ""
    if url.endswith(f"/{PANEL_DIST_ALIAS}/"):
        return url
    return _original_dist_path(cdn)


def apply() -> None:
    """Install the fixes once (idempotent)."""
    if panel_resources.Resources.adjust_paths is not _adjust_paths:
        panel_resources.Resources.adjust_paths = _adjust_paths
    if panel_reactive.get_dist_path is not _dist_path:
        panel_reactive.get_dist_path = _dist_path


def use_absolute_dist_url(query: dict[str, str]) -> None:
    """In a script-tag embed, point Panel's stylesheets at this server instead of its CDN.

    Panel takes the stylesheet base from the document's template variables, which only a full page
    sets; an autoload session has none and falls back to cdn.holoviz.org, which offline classrooms
    cannot reach. The autoload request carries our absolute URL, so the base is derived from it.
    """
    from urllib.parse import urlparse

    import panel as pn

    url = query.get("bokeh-absolute-url")
    if not url or pn.state.curdoc is None:
        return
    parts = urlparse(url)
    if parts.scheme in ("http", "https") and parts.netloc:
        # An alias of Panel's dist folder (see server_kwargs): Panel rewrites any dist_url containing
        # "static/extensions/panel/" relative to the host page once the browser reports its location.
        pn.state.curdoc._template_variables["dist_url"] = f"{parts.scheme}://{parts.netloc}/{PANEL_DIST_ALIAS}/"
