"""Numbers and vectors as the pages show them: one rule for every table, card, label and sentence.

- a true minus sign (U+2212), the lessons' sign, never a hyphen, also in an exponent;
- fixed decimals (3 unless told), and no "−0.000": a value that rounds to zero is 0.000, without a sign, so
  floating-point noise such as LayerNorm's 1e−17 on a constant vector reads as the zero it stands for;
- a "+" only where asked (signed table cells, whose sign is also their colour);
- e-notation once a value has 5 integer digits (1.00e+04), so an overflow demo stays a short cell;
- NaN as "NaN", infinities as ∞ and −∞;
- a stage's RMS as "—" when its values hold −∞ (the attention scores where the causal mask hides a later
  position: their RMS would read ∞, which says nothing about the scores the mask keeps), with NO_RMS_NOTE to say so.

Prose that compares magnitudes far apart (a gradient of 0.0012 against one of 0.97) asks for significant
figures instead of decimals; everything else above holds for it too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from blocktrace.explorables.engine.ops import rms

__all__ = ["MINUS", "NO_RMS", "NO_RMS_NOTE", "norm", "number", "rms_card", "stage_rms", "vector", "words_of_number"]

MINUS = "\u2212"
NO_RMS = "—"
NO_RMS_NOTE = "— : −∞ where the mask hides a later position, so no RMS"
_HUGE = 1e4  # from here on a fixed-decimals number is shown in e-notation


def number(value: float, digits: int = 3, *, signed: bool = False, significant: bool = False) -> str:
    """value with `digits` decimals (or significant figures): "0.420", "+0.420" (signed), "−1.25e+08", "∞", "NaN"."""
    v = float(value)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return MINUS + "∞" if v < 0 else ("+∞" if signed else "∞")
    sign = "+" if signed else ""
    if significant:
        text = f"{v:{sign}.{digits}g}"
        if float(text) == 0:
            return "0"
    elif round(v, digits) == 0:
        return f"{0:.{digits}f}"
    elif abs(v) >= _HUGE:
        text = f"{v:{sign}.2e}"
    else:
        text = f"{v:{sign}.{digits}f}"
    return text.replace("-", MINUS)


def vector(values: Sequence[float] | np.ndarray, digits: int = 3, *, signed: bool = False,
           shown: int | None = None) -> str:
    """A vector as the lessons write it, "[−0.680, 0.440]"; past `shown` entries, the first ones and a count:
    "[1.000, 2.000, 3.000, … 5]"."""
    items = [float(v) for v in values]
    parts = [number(v, digits, signed=signed) for v in (items if shown is None else items[:shown])]
    if shown is not None and len(items) > shown:
        parts.append(f"… {len(items)}")
    return "[" + ", ".join(parts) + "]"


def norm(values: np.ndarray) -> float:
    """‖v‖ that says NaN when any entry is NaN and ∞ when the squares overflow, without a warning."""
    v = np.asarray(values, dtype=float)
    if np.any(np.isnan(v)):
        return math.nan
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.linalg.norm(v))


def words_of_number(text: str) -> str:
    """Number text as a sentence reads it: ‖·‖ as "norm", ∞ as "infinity" (the true minus is read as minus)."""
    return text.replace("‖·‖", "norm").replace("∞", "infinity")


def stage_rms(values: np.ndarray) -> float | str:
    """The RMS a stage table shows: the engine's RMS (NaN and an overflow's ∞ included, as failures), or NO_RMS
    for values that hold −∞ and no NaN (masked attention scores), the same on every page."""
    v = np.asarray(values, dtype=float)
    if v.size and np.isneginf(v).any() and not np.isnan(v).any():
        return NO_RMS
    return rms(v)


def rms_card(values: np.ndarray) -> tuple[str, str]:
    """A diagram card's RMS line and the words a screen reader says for it."""
    shown = stage_rms(values)
    if shown == NO_RMS:
        return f"RMS {NO_RMS}", "no root mean square: minus infinity where the mask hides a later position"
    text = f"RMS {number(shown)}"
    return text, words_of_number(text).replace("RMS", "root mean square")
