"""The block's operations one by one, each against hand arithmetic or Python's math module."""

from __future__ import annotations

import math

import numpy as np
import pytest

from blocktrace.explorables.engine import ops


def test_rms_norm_with_unit_gain_has_rms_one() -> None:
    """RMSNorm with unit gain rescales every row to root mean square 1 (the lesson's defining property)."""
    x = np.array([[3.0, -1.0, 0.5, 2.0], [100.0, 0.1, -7.0, 4.0], [1e-3, 2e-3, -3e-3, 0.0]])
    for eps in (0.0, 1e-12):
        y = ops.rms_norm(x, np.ones(4), eps)
        np.testing.assert_allclose(np.sqrt(np.mean(y * y, axis=-1)), 1.0, rtol=1e-6)


def test_rms_norm_matches_the_formula_by_hand() -> None:
    """RMSNorm of [3, 4] with eps 0 is [3, 4] / sqrt((9 + 16) / 2), times the gain."""
    y = ops.rms_norm(np.array([3.0, 4.0]), np.array([2.0, 0.5]), 0.0)
    rms = math.sqrt(12.5)
    np.testing.assert_allclose(y, [2.0 * 3.0 / rms, 0.5 * 4.0 / rms], rtol=1e-15)


def test_constant_vector_survives_rms_norm() -> None:
    """A constant non-zero vector keeps its direction under RMSNorm: [2, 2] becomes [1, 1]."""
    np.testing.assert_array_equal(ops.rms_norm(np.array([2.0, 2.0]), np.ones(2), 0.0), [1.0, 1.0])
    np.testing.assert_allclose(ops.rms_norm(np.array([2.0, 2.0, 2.0, 2.0]), np.ones(4), 1e-12), 1.0, rtol=1e-12)
    np.testing.assert_allclose(ops.rms_norm(np.array([-3.0, -3.0]), np.ones(2), 1e-12), -1.0, rtol=1e-12)


def test_rms_norm_keeps_the_sign_pattern() -> None:
    """RMSNorm only rescales, so with positive gains every component keeps its sign."""
    x = np.array([-3.0, 1.0, 2.0, -0.25, 0.0])
    y = ops.rms_norm(x, np.full(5, 0.7), 1e-6)
    np.testing.assert_array_equal(np.sign(y), np.sign(x))


def test_constant_vector_vanishes_under_layer_norm() -> None:
    """LayerNorm subtracts the mean first, so a constant vector becomes all zeros (with zero bias)."""
    y = ops.layer_norm(np.array([2.0, 2.0, 2.0, 2.0]), np.ones(4), np.zeros(4), 1e-6)
    np.testing.assert_array_equal(y, np.zeros(4))


def test_negative_gain_flips_one_sign() -> None:
    """A negative gain component flips exactly that component's sign."""
    x = np.array([1.0, 2.0, 3.0])
    plain = ops.rms_norm(x, np.ones(3), 1e-6)
    flipped = ops.rms_norm(x, np.array([1.0, -1.0, 1.0]), 1e-6)
    np.testing.assert_array_equal(flipped, plain * np.array([1.0, -1.0, 1.0]))
    assert flipped[1] < 0 < plain[1]


def test_layer_norm_gives_mean_zero_and_std_one() -> None:
    """LayerNorm with unit gain and zero bias gives every row mean 0 and standard deviation 1."""
    x = np.array([[1.0, 2.0, 3.0, 10.0], [-5.0, 0.5, 0.25, 8.0]])
    y = ops.layer_norm(x, np.ones(4), np.zeros(4), 0.0)
    np.testing.assert_allclose(y.mean(axis=-1), 0.0, atol=1e-15)
    np.testing.assert_allclose(y.std(axis=-1), 1.0, rtol=1e-12)


def test_layer_norm_applies_gain_then_bias() -> None:
    """LayerNorm of [1, 3] is [−1, 1] before the gain, then g·x̂ + b by hand."""
    y = ops.layer_norm(np.array([1.0, 3.0]), np.array([2.0, 3.0]), np.array([0.5, -0.5]), 0.0)
    np.testing.assert_allclose(y, [2.0 * -1.0 + 0.5, 3.0 * 1.0 - 0.5], rtol=1e-15)


