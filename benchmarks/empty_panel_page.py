"""The baseline page of benchmarks/latency.py: an empty Panel page, one text field and one table.

Served by plain `panel serve benchmarks/empty_panel_page.py` (stock Panel and Bokeh, nothing of blocktrace).
It holds what benchmarks/latency.py waits for on the block trace before calling that page interactive, and
nothing more: a text field labelled "Input vector" (Panel's TextInput) and a table of class "stage-table"
(an HTML pane, as the block trace draws its stage table), so both pages are timed by the same probe.
"""

import panel as pn

ROWS = (("input", "1.00, -0.50, 0.25, 2.00"), ("output", "1.00, -0.50, 0.25, 2.00"))

table = ('<table class="stage-table"><thead><tr><th>stage</th><th>vector</th></tr></thead><tbody>'
         + "".join(f"<tr><td>{stage}</td><td>{vector}</td></tr>" for stage, vector in ROWS) + "</tbody></table>")
pn.Column(
    pn.widgets.TextInput(name="Input vector", value=ROWS[0][1]),
    pn.pane.HTML(table),
).servable(title="Empty Panel page")
