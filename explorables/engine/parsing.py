"""Reading what a person types: a vector of numbers, or a phrase of words."""

from __future__ import annotations

import math
import re

from blocktrace.explorables.engine.config import MAX_ABS_VALUE, MAX_TOKENS, ConfigError

__all__ = ["MAX_WORD_LENGTH", "parse_phrase", "parse_vector"]

# Minus signs people paste from documents, mapped to ASCII.
_MINUS = str.maketrans({"\u2212": "-", "\u2013": "-", "\u2012": "-", "\ufe63": "-", "\uff0d": "-"})
_SEPARATORS = re.compile(r"[\s,;]+")
MAX_WORD_LENGTH = 40


def parse_vector(text: str, min_width: int = 1, max_width: int = 512) -> list[float]:
    """Numbers from text like `2, 2, 2, 2`, `[2 2 2 2]`, `2;2;2;2` or `−1.5, 3` (Unicode minus).

    Raises ConfigError with a message that names the first item it could not use.
    """
    cleaned = text.translate(_MINUS).strip()
    if cleaned[:1] in "[(" and cleaned[-1:] in "])":
        cleaned = cleaned[1:-1]
    items = [item for item in _SEPARATORS.split(cleaned) if item]
    if not items:
        raise ConfigError("the vector is empty; type numbers separated by commas, e.g. 2, 2, 2, 2")
    values = []
    for n, item in enumerate(items, start=1):
        try:
            value = float(item)
        except ValueError:
            shown = item if len(item) <= 20 else item[:20] + "…"
            raise ConfigError(f"could not read {shown!r} (item {n}) as a number") from None
        if math.isnan(value):
            raise ConfigError(f"item {n} is NaN; every component must be a number")
        if math.isinf(value) or abs(value) > MAX_ABS_VALUE:
            raise ConfigError(f"item {n} ({item}) is too large; keep components between "
                              f"-{MAX_ABS_VALUE:g} and {MAX_ABS_VALUE:g}")
        values.append(value)
    if not min_width <= len(values) <= max_width:
        raise ConfigError(f"the vector has {len(values)} components; give between {min_width} and {max_width}")
    return values


def parse_phrase(text: str, max_words: int = MAX_TOKENS) -> list[str]:
    """Words separated by spaces; an empty phrase, too many words or an over-long word is refused."""
    words = text.split()
    if not words:
        raise ConfigError("the phrase is empty; type at least one word")
    if len(words) > max_words:
        raise ConfigError(f"the phrase has {len(words)} words; at most {max_words} are allowed")
    for word in words:
        if len(word) > MAX_WORD_LENGTH:
            raise ConfigError(f"a word is longer than {MAX_WORD_LENGTH} characters")
    return words
