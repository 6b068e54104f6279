"""What the server leaves out of every page, and the checks that stand in for it.

The server's configuration (app/server/routes.py `configure()`) skips Bokeh's per-session document
validation and signature checks and Panel's BrowserInfo, and app/tuning/early_page.py leaves out bokeh-gl.
Each route builds the same kind of document for every student, so checking one of each here covers them all.
"""

from __future__ import annotations

import pytest
from bokeh.core.validation.check import check_integrity
from bokeh.document import Document
from bokeh.settings import settings
from panel.config import config

from blocktrace.app.server.routes import routes
from tests.app.bokeh_ws_client import models, pull_document

ROUTES = routes()


def page_models(path: str) -> set:
    """Every Bokeh model of a route's page, built outside a session (so its figures are placed at once)."""
    return ROUTES[path]().get_root(Document()).references()


@pytest.mark.parametrize("path", sorted(ROUTES))
def test_each_page_passes_bokehs_integrity_checks(path: str) -> None:
    """No Bokeh validation error or warning in a page's models, its figures included."""
    issues = check_integrity(page_models(path))
    assert (issues.error, issues.warning) == ([], [])


@pytest.mark.parametrize("path", sorted(ROUTES))
def test_each_page_registers_callbacks_bokeh_accepts(path: str) -> None:
    """With Bokeh's signature check on, as it is off in served sessions, every callback of a page's
    models (its figures and their tools included) is registered without complaint."""
    before = settings.perform_error_diagnostics()
    settings.perform_error_diagnostics.set_value(True)
    try:
        found = page_models(path)  # each on_change and on_event runs the check; a wrong signature raises
    finally:
        settings.perform_error_diagnostics.set_value(before)
    checked = [m for m in found if getattr(m, "_callbacks", None) or getattr(m, "_event_callbacks", None)]
    assert checked  # Panel registers its own callbacks on every page


def test_served_sessions_skip_the_per_session_checks() -> None:
    """The routes turn Bokeh's per-session validation and signature checks off (the tests above stand in)."""
    assert settings.perform_document_validation() is False
    assert settings.perform_error_diagnostics() is False


@pytest.mark.parametrize("path", sorted(ROUTES))
def test_no_page_draws_with_webgl(path: str) -> None:
    """Pages leave out bokeh-gl.min.js (app/tuning/early_page.py), which only Bokeh figures drawn with WebGL need;
    no page has a Bokeh figure."""
    plots = [m for m in page_models(path) if hasattr(m, "output_backend")]
    # every explorable draws its charts as SVG in the browser (explorables/components/drawn_view): no page has a
    # Bokeh figure left, and none may come back drawn with WebGL
    assert plots == []


@pytest.mark.parametrize("path", ["/", "/explorables/transformer-block-trace", "/lessons/transformer-block"])
def test_served_pages_leave_out_panels_browser_probe(server, path: str) -> None:
    """A served page's document has no BrowserInfo, whose view would open a WebGL context on every load."""

    names = [m["name"].split(".")[-1] for m in models(pull_document(server.url(path)))]
    assert config.browser_info is False
    assert "Column" in names  # the page itself came
    assert "BrowserInfo" not in names
