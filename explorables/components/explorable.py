"""What every explorable's view shares: its session's state, the link's state, the prediction switch, hooks."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

import panel as pn
import param

from .control_events import apply_directly
from .prediction import Prediction
from .style import styled
from .updates import LiveHTML, batched
from .url_state import QueryKey, apply_query

CONTROL_DEBOUNCE_MS = 10


class ExplorableView(pn.viewable.Viewer):
    """Base of the three explorables: each session builds one, with its own state, widgets and models."""

    def __init__(self, state: param.Parameterized, prediction: Prediction, keys: Mapping[str, QueryKey],
                 query: Mapping[str, str] | None, embed: bool, predict: bool, batch_query: bool = False):
        super().__init__()
        self.state = state
        if batch_query:  # apply the whole link before any derived value is recomputed
            with param.parameterized.batch_call_watchers(state):
                self.notices = apply_query(state, keys, query or {})
        else:
            self.notices = apply_query(state, keys, query or {})
        prediction.skipped = not predict
        self.embed = embed
        self.show_gate = True  # a lesson page may place the gate elsewhere (its predict directive)
        self.emit: Any = lambda kind, payload: None  # the page connects this to the classroom store

    def respond_quickly(self, widgets) -> None:
        """Let these controls reach the server sooner, and answer each change with one message.

        Panel holds each change 50 ms to merge a burst (a slider drag); 10 ms still merges a drag's
        events while taking most of the wait out of every click and key press. Everything one change
        sets off (the views, the link in the address bar, the classroom notice) is sent to the browser
        as one update instead of one per watcher, and the change is applied without Panel's
        bookkeeping that we do not use (see control_events).
        """
        for widget in widgets:
            widget._debounce = CONTROL_DEBOUNCE_MS
            apply_directly(widget, wrap=batched)

    def notice_panes(self) -> list[pn.viewable.Viewable]:
        """The link's refused values, as notices above the explorable (none when the link was fine)."""
        if not self.notices:
            return []
        html = "".join(f'<p class="bt-notice" role="status">{escape(n)}</p>' for n in self.notices)
        return [LiveHTML(html, **styled(sizing_mode="stretch_width"))]
