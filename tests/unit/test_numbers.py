"""The one number formatter (explorables/components/numbers.py) and the one RMS (engine ops.rms)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from blocktrace.explorables.components.numbers import NO_RMS, norm, number, rms_card, stage_rms, vector, words_of_number
from blocktrace.explorables.engine import ops


def test_fixed_decimals_with_a_true_minus_and_no_negative_zero() -> None:
    """Three decimals, a true minus, a plus only when asked, and a value that rounds to zero is 0.000 unsigned."""
    assert (number(2.5), number(-1.25), number(0.42, signed=True), number(-0.42, signed=True)) == (
        "2.500", "\u22121.250", "+0.420", "\u22120.420")
    assert [number(v) for v in (0.0, -0.0, -0.0004, 1e-17)] == ["0.000"] * 4
    assert [number(v, signed=True) for v in (-0.0, -0.0004, 1e-17)] == ["0.000"] * 3
    assert number(-0.2, 0) == "0" and number(-12.6, 0) == "\u221213" and number(1.234, 4) == "1.2340"
    assert "-" not in number(-3.0) + number(-3.0, signed=True)


def test_odd_values_are_readable_text() -> None:
    """NaN, ±∞ and values too wide for a cell come out as short text with a true minus, never as an error."""
    assert [number(v) for v in (math.nan, math.inf, -math.inf)] == ["NaN", "∞", "\u2212∞"]
    assert number(math.inf, signed=True) == "+∞" and number(math.nan, signed=True) == "NaN"
    assert number(-1.25e8) == "\u22121.25e+08" and number(1e9, signed=True) == "+1.00e+09"
    assert number(9999.4) == "9999.400" and number(1e4) == "1.00e+04"


def test_significant_figures_for_prose_across_magnitudes() -> None:
    """Prose comparing magnitudes far apart keeps significant figures, with the same minus, zero and NaN rules."""
    assert (number(0.0012345, significant=True), number(0.97, 2, significant=True)) == ("0.00123", "0.97")
    assert number(-4.2e-7, 2, significant=True) == "\u22124.2e\u221207"
    assert number(-0.0, significant=True) == "0" and number(math.nan, significant=True) == "NaN"
    assert number(-math.inf, significant=True) == "\u2212∞"


def test_vectors_as_the_lessons_write_them() -> None:
    """Brackets, no plus, true minus; a long vector shows its first entries and its length."""
    assert vector(np.array([-0.68, 0.44])) == "[\u22120.680, 0.440]"
    assert vector([-0.0001, 2.0]) == "[0.000, 2.000]"
    assert vector([1, 2, 3, 4, 5], shown=3) == "[1.000, 2.000, 3.000, … 5]"
    assert vector([math.nan, 1e9], shown=3) == "[NaN, 1.00e+09]"
    assert vector([0.5], signed=True) == "[+0.500]"


def test_words_read_symbols() -> None:
    """A screen reader hears "norm" and "infinity", not the symbols."""
    assert words_of_number("‖·‖ \u2212∞") == "norm \u2212infinity"


def test_rms_and_norm_of_odd_values() -> None:
    """A NaN entry makes RMS and norm NaN; an infinite one makes RMS ∞ (every entry counts); squares that would
    overflow still give a finite RMS; no warning on the way."""
    with np.errstate(all="raise"):
        assert math.isnan(ops.rms(np.array([[1.0, math.nan, math.inf]])))
        assert math.isnan(norm(np.array([1.0, math.nan])))
        assert ops.rms(np.array([1.0, -math.inf])) == math.inf
        assert ops.rms(np.array([1e200, 1e200])) == pytest.approx(1e200)
        assert ops.rms(np.zeros(3)) == 0.0
        assert math.isnan(ops.rms(np.zeros(0)))
    assert ops.rms(np.array([[3.0, 4.0], [0.0, 0.0]])) == pytest.approx(math.sqrt(25 / 4))
    assert norm(np.array([3.0, 4.0])) == 5.0


@pytest.mark.parametrize(("values", "shown"), [
    ([[0.5, -np.inf], [0.25, 1.0]], NO_RMS),  # masked scores: no RMS, whatever the kept scores are
    ([[0.5, -np.inf], [np.nan, 1.0]], "NaN"),  # a NaN is a failure and says so, mask or not
    ([1e308, 1e308, np.inf], "∞"),  # an overflow is a failure too
    ([3.0, -4.0], number(np.sqrt(12.5))),
], ids=["masked", "nan-wins", "overflow", "finite"])
def test_a_stage_rms_is_shown_one_way_on_every_page(values, shown) -> None:
    value = stage_rms(np.array(values))
    assert (value if value == NO_RMS else number(value)) == shown
    text, said = rms_card(np.array(values))
    assert text == f"RMS {shown}" and "RMS" not in said and "∞" not in said
