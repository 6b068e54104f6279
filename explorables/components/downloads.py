"""Downloads of an explorable's current state: the trace as CSV and JSON, and a printable worksheet."""

from __future__ import annotations

import io
from collections.abc import Callable
from datetime import date
from html import escape

import panel as pn

from blocktrace.explorables.components.prediction import GATE_EVENTS, Prediction
from blocktrace.explorables.components.style import styled, stylesheet
from blocktrace.explorables.components.updates import batched
from blocktrace.explorables.engine import Trace
from blocktrace.explorables.engine.export import to_csv, to_json

__all__ = ["Downloads", "worksheet_html"]

PRINT_CSS = """
@media print { .no-print { display: none; } body { margin: 1cm; } }
body { font-family: system-ui, "DejaVu Sans", sans-serif; max-width: 48rem; margin: 1.5rem auto; color: #111; }
.lines p { border-bottom: 1px solid #999; height: 1.6rem; margin: 0; }
"""


def worksheet_html(title: str, link: str, prediction: Prediction, tables: list[str], prompt: str) -> str:
    """One printable page: the student's prediction, the link back to this state, the stage table(s)."""
    if prediction.committed:
        said = escape(prediction.choices[prediction.choice])
        note = f"<br>Reasoning: {escape(prediction.note)}" if prediction.note else ""
        predicted = f"<p><strong>My prediction:</strong> {said}{note}</p>"
    else:
        predicted = "<p><strong>My prediction:</strong> (not committed)</p>"
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>Worksheet · {escape(title)}</title><style>{stylesheet()}{PRINT_CSS}</style></head><body>"
        f'<h1 class="bt-title">{escape(title)} — worksheet</h1>'
        f'<p class="bt-muted">{date.today().isoformat()} · Name: ____________________</p>'
        f"{predicted}"
        f'<p><strong>The state I explored:</strong> <a href="{escape(link)}">{escape(link)}</a></p>'
        f"{''.join(tables)}"
        f"<h2 class=\"bt-h2\">{escape(prompt)}</h2><div class=\"lines\">{'<p></p>' * 6}</div>"
        '<p class="no-print bt-muted">Print this page (Ctrl+P) or save it as PDF.</p></body></html>'
    )


class Downloads(pn.viewable.Viewer):
    """Three buttons; each file is made from the state at the moment it is clicked.

    With a `gate`, the buttons are hidden behind `note` until it is unlocked, and until then they have no file
    to give: a click sent by a crafted message makes nothing (the server decides, not the button's visibility).
    They are in the page's document from the start, so the unlock changes properties only: putting them in then
    made Bokeh walk every model of the page again, the largest part of a commit's cost in a class of 100.
    """

    def __init__(self, basename: str, get_trace: Callable[[], Trace], worksheet: Callable[[], str],
                 gate: Prediction | None = None, note: str = ""):
        super().__init__()
        self._trace, self._worksheet, self._gate = get_trace, worksheet, gate

        def text_file(make: Callable[[], str]) -> Callable[[], io.BytesIO]:
            return lambda: io.BytesIO(make().encode("utf-8"))

        self._makers = {
            "csv": text_file(lambda: to_csv(self._trace())),
            "json": text_file(lambda: to_json(self._trace())),
            "sheet": text_file(self._worksheet),
        }
        self.csv = pn.widgets.FileDownload(filename=f"{basename}-trace.csv", label="Trace (CSV)",
                                           color="light", embed=False)
        self.json = pn.widgets.FileDownload(filename=f"{basename}-trace.json", label="Trace (JSON)",
                                            color="light", embed=False)
        self.sheet = pn.widgets.FileDownload(filename=f"{basename}-worksheet.html", label="Worksheet (printable)",
                                             color="light", embed=False)
        self.buttons = pn.FlexBox(self.csv, self.json, self.sheet, flex_wrap="wrap", sizing_mode="stretch_width")
        self.note = pn.pane.HTML(f'<p class="bt-muted bt-locked">{escape(note)}</p>', visible=False,
                                 **styled(sizing_mode="stretch_width"))
        self._follow_gate()
        if gate is not None:
            gate.param.watch(self._follow_gate, GATE_EVENTS)

    @property
    def open(self) -> bool:
        """Whether the files can be downloaded now."""
        return self._gate is None or self._gate.unlocked

    @batched
    def _follow_gate(self, *_events) -> None:
        open_ = self.open
        for name, widget in (("csv", self.csv), ("json", self.json), ("sheet", self.sheet)):
            widget.callback = self._makers[name] if open_ else None
        if self.buttons.visible != open_:
            self.buttons.visible = open_
        if self.note.visible == open_:
            self.note.visible = not open_

    def __panel__(self):
        return pn.Column(self.note, self.buttons, sizing_mode="stretch_width")
