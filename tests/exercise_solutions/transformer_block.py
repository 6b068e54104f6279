"""Reference solution of lessons/transformer-block/exercise (kept out of the student's folder).

tests/app/test_exercises.py runs the exercise's tests against this file through BLOCKTRACE_SOLUTION.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Array = np.ndarray


def rms_norm(x: Array, gain: Array, eps: float = 1e-6) -> Array:
    """RMSNorm(x)_i = gain_i · x_i / √(mean(x²) + eps), taken over the last axis.

    # [..., d], [d] -> [..., d]
    """
    rms = np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return gain * (x / rms)


def residual_sublayer(x: Array, transform: Callable[[Array], Array], gain: Array, eps: float = 1e-6) -> Array:
    """x + transform(RMSNorm(x)): the sublayer reads a normalised view, its update is added to the untouched x.

    # [..., d] -> [..., d]
    """
    return x + transform(rms_norm(x, gain, eps))
