"""No es-module-shims on the pages (upstream: app/tuning/UPSTREAM.md, "first_load").

Panel 1.9 and 1.10 put es-module-shims on every page: the polyfill its ESM components (JSComponent,
ReactComponent, AnyWidgetComponent) load their code through. Panel imports that model class itself,
so the script comes whether a page uses one or not, and on load it runs its feature checks (blob
modules, a hidden iframe) before the next script may start: about 60 ms of a cold page load in
headless Chromium on the 2-core test machine. No page here uses an ESM component.

The public settings this module once also set (no BrowserInfo, no per-session validation and
signature checks) are the server's configuration now: `configure()` in app/server/routes.py.

tests/app/test_first_load.py checks that no route's document holds an ESM component and that a
served page does not load the polyfill.
"""

from __future__ import annotations

from panel.models.esm import ReactiveESM


def apply() -> None:
    """Install once (idempotent)."""
    ReactiveESM.__javascript_raw__ = []
