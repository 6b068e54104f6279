"""Exercise: the normalisation and MLP choices of a decoder block, in NumPy.

Write each function below, then run, in this folder:

    blocktrace check

Shapes: x is [..., d] (for example [B, T, d]); every function works on the last axis.
Use only NumPy: the tests compare your results with the project's engine.
"""

from __future__ import annotations

import numpy as np

Array = np.ndarray


def rms_norm(x: Array, gain: Array, eps: float = 1e-6) -> Array:
    """RMSNorm(x) = x / √(mean(x²) + eps) · gain, over the last axis; no mean is subtracted, no bias.

    # [..., d], [d] -> [..., d]
    """
    raise NotImplementedError("rms_norm is not written yet")


def swiglu(x: Array, W: Array, W_out: Array) -> Array:
    """SwiGLU(x) = (SiLU(gate) ⊙ value) W_out, where [gate | value] = x W and SiLU(s) = s · σ(s).

    W is the combined projection [d, 4d]: its first 2d columns give the gate, the last 2d the value.
    # [..., d], [d, 4d], [2d, d] -> [..., d]
    """
    raise NotImplementedError("swiglu is not written yet")


def swiglu_param_count(d: int) -> int:
    """How many weights the SwiGLU MLP above holds for model width d (W and W_out, no biases)."""
    raise NotImplementedError("swiglu_param_count is not written yet")


def layer_norm(x: Array, gain: Array, bias: Array, eps: float = 1e-6) -> Array:
    """LayerNorm(x) = (x − mean(x)) / √(var(x) + eps) · gain + bias, over the last axis.

    # [..., d], [d], [d] -> [..., d]
    """
    raise NotImplementedError("layer_norm is not written yet")


def gelu_mlp(x: Array, W_in: Array, b_in: Array, W_out: Array, b_out: Array) -> Array:
    """MLP(x) = GELU(x W_in + b_in) W_out + b_out, GELU in its tanh form:

    GELU(z) = 0.5 · z · (1 + tanh(√(2/π) · (z + 0.044715 · z³)))
    # [..., d], [d, 4d], [4d], [4d, d], [d] -> [..., d]
    """
    raise NotImplementedError("gelu_mlp is not written yet")