def test_rms_normalize_with_zero_eps_on_a_zero_row_is_nan_not_an_exception() -> None:
    """eps = 0 on an all-zero row gives NaN (shown as such), without raising or warning."""
    y = ops.rms_normalize(np.zeros((2, 3)), 0.0)
    assert np.all(np.isnan(y))
    assert np.all(np.isfinite(ops.rms_normalize(np.zeros(3), 1e-6)))


def test_softmax_rows_sum_to_one_and_match_math_exp() -> None:
    """softmax(x)_j = exp(x_j) / Σ exp(x_k), and each row sums to 1."""
    x = np.array([[1.0, 2.0, 3.0], [-1.0, 0.0, 0.5]])
    y = ops.softmax(x)
    for row_in, row_out in zip(x, y, strict=True):
        total = sum(math.exp(v) for v in row_in)
        np.testing.assert_allclose(row_out, [math.exp(v) / total for v in row_in], rtol=1e-14)
    np.testing.assert_allclose(y.sum(axis=-1), 1.0, rtol=1e-15)


def test_softmax_is_stable_for_huge_inputs() -> None:
    """Subtracting the max keeps softmax finite for scores like 1e4, where exp would overflow."""
    y = ops.softmax(np.array([[1e4, 1e4], [1e4, 0.0], [-1e4, -1e4 + math.log(3.0)]]))
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y[0], [0.5, 0.5], rtol=1e-15)
    np.testing.assert_array_equal(y[1], [1.0, 0.0])
    np.testing.assert_allclose(y[2], [0.25, 0.75], rtol=1e-12)


def test_softmax_gives_exactly_zero_weight_to_minus_infinity() -> None:
    """A masked score (−∞) gets weight exactly 0, and the rest share the whole weight."""
    y = ops.softmax(np.array([0.0, 0.0, -np.inf]))
    assert y[2] == 0.0
    np.testing.assert_allclose(y[:2], [0.5, 0.5], rtol=1e-15)


def test_causal_mask_is_the_lower_triangle() -> None:
    """mask[i, j] is true exactly when key j is not after query i."""
    mask = ops.causal_mask(4)
    assert mask.shape == (4, 4)
    assert mask.dtype == bool
    for i in range(4):
        for j in range(4):
            assert mask[i, j] == (j <= i)


