"""Reading what a person types: token vectors and phrases, and the errors for what cannot be used."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blocktrace.explorables.engine import ConfigError
from blocktrace.explorables.engine.parsing import MAX_WORD_LENGTH, parse_phrase, parse_vector


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2, 2, 2, 2", [2.0, 2.0, 2.0, 2.0]),
        ("[2 2 2 2]", [2.0, 2.0, 2.0, 2.0]),
        ("2;2;2;2", [2.0, 2.0, 2.0, 2.0]),
        ("\u22121.5, 3", [-1.5, 3.0]),
        ("1\t2\n3", [1.0, 2.0, 3.0]),
        ("  (0.5, -0.25)  ", [0.5, -0.25]),
        ("1e-3,, 4,", [0.001, 4.0]),
        ("1e6, -1e6", [1e6, -1e6]),
        ("7", [7.0]),
    ],
)
def test_parse_vector_accepts_the_ways_people_type_vectors(text: str, expected: list[float]) -> None:
    """Commas, spaces, semicolons, brackets, tabs, newlines and the Unicode minus sign all read as numbers."""
    assert parse_vector(text) == expected


@pytest.mark.parametrize(
    ("text", "must_mention"),
    [
        ("", ["empty"]),
        ("   ", ["empty"]),
        ("[]", ["empty"]),
        ("1, abc", ["abc", "item 2"]),
        ("nan", ["item 1", "NaN"]),
        ("1, 2, NaN", ["item 3", "NaN"]),
        ("inf", ["item 1", "inf"]),
        ("-inf, 1", ["item 1", "-inf"]),
        ("1e400", ["item 1", "1e400"]),
        ("1e7", ["item 1", "1e7"]),
        ("3, -2e6", ["item 2", "-2e6"]),
    ],
)
def test_parse_vector_rejects_what_is_not_a_usable_number(text: str, must_mention: list[str]) -> None:
    """Empty text, words, NaN, infinities and values beyond ±1e6 raise ConfigError naming the item."""
    with pytest.raises(ConfigError) as caught:
        parse_vector(text)
    message = str(caught.value)
    for part in must_mention:
        assert part in message
    assert "\n" not in message


def test_parse_vector_shortens_a_long_bad_item_in_its_message() -> None:
    """A long unreadable item is cut short in the message so the error stays one readable line."""
    with pytest.raises(ConfigError) as caught:
        parse_vector("1, " + "x" * 500)
    assert len(str(caught.value)) < 120
    assert "item 2" in str(caught.value)


def test_parse_vector_enforces_width_limits() -> None:
    """Too few or too many components are refused with the count and the allowed range; 512 is the default cap."""
    assert parse_vector("1, 2", min_width=2, max_width=2) == [1.0, 2.0]
    with pytest.raises(ConfigError, match="3 components"):
        parse_vector("1, 2, 3", max_width=2)
    with pytest.raises(ConfigError, match="1 components"):
        parse_vector("1", min_width=2)
    assert len(parse_vector(", ".join(["1"] * 512))) == 512
    with pytest.raises(ConfigError, match="513"):
        parse_vector(", ".join(["1"] * 513))


@settings(max_examples=50, deadline=None, database=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=20),
       st.sampled_from([", ", " ", ";", "\t", ",\n"]))
def test_parse_vector_round_trips_printed_floats(values: list[float], sep: str) -> None:
    """Any list of allowed floats, printed with repr and any separator, reads back exactly."""
    assert parse_vector(sep.join(repr(v) for v in values)) == values


def test_parse_phrase_splits_on_whitespace() -> None:
    """Words are split on spaces, tabs and newlines, and kept as typed."""
    assert parse_phrase("eat an\torange\n") == ["eat", "an", "orange"]


@pytest.mark.parametrize("text", ["", "   ", "\t\n"])
def test_parse_phrase_refuses_an_empty_phrase(text: str) -> None:
    """An empty phrase raises ConfigError saying it is empty."""
    with pytest.raises(ConfigError, match="empty"):
        parse_phrase(text)


def test_parse_phrase_refuses_too_many_words() -> None:
    """More words than allowed raises ConfigError with the count; the default limit is 512 words."""
    with pytest.raises(ConfigError, match="3 words"):
        parse_phrase("a b c", max_words=2)
    assert len(parse_phrase(" ".join(["w"] * 512))) == 512
    with pytest.raises(ConfigError, match="513 words"):
        parse_phrase(" ".join(["w"] * 513))


def test_parse_phrase_refuses_an_over_long_word() -> None:
    """A word longer than the limit is refused; one exactly at the limit is fine."""
    assert parse_phrase("a" * MAX_WORD_LENGTH) == ["a" * MAX_WORD_LENGTH]
    with pytest.raises(ConfigError, match="longer"):
        parse_phrase("ok " + "a" * (MAX_WORD_LENGTH + 1))


def test_parse_vector_results_are_finite_floats() -> None:
    """Everything parse_vector returns is a finite Python float."""
    values = parse_vector("1, \u22122, 3.5e2, 0")
    assert all(isinstance(v, float) and math.isfinite(v) for v in values)
    assert values == [1.0, -2.0, 350.0, 0.0]
