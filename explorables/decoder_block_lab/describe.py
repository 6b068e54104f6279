"""Text alternatives and announcements, generated from the numbers the plots show."""

from __future__ import annotations

import math

import numpy as np

from blocktrace.explorables.components.palette import signed
from blocktrace.explorables.decoder_block_lab import plots
from blocktrace.explorables.decoder_block_lab.state import VARIANTS, LabState
from blocktrace.explorables.decoder_block_lab.tables import VARIANT_NAMES


def _num(v: float, digits: int = 3) -> str:
    return "NaN" if math.isnan(v) else f"{v:.{digits}g}"


def head_sentences(state: LabState, head: int) -> list[str]:
    """Head h's weights row by row, with each row's sum (positions counted from 0)."""
    pattern = plots.head_pattern(state, head)
    words = state.words
    out = [f"Head {head} of {state.heads}, batch item 0."]
    for i, row in enumerate(pattern):
        parts = ", ".join(f"{j} {words[j]} {_num(float(row[j]))}" for j in range(len(words)))
        out.append(f"Position {i} ({words[i]}) reads: {parts}; the row sums to {_num(float(row.sum()), 4)}.")
    return out


def norms_sentences(state: LabState) -> list[str]:
    rows = state.normalised()
    out = []
    for name, v in rows.items():
        listed = ", ".join("NaN" if math.isnan(float(x)) else signed(float(x)) for x in v)
        rms = float(np.sqrt(np.mean(v * v)))
        out.append(f"{name}: {listed} (mean {_num(float(np.mean(v)))}, RMS {_num(rms)}).")
    out.append(norms_verdict(state))
    return out


def norms_verdict(state: LabState) -> str:
    """One sentence on what the two norms did to this vector."""
    rows = state.normalised()
    x, rms_out, ln_out = rows["input"], rows["RMSNorm"], rows["LayerNorm"]
    eps = float(state.norm_eps)
    if np.any(np.isnan(rms_out)) or np.any(np.isnan(ln_out)):
        which = " and ".join(n for n, v in (("RMSNorm", rms_out), ("LayerNorm", ln_out)) if np.any(np.isnan(v)))
        return (f"{which} returned NaN: with eps = {eps:g} the divisor is sqrt(0) = 0, and 0 / 0 is not a number. "
                "A small eps keeps the division defined.")
    if x.size > 1 and np.all(x == x[0]) and x[0] != 0:
        return ("A constant vector: RMSNorm keeps it (every component becomes ±1), while LayerNorm subtracts the mean "
                "and is left with zeros: centring erases a vector with no differences in it.")
    if not np.any(x):
        return "The zero vector stays zero under both norms while eps > 0: there is nothing to rescale."
    rms = float(np.sqrt(np.mean(rms_out * rms_out)))
    return (f"RMSNorm only rescales: the output points the same way as the input, with RMS {rms:.3f}. "
            f"LayerNorm first moves the mean ({float(np.mean(x)):.3f}) to 0, so its output points elsewhere.")


def activation_sentences(state: LabState) -> list[str]:
    g = plots.preactivations(state)
    name = "SwiGLU gate" if state.mlp == "swiglu" else "GELU input"
    curve = "SiLU" if state.mlp == "swiglu" else "GELU"
    out = ["Three curves from the left, where all are near 0, to the right: GELU and SiLU both approach the line "
           "y = x for large positive x and dip slightly below 0 for negative x; σ rises from 0 to 1."]
    if g.size == 0 or np.all(np.isnan(g)):
        out.append(f"This trace's {name} values are NaN, so no dots are drawn.")
        return out
    finite = g[np.isfinite(g)]
    negative = int(np.sum(finite < 0))
    f = plots.activation_data(state)[1]["y"]
    nearly_closed = int(np.sum(np.abs(f) < 0.05))
    out.append(f"{g.size} dots: the {name} values of batch item 0, from {finite.min():.2f} to {finite.max():.2f}, "
               f"drawn on the {curve} curve. {negative} are negative; {nearly_closed} give an output within 0.05 of 0.")
    return out


def delta_sentences(state: LabState) -> list[str]:
    per_pos = np.max(state.delta, axis=-1)
    parts = "; ".join(f"position {i} ({state.words[i]}): largest change {_num(float(v))}"
                      for i, v in enumerate(per_pos))
    return [f"Position {state.corrupt} was set to {state.corrupt_value:g} in every feature. {parts}.",
            state.verdict().text]


def depth_sentences(state: LabState) -> list[str]:
    out = [f"{state.blocks} blocks at width {state.depth_d}, four variants; the thick line is the current choice."]
    for v in VARIANTS:
        p = state.depth[v]
        rms, grad = p["resid_rms"], p["grad_norm"]
        out.append(f"{VARIANT_NAMES[v]}: stream RMS {_num(float(rms[0]))} entering block 1 and "
                   f"{_num(float(rms[-1]))} at the output; gradient norm 1 at the output and "
                   f"{_num(float(grad[0]))} at block 1's input.")
    return out


def announcement(state: LabState) -> str:
    """One line for the live region after each change."""
    found = state.invariants()
    n_pass = sum(c.ok for c in found)
    grad = float(state.depth[(state.placement, state.residual)]["grad_norm"][0])
    causal = f"causal test {state.verdict().badge}; " if state.prediction.unlocked else ""
    return (f"Output {list(state.trace.output.shape)}; {n_pass} of {len(found)} invariants hold; {causal}"
            f"gradient at block 1's input {_num(grad)} ({VARIANT_NAMES[(state.placement, state.residual)]}, "
            f"{state.blocks} blocks).")
