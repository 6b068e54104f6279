"""The block trace's tables as HTML: the eight stages, the comparison with the default block, SwiGLU."""

from __future__ import annotations

import numpy as np

from blocktrace.explorables.components.html import table
from blocktrace.explorables.transformer_block_trace import quantities
from blocktrace.explorables.transformer_block_trace.state import ROW_KEYS, TraceState

__all__ = ["baseline_table_html", "stage_table_html", "swiglu_table_html"]


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


def baseline_table_html(state: TraceState) -> str:
    header = ["Stage", "default block ‖·‖", "this run ‖·‖", "‖difference‖"]
    body = []
    for key in ROW_KEYS:
        now, then = state.trace[key][0], state.baseline[key][0]
        body.append((state.trace.stage(key).label,
                     [float(np.linalg.norm(then)), float(np.linalg.norm(now)), float(np.linalg.norm(now - then))],
                     {"plain": (0, 1, 2)}))
    caption = "Compared with the default block (scale 1, residuals added, RMSNorm) on the same input"
    return f'<div class="bt-table-wrap">{table(caption, header, body, "baseline-table")}</div>'


def swiglu_table_html(state: TraceState) -> str:
    parts = quantities.swiglu_parts(state)
    header = ["Hidden unit", *quantities.SWIGLU_SERIES]
    body = [(f"h{i}", [float(parts[name][i]) for name in quantities.SWIGLU_SERIES], {})
            for i in range(len(parts["gate"]))]
    return f'<div class="bt-table-wrap">{table("SwiGLU detail", header, body, "swiglu-table")}</div>'
