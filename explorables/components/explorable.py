"""What every explorable's view shares: its session's state, the link's state, the prediction switch, hooks."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

import panel as pn
import param

from blocktrace.explorables.components.prediction import Prediction
from blocktrace.explorables.components.style import styled
from blocktrace.explorables.components.updates import LiveHTML
from blocktrace.explorables.components.url_state import QueryKey, apply_query

__all__ = ["ExplorableView"]



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

    # Embedded (?embed=1), the page is a course page's column, often ~900 px wide and seen ~700 px at a time:
    # the two columns stack and the controls become a wrapping grid, so the controls and the first table
    # are in view together; the save-and-share card goes after the results.

    def gate_row(self, skipped: bool) -> list[pn.viewable.Viewable]:
        """The question beside the diagram it is about (self.gate, self.diagram); with the gate elsewhere (a lesson's
        predict step) or off (only its notes, if any), the diagram's row alone. `skipped`: the gate is off."""
        if self.show_gate and not skipped:
            gate = pn.Column(self.gate, styles={"flex": "0 1 22rem", "min-width": "min(18rem, 100%)"})
            diagram = [pn.Column(*self.diagram.panes, styles={"flex": "1 1 30rem", "min-width": "0"})] \
                if self.diagram.panes else []
            return [pn.FlexBox(gate, *diagram, flex_wrap="wrap", gap="0.5rem" if self.embed else "1rem",
                               sizing_mode="stretch_width")]
        return [*([self.gate] if self.show_gate else []), *self.diagram.panes]

    def side_styles(self) -> dict[str, str]:
        """The flex of the column with the gate and the controls: beside the results, or a full row embedded."""
        return {"flex": "1 1 100%", "min-width": "0"} if self.embed else {"flex": "0 1 22rem", "min-width": "18rem"}

    def main_styles(self, basis: str = "36rem") -> dict[str, str]:
        """The flex of the column with the results (flex-basis `basis` beside the side column)."""
        return {"flex": "1 1 100%" if self.embed else f"1 1 {basis}", "min-width": "0"}

    def control_card(self, heading: pn.viewable.Viewable, *cells: Any) -> pn.Column:
        """The Controls card: one control under another, or embedded a grid of them. A cell is a control
        or a tuple of what belongs together (a field and its error message)."""
        groups = [cell if isinstance(cell, tuple) else (cell,) for cell in cells]
        if not self.embed:
            return pn.Column(heading, *(item for group in groups for item in group),
                             css_classes=["bt-card"], sizing_mode="stretch_width")
        grid = pn.FlexBox(*(pn.Column(*group, margin=0, styles={"flex": "1 1 12rem", "min-width": "11rem"})
                            for group in groups), flex_wrap="wrap", sizing_mode="stretch_width")
        return pn.Column(heading, grid, css_classes=["bt-card"], sizing_mode="stretch_width")

    def notice_panes(self) -> list[pn.viewable.Viewable]:
        """The link's refused values, as notices above the explorable (none when the link was fine)."""
        if not self.notices:
            return []
        html = "".join(f'<p class="bt-notice" role="status">{escape(n)}</p>' for n in self.notices)
        return [LiveHTML(html, **styled(sizing_mode="stretch_width"))]
