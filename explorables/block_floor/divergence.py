"""The stages of the floors for a tracked word, where two word orders first differ, and why there.

Stages are numbered across floors, as the stage stepper counts them: floor 1 has stages 1–8
(embedding, + position vector, then its six), and each later floor adds six more (9–14 on floor 2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from blocktrace.explorables.engine import Trace

__all__ = ["BEFORE_FLOORS", "FLOOR_LOCAL_KEYS", "MLP_NAMES", "agree", "agree_at", "first_divergence", "floor_of",
           "floor_rows", "never_reason", "slot", "split_reason", "stage_count", "stage_keys", "stage_labels",
           "stage_names", "verdict"]

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
BEFORE_FLOORS = 2  # stages 1 and 2 come before the first floor's sublayers
MLP_NAMES = {"relu": "ReLU", "gelu": "GELU", "swiglu": "SwiGLU"}
TOLERANCE = 1e-9  # summing in another order may differ in the last bits; real divergence is far larger
SUBSCRIPT = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def slot(index: int) -> str:
    """A slot's name as the lesson writes its position vector: p₀, p₁, …"""
    return "p" + str(index).translate(SUBSCRIPT)


def stage_count(n_layers: int) -> int:
    """How many stages the stepper has for a stack of n_layers floors."""
    return BEFORE_FLOORS + len(FLOOR_LOCAL_KEYS) * n_layers


def stage_keys(n_layers: int) -> list[str]:
    """The engine key of every stage, in stepper order."""
    keys = list(STAGE_KEYS)
    for layer in range(1, n_layers):
        keys += [f"blocks.{layer}.{local}" for local in FLOOR_LOCAL_KEYS]
    return keys


