"""The block trace's stage table as HTML, for the printable worksheet (the page draws its tables in the browser)."""

from __future__ import annotations

import numpy as np

from blocktrace.explorables.components.html import table
from blocktrace.explorables.transformer_block_trace.state import TraceState

__all__ = ["stage_table_html"]


def stage_table_html(state: TraceState) -> str:
    rows = state.rows()
    width = max(len(v) for _, _, v in rows)
    header = ["Stage", *[f"x{i}" for i in range(width)], "‖·‖"]
    lost = state.lost_at()
    body = []
    for key, label, vector in rows:
        numbers = [float(v) for v in vector] + [None] * (width - len(vector)) + [float(np.linalg.norm(vector))]
        opts = {"plain": (width,)}
        if key == lost:
            opts.update(note="input lost here", **{"class": "lost"})
        if key == state.inspect:
            opts["current"] = True
            opts["class"] = (opts.get("class", "") + " current").strip()
        body.append((label, numbers, opts))
    caption = "One forward pass, stage by stage (rows are stages of one token, not separate tokens)"
    return f'<div class="bt-table-wrap">{table(caption, header, body, "stage-table")}</div>'
