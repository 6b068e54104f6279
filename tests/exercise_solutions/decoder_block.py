"""Reference solution of lessons/decoder-block/exercise (kept out of the student's folder).

tests/app/test_exercises.py runs the exercise's tests against this file through BLOCKTRACE_SOLUTION.
Written independently of blocktrace.explorables.engine.ops, which the tests compare it with.
"""

from __future__ import annotations

import numpy as np

Array = np.ndarray


def rms_norm(x: Array, gain: Array, eps: float = 1e-6) -> Array:
    """RMSNorm(x) = x / √(mean(x²) + eps) · gain, over the last axis.

    # [..., d], [d] -> [..., d]
    """
    return x / np.sqrt(np.mean(np.square(x), axis=-1, keepdims=True) + eps) * gain


def swiglu(x: Array, W: Array, W_out: Array) -> Array:
    """SwiGLU(x) = (SiLU(gate) ⊙ value) W_out, where [gate | value] = x W.

    # [..., d], [d, 4d], [2d, d] -> [..., d]
    """
    gate, value = np.split(x @ W, 2, axis=-1)
    silu = gate * 0.5 * (1.0 + np.tanh(0.5 * gate))  # s · σ(s), with σ written so it never overflows
    return (silu * value) @ W_out


def swiglu_param_count(d: int) -> int:
    """4d² in the combined projection plus 2d² in the output projection: 6d²."""
    return 4 * d * d + 2 * d * d


def layer_norm(x: Array, gain: Array, bias: Array, eps: float = 1e-6) -> Array:
    """LayerNorm(x) = (x − mean(x)) / √(var(x) + eps) · gain + bias, over the last axis.

    # [..., d], [d], [d] -> [..., d]
    """
    mean = np.mean(x, axis=-1, keepdims=True)
    var = np.var(x, axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gain + bias


def gelu_mlp(x: Array, W_in: Array, b_in: Array, W_out: Array, b_out: Array) -> Array:
    """MLP(x) = GELU(x W_in + b_in) W_out + b_out, GELU in its tanh form.

    # [..., d], [d, 4d], [4d], [4d, d], [d] -> [..., d]
    """
    z = x @ W_in + b_in
    gelu = 0.5 * z * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (z + 0.044715 * z**3)))
    return gelu @ W_out + b_out
