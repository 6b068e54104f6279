"""The numbers of one payload, packed as the browser reads them: one read-only float64 array (one binary buffer
on the wire), each block found by the offset `put` gave it."""

from __future__ import annotations

import numpy as np

__all__ = ["Values"]


class Values:
    """Blocks of numbers appended in turn; `put` returns a block's offset, `array()` the packed, read-only whole."""

    def __init__(self) -> None:
        self._blocks: list[np.ndarray] = []
        self._at = 0

    def put(self, array) -> int:
        start = self._at
        self._blocks.append(np.asarray(array, dtype=np.float64).ravel())
        self._at += self._blocks[-1].size
        return start

    @property
    def size(self) -> int:
        """How many numbers were put so far (the next block's offset)."""
        return self._at

    def array(self) -> np.ndarray:
        values = np.concatenate(self._blocks) if self._blocks else np.zeros(0)
        values.flags.writeable = False
        return values
