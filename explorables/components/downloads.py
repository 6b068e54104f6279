"""Downloads of an explorable's current state: the trace as CSV and JSON, and a printable worksheet."""

from __future__ import annotations

import io
from collections.abc import Callable
from datetime import date
from html import escape

import panel as pn

from blocktrace.explorables.components.prediction import Prediction
from blocktrace.explorables.components.style import stylesheet
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
    """Three buttons; each file is made from the state at the moment it is clicked."""

    def __init__(self, basename: str, get_trace: Callable[[], Trace], worksheet: Callable[[], str]):
        super().__init__()
        self._trace, self._worksheet = get_trace, worksheet

        def text_file(make: Callable[[], str]) -> Callable[[], io.BytesIO]:
            return lambda: io.BytesIO(make().encode("utf-8"))

        self.csv = pn.widgets.FileDownload(callback=text_file(lambda: to_csv(self._trace())),
                                           filename=f"{basename}-trace.csv", label="Trace (CSV)",
                                           color="light", embed=False)
        self.json = pn.widgets.FileDownload(callback=text_file(lambda: to_json(self._trace())),
                                            filename=f"{basename}-trace.json", label="Trace (JSON)",
                                            color="light", embed=False)
        self.sheet = pn.widgets.FileDownload(callback=text_file(self._worksheet),
                                             filename=f"{basename}-worksheet.html", label="Worksheet (printable)",
                                             color="light", embed=False)

    def __panel__(self):
        return pn.FlexBox(self.csv, self.json, self.sheet, flex_wrap="wrap", sizing_mode="stretch_width")
