"""The Embed button: iframe and script-tag snippets that reproduce this explorable's current state.

Both snippets load static/js/embed-host.js from this server: it sizes each iframe to the height its page
posts (static/js/embed-frame.js, loaded by the embedded page), and in a placeholder or above an iframe says
which `--allow-websocket-origin` the server needs when it does not accept the page (app/server/embed_check.py).

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
from bokeh.models import CustomJS

from blocktrace.explorables.components.prediction import Prediction
from blocktrace.explorables.components.snippet_dialog import SnippetDialog
from blocktrace.explorables.components.url_state import QueryKey, session_query

__all__ = ["FRAME_SCRIPT", "HOST_SCRIPT", "IFRAME_HEIGHT", "MARK", "EmbedButton", "frame_height_script",
           "gate_arguments", "iframe_snippet", "is_script_tag_session", "script_snippet", "server_base", "state_query"]

GATE_KEYS = ("predict", "predict_until", "predict_sig")  # the teacher's signed link (predict_links.py)
IFRAME_HEIGHT = 700  # px before the explorable reports its own height, and for ever without JavaScript
HOST_SCRIPT = "/assets/js/embed-host.js"  # what the host page loads from us: sizes iframes, explains refusals
FRAME_SCRIPT = "/assets/js/embed-frame.js"  # what an embedded page loads: posts its height to its parent
MARK = "data-blocktrace-embed"  # the attribute embed-host.js finds our iframes and placeholders by
LOAD_FRAME_SCRIPT_JS = """
if (window.parent !== window && !document.querySelector("script[data-blocktrace-frame]")) {
  const script = document.createElement("script");
  script.src = src;
  script.dataset.blocktraceFrame = "";
  document.head.appendChild(script);
}
"""


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


def iframe_snippet(base: str, route: str, query: Mapping[str, str], title: str, height: int = IFRAME_HEIGHT) -> str:
    """An iframe of the explorable, and the script from our server that sizes it to its content.

    Without the script (or JavaScript) the iframe keeps `height` and scrolls inside."""
    src = f"{base}{route}?" + urlencode({**query, "embed": "1"})
    return (f'<iframe src="{escape(src)}" title="{escape(title)}" width="100%" height="{height}" '
            f'style="border:0;width:100%" loading="lazy" {MARK}="iframe"></iframe>\n'
            f'<script src="{escape(base + HOST_SCRIPT)}" defer></script>')


def script_snippet(base: str, route: str, query: Mapping[str, str]) -> str:
    """Bokeh's server_document tag inside a placeholder, with the script from our server that says in
    the placeholder what to change when the server does not accept the page (or cannot be reached)."""
    tag = server_document(url=f"{base}{route}", arguments={**query, "embed": "1"}).strip()
    return (f'<div {MARK}="script" data-blocktrace-server="{escape(base)}">\n'
            f'<script src="{escape(base + HOST_SCRIPT)}" defer></script>\n{tag}\n</div>')


def frame_height_script() -> CustomJS:
    """For an embedded page (?embed=1, in an iframe): loads the script that reports its height to the page
    framing it. A script-tag embed gets none: it is part of the host page already."""
    return CustomJS(args={"src": FRAME_SCRIPT}, code=LOAD_FRAME_SCRIPT_JS)


def is_script_tag_session() -> bool:
    """Whether this session was opened by Bokeh's autoload.js (a script-tag embed), not as a page."""
    return "bokeh-autoload-element" in (pn.state.session_args or {})


class EmbedButton(pn.viewable.Viewer):
    """Opens the Embed dialog with both snippets for the state the explorable is in when it is pressed."""

    def __init__(self, state: Any, keys: Mapping[str, QueryKey], route: str, title: str,
                 prediction: Prediction | None = None):
        super().__init__()
        self._state, self._keys, self._route, self._title = state, keys, route, title
        self._prediction = prediction
        self.button = pn.widgets.Button(label="Embed", description="Snippets to put this explorable in another page")
        self.dialog = SnippetDialog(margin=0, height=0, sizing_mode="stretch_width")
        self.button.on_click(self._open)

    def _open(self, _event=None) -> None:
        base = server_base()
        gate = gate_arguments(self._prediction)
        query = {**state_query(self._state, self._keys), **gate}
        host = base.split("://", 1)[1]
        self.dialog.texts = dict(
            iframe=iframe_snippet(base, self._route, query, self._title),
            script=script_snippet(base, self._route, query),
            gate_note=("Like this page, the embedded explorable opens without the prediction step." if gate else
                       "The embedded explorable asks for a prediction first, as here. For a copy without that "
                       "step, take the iframe from the teacher's page (/teacher)."),
            server_note=(f"The page that embeds it must be allowed by the server: start it with blocktrace serve "
                         f"--allow-websocket-origin HOST:PORT (the embedding page's host and port), and make sure "
                         f"students can reach {host}."),
        )
        self.dialog.opened += 1

    def __panel__(self):
        return pn.Column(self.button, self.dialog, sizing_mode="stretch_width")
