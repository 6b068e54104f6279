"""Text alternatives and announcements, generated from the numbers the plots show."""

from __future__ import annotations

import numpy as np

from blocktrace.explorables.components.numbers import number
from blocktrace.explorables.transformer_block_trace.quantities import SHORT, swiglu_parts
from blocktrace.explorables.transformer_block_trace.state import ROW_KEYS, TraceState

__all__ = ["announcement", "component_sentences", "norm_sentences", "swiglu_sentences"]


def norm_sentences(state: TraceState) -> list[str]:
    norms = {SHORT[k]: float(np.linalg.norm(state.trace[k][0])) for k in ROW_KEYS}
    listing = "; ".join(f"{name} {number(value)}" for name, value in norms.items())
    first, last = norms["input"], norms["output"]
    ratio = f"{number(last / first, 2)} times" if first > 0 else "compared with a zero"
    return [
        f"Norm at each stage: {listing}.",
        f"The output's norm is {number(last)}, {ratio} the input's norm {number(first)} (the dotted reference line).",
    ]


def component_sentences(state: TraceState) -> list[str]:
    stage = state.trace.stage(state.inspect)
    values = stage.values[0]
    listed = ", ".join(number(v, signed=True) for v in values)
    positive = int(np.sum(values > 0))
    negative = int(np.sum(values < 0))
    return [f"{stage.label}: {len(values)} components, {listed}. {positive} positive, {negative} negative."]


def swiglu_sentences(state: TraceState) -> list[str]:
    parts = swiglu_parts(state)
    gate, product = parts["gate"], parts["SiLU(gate) × value"]
    units = []
    for i in range(len(gate)):
        units.append(f"h{i}: gate {number(gate[i], signed=True)}, SiLU {number(parts['SiLU(gate)'][i], signed=True)}, "
                     f"value {number(parts['value'][i], signed=True)}, product {number(product[i], signed=True)}")
    closed = int(np.sum(np.abs(parts["SiLU(gate)"]) < 0.05))
    return ["; ".join(units) + ".",
            f"{closed} of {len(gate)} gates are nearly closed (|SiLU(gate)| < 0.05); "
            "those units pass less than 5 % of their value."]


def announcement(state: TraceState) -> str:
    """One line for the live region after each change, e.g. "Output norm 3.120, input kept."."""
    out = float(np.linalg.norm(state.trace["blocks.0.resid_post"][0]))
    lost = state.lost_at()
    if lost is None:
        kept = "input kept on the identity path" if state.input_kept() else "input changed"
    else:
        kept = f"input lost at “{state.trace.stage(lost).label}”"
    return f"Output norm {number(out)}, {kept}."