def test_attention_scores_are_divided_by_sqrt_d_head_and_masked() -> None:
    """scores = q·k / √d_head, and the causal mask writes −∞ above the diagonal."""
    q = np.array([[[1.0, 2.0, 0.0, 1.0], [0.0, 1.0, 1.0, 1.0]]])  # [n_heads=1, pos=2, d_head=4]
    k = np.array([[[2.0, 0.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]])
    scores = ops.attention_scores(q, k, causal=False)
    by_hand = [[(2 + 0 + 0 + 1) / 2, (1 + 2 + 0 + 1) / 2], [(0 + 0 + 1 + 1) / 2, (0 + 1 + 1 + 1) / 2]]
    np.testing.assert_allclose(scores[0], by_hand, rtol=1e-15)
    masked = ops.attention_scores(q, k, causal=True)
    assert masked[0, 0, 1] == -np.inf
    np.testing.assert_array_equal(masked[0][[0, 1, 1], [0, 0, 1]], np.array(by_hand)[[0, 1, 1], [0, 0, 1]])


def test_silu_is_zero_at_zero_and_matches_its_formula() -> None:
    """SiLU(0) = 0 and SiLU(x) = x / (1 + e^(−x)), finite even for large |x|."""
    assert ops.silu(np.array(0.0)) == 0.0
    for x in (-3.0, -0.5, 0.25, 1.0, 4.0):
        assert float(ops.silu(np.array(x))) == pytest.approx(x / (1.0 + math.exp(-x)), rel=1e-14)
    big = ops.silu(np.array([-1000.0, 1000.0]))
    np.testing.assert_allclose(big, [0.0, 1000.0], atol=1e-300)


def test_gelu_is_the_tanh_form() -> None:
    """GELU(x) = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), checked point by point with math.tanh."""
    for x in (-3.0, -1.0, -0.1, 0.0, 0.5, 1.0, 2.5):
        expected = 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
        assert float(ops.gelu(np.array(x))) == pytest.approx(expected, rel=1e-14, abs=1e-300)


def test_relu_clips_negatives() -> None:
    """ReLU(x) = max(0, x)."""
    np.testing.assert_array_equal(ops.relu(np.array([-2.0, 0.0, 3.0])), [0.0, 0.0, 3.0])


def test_swiglu_with_a_closed_gate_lets_nothing_through() -> None:
    """With W_gate = 0 every gate is SiLU(0) = 0, so the hidden vector and the update are 0."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 4))
    out = ops.swiglu(x, np.zeros((4, 5)), rng.standard_normal((4, 5)), rng.standard_normal((5, 4)))
    np.testing.assert_array_equal(out["gate"], np.zeros((3, 5)))
    np.testing.assert_array_equal(out["hidden"], np.zeros((3, 5)))
    np.testing.assert_array_equal(out["out"], np.zeros((3, 4)))


def test_swiglu_by_hand() -> None:
    """SwiGLU on one row: hidden = SiLU(x W_gate) ⊙ (x W_value), out = hidden W_down."""
    x = np.array([[1.0, -2.0]])
    W_gate = np.array([[1.0, 0.0], [0.0, 1.0]])
    W_value = np.array([[2.0, 1.0], [1.0, 1.0]])
    W_down = np.array([[1.0], [3.0]])
    out = ops.swiglu(x, W_gate, W_value, W_down)
    silu = [1.0 / (1.0 + math.exp(-1.0)), -2.0 / (1.0 + math.exp(2.0))]
    value = [1.0 * 2.0 - 2.0 * 1.0, 1.0 * 1.0 - 2.0 * 1.0]
    hidden = [silu[0] * value[0], silu[1] * value[1]]
    np.testing.assert_allclose(out["hidden"][0], hidden, rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(out["out"][0], [hidden[0] * 1.0 + hidden[1] * 3.0], rtol=1e-14)


def test_dense_relu_mlp_by_hand() -> None:
    """ReLU MLP: relu(x W_in + b_in) W_out + b_out on one row worked by hand."""
    x = np.array([[1.0, -1.0]])
    W_in = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.5]])
    b_in = np.array([0.0, 0.0, -0.2])
    W_out = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.5]])
    b_out = np.array([0.1, 0.0])
    out = ops.dense_mlp(x, W_in, b_in, W_out, b_out, ops.relu)
    np.testing.assert_allclose(out["gate"][0], [1.0, -1.0, -0.2])
    np.testing.assert_allclose(out["hidden"][0], [1.0, 0.0, 0.0])
    np.testing.assert_allclose(out["out"][0], [1.1, 0.0])


def test_split_heads_gives_head_h_columns_h_times_d_head_onward() -> None:
    """Head h takes columns h·d_head … (h+1)·d_head − 1 of the projected rows."""
    x = np.arange(2 * 3 * 12, dtype=float).reshape(2, 3, 12)  # [batch, pos, n_heads * d_head]
    heads = ops.split_heads(x, 3)
    assert heads.shape == (2, 3, 3, 4)  # [batch, n_heads, pos, d_head]
    for h in range(3):
        np.testing.assert_array_equal(heads[:, h], x[..., h * 4:(h + 1) * 4])


def test_merge_heads_undoes_split_heads() -> None:
    """merge_heads(split_heads(x)) is x exactly, head 0's columns first."""
    x = np.random.default_rng(0).standard_normal((5, 12))
    for n_heads in (1, 2, 3, 4, 6, 12):
        np.testing.assert_array_equal(ops.merge_heads(ops.split_heads(x, n_heads)), x)


def test_attention_with_one_position_passes_the_value_through() -> None:
    """With a single position the pattern is [[1]], so the update is x W_V W_O."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 4))
    W_Q, W_K, W_V, W_O = (rng.standard_normal((4, 4)) for _ in range(4))
    out = ops.attention(x, W_Q, W_K, W_V, W_O, n_heads=2, causal=True)
    np.testing.assert_array_equal(out["pattern"], np.ones((2, 1, 1)))
    np.testing.assert_allclose(out["out"], x @ W_V @ W_O, rtol=1e-12)
