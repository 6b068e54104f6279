"""Exercise: RMSNorm and a residual sublayer, in NumPy.

Edit the two functions below, then run, in this folder:

    blocktrace check

Both functions run as written, and both are wrong in a way the lesson warns about.
Each failing test says which mistake it found; fix one mistake at a time.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Array = np.ndarray


def rms_norm(x: Array, gain: Array, eps: float = 1e-6) -> Array:
    """RMSNorm(x)_i = gain_i · x_i / √(mean(x²) + eps), taken over the last axis.

    # [..., d], [d] -> [..., d]
    """
    mean = np.mean(x, axis=-1, keepdims=True)
    shifted = x - mean
    rms = np.sqrt(np.mean(shifted**2, axis=-1, keepdims=True) + eps)
    return gain * shifted / rms


def residual_sublayer(x: Array, transform: Callable[[Array], Array], gain: Array, eps: float = 1e-6) -> Array:
    """x + transform(RMSNorm(x)): the sublayer reads a normalised view, its update is added to the untouched x.

    `transform` stands for attention or the MLP: it takes the normalised rows and returns an update
    of the same shape.
    # [..., d] -> [..., d]
    """
    normalised = rms_norm(x, gain, eps)
    update = transform(normalised)
    return update
