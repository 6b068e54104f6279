"""Four things Panel and Bokeh do for every page before a student can use it that this app does without.

- Panel 1.9 puts es-module-shims on every page: the polyfill its ESM components (JSComponent,
  ReactComponent, AnyWidgetComponent) load their code through. Panel imports that model class
  itself, so the script comes whether a page uses one or not, and on load it runs its feature
  checks (blob modules, a hidden iframe) before the next script may start: about 60 ms of a cold
  page load in headless Chromium on the 2-core test machine. No page here uses an ESM component.
- Bokeh checks every model of each new session's document for integrity problems and only logs
  what it finds. Every session of a route builds the same kind of document.
- Bokeh works out the signature of every callback registered on a model (`perform_error_diagnostics`):
  Panel registers a few thousand per session, about a tenth of the server's time to build one. A
  wrong signature would raise; the callbacks are the same for every session of a route. (The same
  setting also drops Bokeh's "did you mean" hint when code reads a property that does not exist.)
- Panel adds a BrowserInfo model to every served page. When its view starts, it creates a WebGL
  context to learn whether the browser has one (about 20 ms of a cold load in headless Chromium, and
  a GPU start-up on a laptop), then reports the time zone, language and dark-mode preference to
  `pn.state.browser_info`. Nothing here reads them: the theme comes from the page's address.

tests/app/test_first_load.py checks, on every route's document, that there is no ESM component, that
Bokeh's integrity checks find nothing and that every callback signature passes Bokeh's check, so no
per-page step is missed, and that a served page holds no BrowserInfo.
"""

from __future__ import annotations

from bokeh.settings import settings
from panel.config import config
from panel.models.esm import ReactiveESM


def apply() -> None:
    """Install once (idempotent)."""
    ReactiveESM.__javascript_raw__ = []
    settings.perform_document_validation.set_value(False)
    settings.perform_error_diagnostics.set_value(False)
    config.browser_info = False
