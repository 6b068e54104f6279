"""What the decoder-block lab's charts draw, as pure functions of the state: the browser draws them
(components/drawn_view/decoder_lab.js) from the numbers payload.py takes from here."""

from __future__ import annotations

import math

import numpy as np

from blocktrace.explorables.components.palette import ChartColours
from blocktrace.explorables.decoder_block_lab.state import VARIANTS, LabState
from blocktrace.explorables.engine import ops

__all__ = ["CURVES", "DEPTH_DASH", "DEPTH_SERIES", "NORM_SERIES", "activation_data", "activation_limit",
           "delta_axis_label", "head_pattern", "position_labels", "preactivations"]


def position_labels(state: LabState) -> list[str]:
    """'0 the', '1 block', …: positions counted from 0, as the Corrupt position control counts them."""
    return [f"{i} {w}" for i, w in enumerate(state.words)]


# --- 2. attention, one heatmap per head ----------------------------------------------------------

def head_pattern(state: LabState, head: int) -> np.ndarray:
    """Batch item 0's weights for one head. # [pos, key_pos]"""
    return state.trace["blocks.0.attn.pattern"][0, head]


# --- 3. norms side by side ---------------------------------------------------------------------

NORM_SERIES = ("input", "RMSNorm", "LayerNorm")


# --- 4. activations -----------------------------------------------------------------------------

CURVES = ("GELU(x)", "SiLU(x) = x·σ(x)", "σ(x): the fraction of x that SiLU passes")


def preactivations(state: LabState) -> np.ndarray:
    """The hidden pre-activations of batch item 0 (SwiGLU's gate, or GELU's input), flattened."""
    return state.trace["blocks.0.mlp.gate"][0].ravel()


def activation_limit(points: np.ndarray) -> float:
    finite = points[np.isfinite(points)]
    biggest = float(np.max(np.abs(finite))) if finite.size else 0.0
    return float(min(max(4.0, math.ceil(biggest * 1.1)), 30.0))


def activation_data(state: LabState) -> tuple[dict, dict]:
    """The three curves over the range the points need, and the points on the active curve."""
    g = preactivations(state)
    limit = activation_limit(g)
    x = np.linspace(-limit, limit, 241)
    curves = {"x": x, "gelu": ops.gelu(x), "silu": ops.silu(x), "sigmoid": ops.sigmoid(x)}
    f = ops.silu if state.mlp == "swiglu" else ops.gelu
    shown = g[np.abs(g) <= limit] if g.size else g
    points = {"x": shown, "y": f(shown)}
    return curves, points


# --- 5. causal safety --------------------------------------------------------------------------------

def delta_axis_label(colours: ChartColours) -> str:
    """What the colours say, in the theme's words (white is exactly 0 only on the light theme)."""
    if colours.zero_cell == "#ffffff":
        return "feature (white = 0, darker = larger, log scale)"
    return "feature (blank = 0, brighter = larger, log)"


# --- 6. depth ------------------------------------------------------------------------------------------

DEPTH_SERIES = dict(zip(VARIANTS, (0, 5, 2, 3), strict=True))  # ChartColours.series index of each variant
DEPTH_DASH = dict(zip(VARIANTS, ("solid", "dashed", "dotted", "dotdash"), strict=True))
