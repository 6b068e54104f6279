"""What the block floor's charts show: the tracked word as an arrow in the plane, and attention weights."""

from __future__ import annotations

import math

import numpy as np

from blocktrace.explorables.block_floor.divergence import floor_of, slot, stage_keys, stage_labels
from blocktrace.explorables.block_floor.state import FloorState
from blocktrace.explorables.components.figures import session_colours
from blocktrace.explorables.components.numbers import norm, number, vector
from blocktrace.explorables.components.palette import ChartColours

__all__ = ["arrow_data", "arrow_sentences", "attention_pattern", "attention_sentences", "order_colour",
           "pattern_floor", "plane_limit", "slot_factors"]

LIMIT = 1.5  # the plane shown runs from −1.5 to 1.5 unless a vector is longer
ROOM = 1.35  # the plane reaches this far beyond the longest component: room for the stage label
ORDER_SERIES = (0, 5)  # the two orders' colours (ChartColours.series): blue for the original, vermilion reversed
LABEL_GAP = 6  # px from the arrow's tip to its label


def order_colour(order: int, colours: ChartColours | None = None) -> str:
    """The colour that ties an order's arrow, its card and its heading together (0: original, 1: reversed)."""
    return (colours or session_colours()).series[ORDER_SERIES[order]]


def tip_label(x: float, y: float) -> dict:
    """Where the stage label goes: past the tip, away from the origin, so it crosses neither axis nor arrow."""
    right, up = x >= 0, y >= 0
    return {"align": ["left" if right else "right"], "baseline": ["bottom" if up else "top"],
            "dx": [LABEL_GAP if right else -LABEL_GAP], "dy": [-LABEL_GAP / 2 if up else LABEL_GAP / 2]}


def arrow_data(state: FloorState, trace, position: int) -> tuple[dict, dict]:
    """Current stage (solid) and previous stage (faint) of the tracked word, as arrows from the origin."""
    keys = stage_keys(trace.config.n_layers)
    now = trace[keys[state.stage - 1]][position]
    current = {"x0": [0.0], "y0": [0.0], "x1": [float(now[0])], "y1": [float(now[1])],
               "label": [f"stage {state.stage}"], **tip_label(float(now[0]), float(now[1]))}
    if state.stage > 1:
        before = trace[keys[state.stage - 2]][position]
        previous = {"x0": [0.0], "y0": [0.0], "x1": [float(before[0])], "y1": [float(before[1])],
                    "label": [f"stage {state.stage - 1}"]}
    else:
        previous = {"x0": [], "y0": [], "x1": [], "y1": [], "label": []}
    return current, previous


def plane_limit(state: FloorState) -> float:
    biggest = 0.0
    for _, trace, position in state.traces():
        for key in stage_keys(trace.config.n_layers):
            biggest = max(biggest, float(np.max(np.abs(trace[key][position]))))
    return max(LIMIT, math.ceil(biggest * ROOM * 2) / 2)


def arrow_sentences(state: FloorState, title: str, trace, position: int) -> list[str]:
    labels, keys = stage_labels(trace), stage_keys(trace.config.n_layers)
    now = trace[keys[state.stage - 1]][position]
    angle = number(math.degrees(math.atan2(now[1], now[0])), 0)
    text = (f"{title}: at stage {state.stage}, {labels[state.stage - 1]}, the tracked word "
            f"“{trace.tokens[position]}” (slot {slot(position)}) is {vector(now)}, length {number(norm(now))}, "
            f"angle {angle}°.")
    if state.stage > 1:
        before = trace[keys[state.stage - 2]][position]
        text += f" At the previous stage it was {vector(before)}."
    return [text]


# --- attention weights, labelled by slot as the position vectors are -------------------------

def slot_factors(tokens: list[str]) -> list[str]:
    """Axis labels "p₀ eat", "p₁ an", …: unique even when a word repeats, and the chips' slot names."""
    return [f"{slot(i)} {t}" for i, t in enumerate(tokens)]


def pattern_floor(state: FloorState) -> int:
    """The floor whose attention weights go with the stage on view (stages 1–2: floor 1's)."""
    return floor_of(state.stage)


def attention_pattern(trace, floor: int) -> np.ndarray:
    """The one head's weights of a floor. # -> [pos, key_pos]"""
    return trace[f"blocks.{floor - 1}.attn.pattern"][0]


def attention_sentences(pattern: np.ndarray, tokens: list[str]) -> list[str]:
    """The weights in words, row by row, with each row's sum, naming slots as the axes do."""
    names = slot_factors(tokens)
    out = []
    for i, name in enumerate(names):
        parts = ", ".join(f"{names[j]} {number(pattern[i, j])}" for j in range(len(tokens)))
        out.append(f"Query {name} reads: {parts}; the row sums to {number(pattern[i].sum())}.")
    return out
