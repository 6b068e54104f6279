"""The Embed button: iframe and script-tag snippets that reproduce this explorable's current state."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any
from urllib.parse import urlencode

import panel as pn
from bokeh.embed import server_document

from blocktrace.explorables.components.style import styled
from blocktrace.explorables.components.updates import LiveHTML
from blocktrace.explorables.components.url_state import QueryKey


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


def iframe_snippet(base: str, route: str, query: Mapping[str, str], title: str, height: int = 780) -> str:
    src = f"{base}{route}?" + urlencode({**query, "embed": "1", "predict": "off"})
    return (f'<iframe src="{escape(src)}" title="{escape(title)}" width="100%" height="{height}" '
            'style="border:0" loading="lazy"></iframe>')


def script_snippet(base: str, route: str, query: Mapping[str, str]) -> str:
    return server_document(url=f"{base}{route}", arguments={**query, "embed": "1", "predict": "off"})


class EmbedButton(pn.viewable.Viewer):
    """Shows both snippets for the state the explorable is in when the button is pressed."""

    def __init__(self, state: Any, keys: Mapping[str, QueryKey], route: str, title: str):
        super().__init__()
        self._state, self._keys, self._route, self._title = state, keys, route, title
        self.button = pn.widgets.Button(label="Embed", description="Snippets to put this explorable in another page")
        self.snippets = LiveHTML("", visible=False, **styled(sizing_mode="stretch_width"))
        self.button.on_click(self._toggle)

    def _toggle(self, _event=None) -> None:
        if self.snippets.visible:
            self.snippets.visible = False
            return
        base = server_base()
        query = state_query(self._state, self._keys)
        iframe = iframe_snippet(base, self._route, query, self._title)
        script = script_snippet(base, self._route, query)
        host = base.split("://", 1)[1]
        self.snippets.object = (
            '<div class="bt-card"><h3 class="bt-h3">Embed this explorable, in its current state</h3>'
            "<p>As an iframe:</p>"
            f'<pre class="bt-command"><code>{escape(iframe)}</code></pre>'
            "<p>As a script tag (Bokeh's server_document):</p>"
            f'<pre class="bt-command"><code>{escape(script.strip())}</code></pre>'
            '<p class="bt-muted">The page that embeds it must be allowed by the server: start it with '
            f"<code>blocktrace serve --allow-websocket-origin HOST:PORT</code> (the embedding page's host), and "
            f"make sure students can reach <code>{escape(host)}</code>.</p></div>"
        )
        self.snippets.visible = True

    def __panel__(self):
        return pn.Column(self.button, self.snippets, sizing_mode="stretch_width")
