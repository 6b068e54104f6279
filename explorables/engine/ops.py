"""The block's operations, one small function each, equation first.

Row-vector convention throughout: a token is a row, a layer is `x @ W`.
Every function accepts any number of leading dimensions (batch, pos, ...).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

__all__ = [
    "attention", "attention_scores", "causal_mask", "dense_mlp", "gelu", "layer_norm", "merge_heads", "relu", "rms",
    "rms_norm", "rms_normalize", "sigmoid", "silu", "softmax", "split_heads", "swiglu"
]

Array = np.ndarray


def rms(x: Array) -> float:
    """RMS(x) = sqrt(mean(x²)) over every entry: NaN when any entry is NaN, ∞ when one is infinite (−∞ scores
    under the causal mask included: the number describes the whole tensor, not the entries that look finite).

    # [...] -> scalar
    """
    v = np.asarray(x, dtype=float)
    if v.size == 0 or np.any(np.isnan(v)):
        return float("nan")
    if np.any(np.isinf(v)):
        return float("inf")
    scale = float(np.max(np.abs(v)))
    if scale == 0.0:
        return 0.0
    return scale * float(np.sqrt(np.mean((v / scale) ** 2)))  # scaled first: the squares cannot overflow


def rms_normalize(x: Array, eps: float) -> Array:
    """x / sqrt(mean(x²) + eps), over the last axis: the normalising step of RMSNorm, before the gain.

    # [..., d_model] -> [..., d_model]
    """
    mean_square = np.mean(x * x, axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):  # eps = 0 on a zero row: NaN, shown as such
        return x / np.sqrt(mean_square + eps)


def rms_norm(x: Array, g: Array, eps: float) -> Array:
    """RMSNorm(x)_i = g_i · x_i / sqrt(mean(x²) + eps): rescale without subtracting the mean.

    # [..., d_model], [d_model] -> [..., d_model]
    """
    y = rms_normalize(x, eps)
    y *= g  # in place: the rows before the gain are not recorded
    return y


def layer_norm(x: Array, g: Array, b: Array, eps: float) -> Array:
    """LayerNorm(x)_i = g_i · (x_i − mean(x)) / sqrt(var(x) + eps) + b_i: centre, then rescale.

    # [..., d_model], [d_model], [d_model] -> [..., d_model]
    """
    centred = x - np.mean(x, axis=-1, keepdims=True)
    y = rms_normalize(centred, eps)  # the RMS of a centred row is its standard deviation
    y *= g  # in place, as in rms_norm
    y += b
    return y


def softmax(x: Array, axis: int = -1) -> Array:
    """softmax(x)_j = exp(x_j − max x) / Σ_k exp(x_k − max x): subtracting the max keeps exp finite.

    Entries of −inf (masked) get weight exactly 0.
    # [..., n] -> [..., n]
    """
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    e /= np.sum(e, axis=axis, keepdims=True)  # in place: e is a fresh array
    return e


@lru_cache(maxsize=32)  # at most 8 MB (32 masks of 512 × 512)
def causal_mask(n_pos: int) -> Array:
    """mask[i, j] = (j ≤ i): query position i may read key positions up to and including itself.

    Built once per length and shared, so it is read-only.
    # -> [pos, pos] of bool
    """
    mask = np.tril(np.ones((n_pos, n_pos), dtype=bool))
    mask.flags.writeable = False
    return mask


def split_heads(x: Array, n_heads: int) -> Array:
    """Head h takes columns h·d_head … (h+1)·d_head − 1.

    # [..., pos, n_heads * d_head] -> [..., n_heads, pos, d_head]
    """
    *lead, n_pos, width = x.shape
    return np.swapaxes(x.reshape(*lead, n_pos, n_heads, width // n_heads), -2, -3)


def merge_heads(x: Array) -> Array:
    """Concatenate the heads back along the feature axis, head 0 first.

    # [..., n_heads, pos, d_head] -> [..., pos, n_heads * d_head]
    """
    *lead, n_heads, n_pos, d_head = x.shape
    return np.swapaxes(x, -2, -3).reshape(*lead, n_pos, n_heads * d_head)


def attention_scores(q: Array, k: Array, causal: bool) -> Array:
    """scores = q kᵀ / √d_head, with −inf where the causal mask forbids reading.

    # [..., n_heads, pos, d_head] x2 -> [..., n_heads, pos, pos]
    """
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        np.copyto(scores, -np.inf, where=~causal_mask(q.shape[-2]))  # in place: no second [pos, pos] array
    return scores


def attention(
    x: Array, W_Q: Array, W_K: Array, W_V: Array, W_O: Array, n_heads: int, causal: bool
) -> dict[str, Array]:
    """Attention(x) = concat_h(softmax(q_h k_hᵀ / √d_head) v_h) W_O with q = x W_Q, k = x W_K, v = x W_V.

    Returns every intermediate: q, k, v, scores, pattern [..., n_heads, pos, pos] and out.
    # [..., pos, d_model] -> [..., pos, d_model]
    """
    q = split_heads(x @ W_Q, n_heads)
    k = split_heads(x @ W_K, n_heads)
    v = split_heads(x @ W_V, n_heads)
    scores = attention_scores(q, k, causal)
    pattern = softmax(scores)
    out = merge_heads(pattern @ v) @ W_O
    return {"q": q, "k": k, "v": v, "scores": scores, "pattern": pattern, "out": out}


def sigmoid(x: Array) -> Array:
    """σ(x) = 1 / (1 + e^(−x)), written as (1 + tanh(x/2)) / 2 so it never overflows."""
    s = np.tanh(0.5 * x)
    s += 1.0  # in place: two new arrays instead of four
    s *= 0.5
    return s


def silu(x: Array) -> Array:
    """SiLU(x) = x · σ(x): a smooth gate, 0 at 0, close to x for large positive x."""
    s = sigmoid(x)
    s *= x  # in place: σ(x) is not needed afterwards
    return s


def gelu(x: Array) -> Array:
    """GELU(x) = 0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³))), the tanh form."""
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def relu(x: Array) -> Array:
    """ReLU(x) = max(0, x): negative activations are clipped to zero."""
    return np.maximum(x, 0.0)


def swiglu(x: Array, W_gate: Array, W_value: Array, W_down: Array) -> dict[str, Array]:
    """SwiGLU(x) = (SiLU(x W_gate) ⊙ (x W_value)) W_down: the gate decides how much of each value passes.

    # [..., d_model] -> gate, value, hidden [..., d_mlp]; out [..., d_model]
    """
    gate = x @ W_gate
    value = x @ W_value
    hidden = silu(gate)
    hidden *= value  # in place: SiLU(gate) alone is not recorded
    return {"gate": gate, "value": value, "hidden": hidden, "out": hidden @ W_down}


def dense_mlp(
    x: Array, W_in: Array, b_in: Array, W_out: Array, b_out: Array, activation
) -> dict[str, Array]:
    """MLP(x) = act(x W_in + b_in) W_out + b_out, with act GELU or ReLU.

    The pre-activation is reported as "gate": it is what the non-linearity reads.
    # [..., d_model] -> gate, hidden [..., d_mlp]; out [..., d_model]
    """
    pre = x @ W_in + b_in
    hidden = activation(pre)
    return {"gate": pre, "hidden": hidden, "out": hidden @ W_out + b_out}
