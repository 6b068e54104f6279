"""The numbers the block trace's views show, worked out from the state: no figures, tables or words here.

Data flow one way: state -> quantities -> tables, words (describe) -> payload.py -> the browser draws.
"""

from __future__ import annotations

import numpy as np

from blocktrace.explorables.engine import ops
from blocktrace.explorables.transformer_block_trace.state import TraceState

__all__ = ["SHORT", "SWIGLU_SERIES", "swiglu_parts"]

SHORT = {
    "blocks.0.resid_pre": "input",
    "blocks.0.ln1.normalized": "norm 1",
    "blocks.0.attn_out": "attn update",
    "blocks.0.resid_mid": "add 1",
    "blocks.0.ln2.normalized": "norm 2",
    "blocks.0.mlp.hidden": "SwiGLU hidden",
    "blocks.0.mlp_out": "MLP update",
    "blocks.0.resid_post": "output",
}
SWIGLU_SERIES = ("gate", "SiLU(gate)", "value", "SiLU(gate) × value")


def swiglu_parts(state: TraceState) -> dict[str, np.ndarray]:
    gate = state.trace["blocks.0.mlp.gate"][0]
    value = state.trace["blocks.0.mlp.value"][0]
    return {"gate": gate, "SiLU(gate)": ops.silu(gate), "value": value, "SiLU(gate) × value": ops.silu(gate) * value}
