"""The payload's numbers: blocks packed in turn, each found at the offset `put` gave it, read-only once packed."""

from __future__ import annotations

import numpy as np
import pytest

from blocktrace.explorables.components.drawn_view.values import Values


def test_each_block_is_found_at_its_offset_and_the_whole_is_read_only() -> None:
    numbers = Values()
    first = numbers.put([1, 2, 3])
    second = numbers.put(np.array([[4.5, -1.0], [np.inf, np.nan]]))
    third = numbers.put(7)
    assert (first, second, third, numbers.size) == (0, 3, 7, 8)
    packed = numbers.array()
    assert packed.dtype == np.float64
    np.testing.assert_array_equal(packed[second:second + 4], [4.5, -1.0, np.inf, np.nan])
    assert packed[third] == 7
    with pytest.raises(ValueError):
        packed[0] = 9


def test_nothing_put_is_an_empty_array() -> None:
    assert Values().array().shape == (0,)
