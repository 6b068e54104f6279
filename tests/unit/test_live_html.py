"""LiveHTML, tuned (app/tuning/live_html.py): after a change its Bokeh model holds what Panel's own HTML pane would
hold, and only the text moved."""

from __future__ import annotations

import panel as pn
import pytest
from bokeh.document import Document

from blocktrace.app.tuning import live_html
from blocktrace.explorables.components.style import styled
from blocktrace.explorables.components.updates import LiveHTML

SAMPLES = ["<p>plain</p>", '<p class="x">a &amp; b <script>alert(1)</script></p>', "",
           "<table><tr><td>1</td></tr></table>"]


@pytest.fixture(autouse=True)
def tuned() -> None:
    live_html.apply()  # idempotent; what a tuned server applies at start


def rendered(pane: pn.pane.HTML):
    doc = Document()
    return pane.get_root(doc)


def sheets(model) -> list[str]:
    return [s if isinstance(s, str) else getattr(s, "url", None) or getattr(s, "css", "") for s in model.stylesheets]


def test_live_html_model_matches_panels_html_pane_after_each_change():
    live, plain = LiveHTML("<p>start</p>", **styled()), pn.pane.HTML("<p>start</p>", **styled())
    live_model, plain_model = rendered(live), rendered(plain)
    for html in SAMPLES:
        live.object = html
        plain.object = html
        assert live_model.text == plain_model.text
        assert sheets(live_model) == sheets(plain_model)


def test_a_change_sets_the_text_and_nothing_else():
    pane = LiveHTML("<p>start</p>", **styled())
    model = rendered(pane)
    changed: list[str] = []
    for name in model.properties():
        model.on_change(name, lambda attr, old, new: changed.append(attr))
    pane.object = "<p>next</p>"
    assert changed == ["text"]
    assert "next" in model.text


def test_visibility_still_follows_panels_path():
    pane = LiveHTML("<p>x</p>")
    model = rendered(pane)
    pane.visible = False
    assert model.visible is False

