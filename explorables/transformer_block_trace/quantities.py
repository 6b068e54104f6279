"""The numbers the block trace's views show, worked out from the state: no figures, tables or words here.

Data flow one way: state -> quantities -> tables, words (describe) -> renderings -> plots and the view.
"""

from __future__ import annotations

import numpy as np

from blocktrace.explorables.components.numbers import number
from blocktrace.explorables.components.palette import sign_colour
from blocktrace.explorables.engine import ops
from blocktrace.explorables.transformer_block_trace.state import ROW_KEYS, TraceState

__all__ = ["SHORT", "STAGE_FACTORS", "SWIGLU_SERIES", "component_data", "norm_data", "swiglu_data", "swiglu_parts"]

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
STAGE_FACTORS = tuple(SHORT[k] for k in ROW_KEYS)


def norm_data(state: TraceState) -> tuple[dict, dict, float]:
    """Current and baseline ‖·‖ per stage, and the input's norm (the reference line)."""
    stages = list(STAGE_FACTORS)
    current = [float(np.linalg.norm(state.trace[k][0])) for k in ROW_KEYS]
    baseline = [float(np.linalg.norm(state.baseline[k][0])) for k in ROW_KEYS]
    text = [number(v) for v in current]
    return (
        {"stage": stages, "norm": current, "text": text},
        {"stage": stages, "norm": baseline},
        current[0],
    )


def component_data(state: TraceState) -> dict:
    values = state.trace[state.inspect][0]
    letter = "h" if state.inspect == "blocks.0.mlp.hidden" else "x"
    names = [f"{letter}{subscript(i)}" for i in range(len(values))]
    return {
        "component": names,
        "value": [float(v) for v in values],
        "colour": [sign_colour(float(v)) for v in values],
        "label": [number(v, signed=True) for v in values],
        "label_y": [float(v) for v in values],
        "baseline": ["bottom" if v >= 0 else "top" for v in values],
    }


def subscript(i: int) -> str:
    return str(i).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))


def swiglu_parts(state: TraceState) -> dict[str, np.ndarray]:
    gate = state.trace["blocks.0.mlp.gate"][0]
    value = state.trace["blocks.0.mlp.value"][0]
    return {"gate": gate, "SiLU(gate)": ops.silu(gate), "value": value, "SiLU(gate) × value": ops.silu(gate) * value}


def swiglu_data(state: TraceState) -> dict:
    parts = swiglu_parts(state)
    units = [f"h{subscript(i)}" for i in range(len(parts["gate"]))]
    data: dict = {"unit": units}
    for n, name in enumerate(SWIGLU_SERIES):
        data[f"s{n}"] = [float(v) for v in parts[name]]
    return data
