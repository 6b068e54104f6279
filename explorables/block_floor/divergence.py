"""The eight stages of one floor for a tracked word, and where two word orders first differ."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from blocktrace.explorables.engine import Trace

# The lesson's eight stages of floor 1, by engine key.
STAGE_KEYS = (
    "embed",
    "blocks.0.resid_pre",
    "blocks.0.ln1.normalized",
    "blocks.0.attn_out",
    "blocks.0.resid_mid",
    "blocks.0.ln2.normalized",
    "blocks.0.mlp_out",
    "blocks.0.resid_post",
)
# Stages 3–8 repeat on every later floor.
FLOOR_LOCAL_KEYS = ("ln1.normalized", "attn_out", "resid_mid", "ln2.normalized", "mlp_out", "resid_post")
MLP_NAMES = {"relu": "ReLU", "gelu": "GELU", "swiglu": "SwiGLU"}
TOLERANCE = 1e-9  # summing in another order may differ in the last bits; real divergence is far larger


def stage_labels(trace: Trace) -> list[str]:
    c = trace.config
    return [
        "Input embedding",
        "+ position vector" if c.positions else "+ position vector (positions off: nothing added)",
        "RMSNorm (before attention)",
        "Attention mixture",
        "+ residual (after attention)",
        "RMSNorm (before MLP)",
        f"MLP ({c.d_model} → {c.d_mlp} → {c.d_model}, {MLP_NAMES[c.mlp]})",
        "+ residual = block output",
    ]


@dataclass(frozen=True)
class Row:
    floor: int  # 1-based
    stage: int  # 1–8
    key: str
    label: str
    vector: np.ndarray


def floor_rows(trace: Trace, position: int) -> list[Row]:
    """The tracked word's vector at every stage: floor 1's eight, then stages 3–8 of each later floor."""
    labels = stage_labels(trace)
    rows = [Row(1, s + 1, key, labels[s], trace[key][position]) for s, key in enumerate(STAGE_KEYS)]
    for layer in range(1, trace.config.n_layers):
        for offset, local in enumerate(FLOOR_LOCAL_KEYS):
            key = f"blocks.{layer}.{local}"
            rows.append(Row(layer + 1, offset + 3, key, f"Floor {layer + 1} · {labels[offset + 2]}",
                            trace[key][position]))
    return rows


def agree(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.allclose(a, b, rtol=0.0, atol=TOLERANCE))


def first_divergence(original: Trace, reversed_: Trace, position: int) -> int | None:
    """The first stage (1–8) of floor 1 where the tracked word differs between the orders, or None.

    position is the word's index in the original phrase; in the reversed phrase it sits at n − 1 − position.
    """
    mirror = len(original.tokens) - 1 - position
    for stage, key in enumerate(STAGE_KEYS, start=1):
        if not agree(original[key][position], reversed_[key][mirror]):
            return stage
    return None


WHY = {
    1: "The word's own embedding differs: that cannot happen for the same word, so check the phrase.",
    2: ("The word sits in a different slot in the reversed phrase, so it receives a different position vector: "
        "the split starts where the slot stamp is added."),
    3: "RMSNorm only rescales the word's own vector, so it cannot start a split by itself.",
    4: ("Attention is the only stage that reads other positions. Reversing the phrase changes which neighbours sit "
        "in which slots, so the keys and values this word mixes change, and so does its attention update."),
    5: "The residual addition only adds this word's own numbers; a split here must have started earlier.",
    6: "RMSNorm works on one position alone; it cannot start a split.",
    7: "The MLP transforms each position alone; it cannot start a split.",
    8: "The final addition only adds this word's own numbers; a split here must have started earlier.",
}
NEVER = ("With positions off and no mask, attention treats the phrase as a bag of words: reordering the rows "
         "reorders every result the same way (permutation symmetry), so the tracked word's numbers are "
         "identical in both orders at every stage.")


def verdict(claim: int | None, truth: int | None) -> tuple[str, str]:
    """(short verdict, explanation) for a claim; claim None means "they never diverge"."""
    if claim == truth:
        return "Right on", WHY[truth] if truth is not None else NEVER
    if truth is None:
        return "Too early", "Step on: compare the two orders at every stage before you claim a split."
    if claim is None or claim > truth:
        return "Too late", "The two traces already differ at an earlier stage. Step back and compare."
    return "Too early", "At this stage the two traces still agree. Step forward and compare again."
