"""The Embed button: iframe and script-tag snippets that reproduce this explorable's current state.

An embedded explorable asks for a prediction first, like any page a student opens. Only a page opened
from the teacher's signed link (app/server/predict_links.py) hands that link's `predict=off` and its
signature on to its snippets: the server checks the signature again when the embedded page is opened.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any
from urllib.parse import urlencode

import panel as pn
from bokeh.embed import server_document

from blocktrace.explorables.components.prediction import Prediction
from blocktrace.explorables.components.style import styled
from blocktrace.explorables.components.updates import LiveHTML
from blocktrace.explorables.components.url_state import QueryKey, session_query

GATE_KEYS = ("predict", "predict_sig")  # the teacher's link's switch and signature (app/server/predict_links.py)


def state_query(state: Any, keys: Mapping[str, QueryKey]) -> dict[str, str]:
    return {name: spec.write(getattr(state, spec.param)) for name, spec in keys.items()}


def server_base() -> str:
    """scheme://host[:port] of this server as the browser reached it, e.g. http://10.0.0.5:5006."""
    host, scheme = "localhost:5006", "http"
    ctx = getattr(pn.state.curdoc, "session_context", None) if pn.state.curdoc else None
    request = getattr(ctx, "request", None)
    if request is not None:
        host = request.headers.get("Host", host)
    location = pn.state.location
    if location is not None and location.protocol:
        scheme = location.protocol.rstrip(":")
    return f"{scheme}://{host}"


def gate_arguments(prediction: Prediction | None) -> dict[str, str]:
    """This page's predict=off and signature, when its gate is off (the server accepted them); else none."""
    if prediction is None or not prediction.skipped:
        return {}
    query = session_query()
    return {key: query[key] for key in GATE_KEYS if key in query}


def iframe_snippet(base: str, route: str, query: Mapping[str, str], title: str, height: int = 780) -> str:
    src = f"{base}{route}?" + urlencode({**query, "embed": "1"})
    return (f'<iframe src="{escape(src)}" title="{escape(title)}" width="100%" height="{height}" '
            'style="border:0" loading="lazy"></iframe>')


def script_snippet(base: str, route: str, query: Mapping[str, str]) -> str:
    return server_document(url=f"{base}{route}", arguments={**query, "embed": "1"})


class EmbedButton(pn.viewable.Viewer):
    """Shows both snippets for the state the explorable is in when the button is pressed."""

    def __init__(self, state: Any, keys: Mapping[str, QueryKey], route: str, title: str,
                 prediction: Prediction | None = None):
        super().__init__()
        self._state, self._keys, self._route, self._title = state, keys, route, title
        self._prediction = prediction
        self.button = pn.widgets.Button(label="Embed", description="Snippets to put this explorable in another page")
        self.snippets = LiveHTML("", visible=False, **styled(sizing_mode="stretch_width"))
        self.button.on_click(self._toggle)

    def _toggle(self, _event=None) -> None:
        if self.snippets.visible:
            self.snippets.visible = False
            return
        base = server_base()
        gate = gate_arguments(self._prediction)
        query = {**state_query(self._state, self._keys), **gate}
        iframe = iframe_snippet(base, self._route, query, self._title)
        script = script_snippet(base, self._route, query)
        host = base.split("://", 1)[1]
        gate_note = ("Like this page, the embedded explorable opens without the prediction step." if gate else
                     "The embedded explorable asks for a prediction first, as here. For a copy without that step, "
                     "take the iframe from the teacher's page (/teacher).")
        self.snippets.object = (
            '<div class="bt-card"><h3 class="bt-h3">Embed this explorable, in its current state</h3>'
            "<p>As an iframe:</p>"
            f'<pre class="bt-command"><code>{escape(iframe)}</code></pre>'
            "<p>As a script tag (Bokeh's server_document):</p>"
            f'<pre class="bt-command"><code>{escape(script.strip())}</code></pre>'
            f'<p class="bt-muted">{escape(gate_note)}</p>'
            '<p class="bt-muted">The page that embeds it must be allowed by the server: start it with '
            f"<code>blocktrace serve --allow-websocket-origin HOST:PORT</code> (the embedding page's host), and "
            f"make sure students can reach <code>{escape(host)}</code>.</p></div>"
        )
        self.snippets.visible = True

    def __panel__(self):
        return pn.Column(self.button, self.snippets, sizing_mode="stretch_width")
