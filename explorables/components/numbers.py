"""Numbers and vectors as the pages show them: one rule for every table, card, label and sentence.

- a true minus sign (U+2212), the lessons' sign, never a hyphen, also in an exponent;
- fixed decimals (3 unless told), and no "−0.000": a value that rounds to zero is 0.000, without a sign, so
  floating-point noise such as LayerNorm's 1e−17 on a constant vector reads as the zero it stands for;
- a "+" only where asked (signed table cells, whose sign is also their colour);
- e-notation once a value has 5 integer digits (1.00e+04), so an overflow demo stays a short cell;
- NaN as "NaN", infinities as ∞ and −∞.

Prose that compares magnitudes far apart (a gradient of 0.0012 against one of 0.97) asks for significant
figures instead of decimals; everything else above holds for it too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["MINUS", "norm", "number", "vector", "words_of_number"]

MINUS = "\u2212"
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