def floor_of(stage: int) -> int:
    """The floor (1-based) a stage belongs to; stages 1 and 2 count as floor 1's."""
    return max(1, (stage - BEFORE_FLOORS - 1) // len(FLOOR_LOCAL_KEYS) + 1)


def local_key(stage: int) -> str:
    """The stage's key within its floor: "embed", "resid_pre", "ln1.normalized", …"""
    if stage <= BEFORE_FLOORS:
        return ("embed", "resid_pre")[stage - 1]
    return FLOOR_LOCAL_KEYS[(stage - BEFORE_FLOORS - 1) % len(FLOOR_LOCAL_KEYS)]


def stage_names(trace: Trace) -> list[str]:
    """The eight stage names of floor 1; later floors reuse the last six."""
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


def stage_labels(trace: Trace) -> list[str]:
    """Every stage's label in stepper order; stages of floors 2 and up start with "Floor n · "."""
    names = stage_names(trace)
    labels = list(names)
    for layer in range(1, trace.config.n_layers):
        labels += [f"Floor {layer + 1} · {name}" for name in names[BEFORE_FLOORS:]]
    return labels


@dataclass(frozen=True)
class Row:
    floor: int  # 1-based
    stage: int  # 1-based, numbered across floors as the stepper counts
    key: str
    name: str  # the stage's name within its floor, e.g. "RMSNorm (before attention)"
    vector: np.ndarray


def floor_rows(trace: Trace, position: int) -> list[Row]:
    """The tracked word's vector at every stage of every floor, in stepper order."""
    names = stage_names(trace)
    names += names[BEFORE_FLOORS:] * (trace.config.n_layers - 1)
    return [Row(floor_of(n), n, key, name, trace[key][position])
            for n, (key, name) in enumerate(zip(stage_keys(trace.config.n_layers), names, strict=True), start=1)]


def agree(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.allclose(a, b, rtol=0.0, atol=TOLERANCE))


def mirror_of(trace: Trace, position: int) -> int:
    """The word's index in the reversed phrase."""
    return len(trace.tokens) - 1 - position


def agree_at(original: Trace, reversed_: Trace, position: int, stage: int) -> bool:
    """True when the tracked word has the same vector in both orders at this stage."""
    key = stage_keys(original.config.n_layers)[stage - 1]
    return agree(original[key][position], reversed_[key][mirror_of(original, position)])


def first_divergence(original: Trace, reversed_: Trace, position: int) -> int | None:
    """The first stage, on any floor, where the tracked word differs between the orders, or None.

    position is the word's index in the original phrase; in the reversed phrase it sits at n − 1 − position.
    """
    for stage in range(1, stage_count(original.config.n_layers) + 1):
        if not agree_at(original, reversed_, position, stage):
            return stage
    return None


# --- why a split starts where it does ------------------------------------------------------

# Why a stage of each kind cannot be where a split starts: it reads only the word's own numbers.
CANNOT_START = {
    "embed": "The input embedding is the word's own vector, the same wherever the word sits.",
    "ln1.normalized": "RMSNorm rescales only the word's own vector; it cannot start a split.",
    "resid_mid": "A residual addition adds only this word's own numbers; it cannot start a split.",
    "ln2.normalized": "RMSNorm rescales only the word's own vector; it cannot start a split.",
    "mlp_out": "The MLP transforms each position alone; it cannot start a split.",
    "resid_post": "A residual addition adds only this word's own numbers; it cannot start a split.",
}
PERMUTATION = ("With positions off and no mask, attention treats the phrase as a bag of words: reordering the rows "
               "reorders every result the same way (permutation symmetry), so the tracked word's numbers are "
               "identical in both orders at every stage.")


def _quoted(words: list[str]) -> str:
    shown = [f"“{w}”" for w in words]
    if len(shown) <= 2:
        return " and ".join(shown)
    return ", ".join(shown[:-1]) + " and " + shown[-1]


def _same_words(a: list[str], b: list[str]) -> bool:
    """Same words, counted with repeats, in any order (a word's vector depends on it case-blind)."""
    return sorted(w.casefold() for w in a) == sorted(w.casefold() for w in b)


def _mask_reason(word: str, before: list[str], before_reversed: list[str]) -> str:
    def come(words: list[str]) -> str:
        return f"{_quoted(words)} {'comes' if len(words) == 1 else 'come'}"

    if not before:
        seen = f"No word comes before “{word}” in the original order; {come(before_reversed)} before it reversed."
    elif not before_reversed:
        seen = f"{come(before)} before “{word}” in the original order; no word comes before it reversed."
    else:
        seen = f"{come(before)} before “{word}” in the original order; {come(before_reversed)} before it reversed."
    return (f"The causal mask lets “{word}” read only itself and the words before it, and reversing the phrase "
            f"changes which words those are. {seen} Different words to read, so a different attention mixture.")


def split_reason(original: Trace, reversed_: Trace, position: int, stage: int) -> str:
    """Why the two traces of the tracked word first differ at `stage` (its true first divergence)."""
    words, config = original.tokens, original.config
    word, mirror = words[position], mirror_of(original, position)
    kind, floor = local_key(stage), floor_of(stage)
    if kind == "resid_pre":
        return (f"In the original order “{word}” sits in slot {slot(position)}; reversed, it sits in slot "
                f"{slot(mirror)}. Another position vector is added to the same word vector, so the split starts "
                "where the slot stamp is added.")
    if kind != "attn_out":  # unreachable with this engine, kept so a reason is always true
        return CANNOT_START[kind] + " Its input already differed between the orders."
    if floor > 1:
        reads = "itself and the words before it" if config.causal else "every word of the phrase"
        return (f"Up to floor {floor}'s attention, “{word}” has the same numbers in both orders. Attention reads "
                f"{reads}, as floor {floor - 1} left them, and some of those words already carry different "
                f"numbers in the two orders: on the floors below they read different things. So floor {floor}'s "
                "attention mixture differs.")
    before, before_reversed = words[:position], reversed_.tokens[:mirror]
    if config.causal and not _same_words(before, before_reversed):
        return _mask_reason(word, before, before_reversed)
    if config.positions and config.causal:
        return (f"The causal mask lets “{word}” read the same words before it in both orders, but they sit in "
                "other slots there, so they carry other position vectors: the keys and values it mixes change, "
                "and so does its attention update.")
    if config.positions:
        return (f"“{word}” keeps slot {slot(position)} in both orders, so it gets the same position vector. But "
                "attention reads every position, and reversing the phrase moves the other words into each other's "
                "slots, where they carry other position vectors: the keys and values it mixes change, and so "
                "does its attention update.")
    return "Attention is the first stage that reads other positions, and what it reads differs between the orders."


def never_reason(original: Trace, position: int) -> str:
    """Why the tracked word's two traces agree at every stage (when they do)."""
    words, config = original.tokens, original.config
    if [w.casefold() for w in words] == [w.casefold() for w in reversed(words)]:
        return ("The reversed phrase is the same phrase, word for word, so the two traces are identical at every "
                "stage.")
    if not config.positions and not config.causal:
        return PERMUTATION
    return (f"On every floor, the words “{words[position]}” reads carry the same numbers in both orders, so "
            "nothing it computes can differ.")


def verdict(claim: int | None, truth: int | None, reason: str, split_on_view: int | None = None) -> tuple[str, str]:
    """(short verdict, explanation) for a claim; claim None means "they never diverge".

    reason explains the truth (the first divergence, or why there is none); split_on_view is the stage on
    view when the traces differ there (the student can see a split), else None.
    """
    if claim == truth:
        return "Right on", reason
    if truth is None:
        return "No split here", (f"At stage {claim} the two traces still agree. Compare the other stages before "
                                 "you claim again.")
    if claim is None:
        if split_on_view is not None:
            return "They do diverge", (f"At stage {split_on_view}, on view, the two traces differ, so “never” is "
                                       "wrong. Is it the first stage where they differ? Step back and compare.")
        return "They do diverge", ("The two traces differ at some stage, so “never” is wrong. Step through the "
                                   "stages and compare the two orders at each one.")
    if claim > truth:
        why_not = CANNOT_START.get(local_key(claim), "")
        return "Too late", " ".join(filter(None, [
            "The two traces already differ at an earlier stage.", why_not, "Step back and compare."]))
    return "Too early", "At this stage the two traces still agree. Step forward and compare again."
