"""The backward pass against central finite differences, op by op and for every variant of the stack.

Each check is a directional derivative: for a random direction v, (f(x + εv) − f(x − εv)) / 2ε
must match Σ ∂f/∂x ⊙ v. Everything runs in float64 at small sizes (d 4…8, T 3…5).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from blocktrace.explorables.engine import BlockConfig, ConfigError, forward, init_params, ops
from blocktrace.explorables.engine import backward as bw
from blocktrace.explorables.engine.forward import COMBINE, PLACEMENTS, Sublayers
from blocktrace.explorables.engine.params import param_names

ROOT = Path(__file__).resolve().parents[2]
EPS = 1e-6  # finite-difference step
RTOL = 1e-5
N_DIRECTIONS = 3
NORMS = ("rmsnorm", "layernorm")
PLACEMENT_NAMES = ("pre", "post")
MLPS = ("swiglu", "gelu", "relu")
RESIDUALS = ("add", "replace")


def _noop(key: str, values: np.ndarray) -> None:
    """A record callback that keeps nothing."""


def assert_directional(f: Callable[[np.ndarray], float], x: np.ndarray, grad: np.ndarray, seed: int = 0) -> None:
    """Central differences of the scalar f along random directions agree with Σ grad ⊙ v."""
    rng = np.random.default_rng(seed)
    for _ in range(N_DIRECTIONS):
        v = rng.standard_normal(x.shape)
        numeric = (f(x + EPS * v) - f(x - EPS * v)) / (2 * EPS)
        analytic = float(np.sum(grad * v))
        atol = 1e-8 * (1.0 + np.linalg.norm(grad) * np.linalg.norm(v))  # for directions nearly orthogonal to grad
        np.testing.assert_allclose(numeric, analytic, rtol=RTOL, atol=atol)


def _rng(*seed: int) -> np.random.Generator:
    return np.random.default_rng(list(seed))


def _away_from_zero(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Random values with |x| ≥ 0.1, so a finite-difference step never crosses ReLU's kink."""
    z = _rng(seed).standard_normal(shape)
    return np.sign(z) * (0.1 + np.abs(z))


# --- operations ------------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [1e-6, 0.0])
@pytest.mark.parametrize("d", [4, 8])
def test_rms_norm_backward(d: int, eps: float) -> None:
    """RMSNorm's input gradient (gain included) matches finite differences."""
    x, w = _rng(d, 1).standard_normal((3, d)), _rng(d, 3).standard_normal((3, d))
    g = 1 + 0.3 * _rng(d, 2).standard_normal(d)
    assert_directional(lambda y: np.sum(ops.rms_norm(y, g, eps) * w), x, bw.rms_norm_backward(w, x, g, eps))


@pytest.mark.parametrize("eps", [1e-6, 0.0])
@pytest.mark.parametrize("d", [4, 8])
def test_layer_norm_backward(d: int, eps: float) -> None:
    """LayerNorm's input gradient (gain and bias included) matches finite differences."""
    x, w = _rng(d, 1).standard_normal((4, d)), _rng(d, 3).standard_normal((4, d))
    g, b = 1 + 0.3 * _rng(d, 2).standard_normal(d), 0.1 * _rng(d, 4).standard_normal(d)
    assert_directional(lambda y: np.sum(ops.layer_norm(y, g, b, eps) * w), x, bw.layer_norm_backward(w, x, g, eps))


def test_rms_normalize_gradient_is_orthogonal_to_the_row() -> None:
    """Scaling a row does not change RMSNorm's output, so the gradient has no component along the row."""
    x, w = _rng(5).standard_normal((4, 6)), _rng(6).standard_normal((4, 6))
    grad = bw.rms_normalize_backward(w, x, 0.0)
    np.testing.assert_allclose(np.sum(grad * x, axis=-1), 0.0, atol=1e-12)


def test_layer_norm_gradient_rows_sum_to_zero() -> None:
    """Adding a constant to a row does not change LayerNorm's output, so each gradient row sums to 0."""
    x, w = _rng(5).standard_normal((4, 6)), _rng(6).standard_normal((4, 6))
    grad = bw.layer_norm_backward(w, x, np.ones(6), 1e-6)
    np.testing.assert_allclose(np.sum(grad, axis=-1), 0.0, atol=1e-12)


@pytest.mark.parametrize("masked", [False, True])
def test_softmax_backward(masked: bool) -> None:
    """Softmax's input gradient matches finite differences, and masked (−inf) entries get exactly 0."""
    x, w = 2 * _rng(7).standard_normal((2, 5, 5)), _rng(8).standard_normal((2, 5, 5))
    if masked:
        x = np.where(ops.causal_mask(5), x, -np.inf)
    grad = bw.softmax_backward(w, ops.softmax(x))
    assert_directional(lambda y: np.sum(ops.softmax(y) * w), x, grad)
    if masked:
        assert np.all(grad[:, ~ops.causal_mask(5)] == 0.0)


@pytest.mark.parametrize("scale", [1.0, 0.7])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n_heads", [1, 2])
def test_attention_backward(n_heads: int, causal: bool, scale: float) -> None:
    """Multi-head attention's input gradient (mask and update scale included) matches finite differences."""
    d, n_pos = 6, 4
    r = _rng(n_heads, int(causal), 9)
    x, w = r.standard_normal((n_pos, d)), r.standard_normal((n_pos, d))
    W_Q, W_K, W_V, W_O = (r.standard_normal((d, d)) / np.sqrt(d) for _ in range(4))

    def f(y: np.ndarray) -> float:
        return float(np.sum(scale * ops.attention(y, W_Q, W_K, W_V, W_O, n_heads, causal)["out"] * w))

    grad = bw.attention_backward(w, x, W_Q, W_K, W_V, W_O, n_heads, causal, scale)
    assert_directional(f, x, grad)
    saved = ops.attention(x, W_Q, W_K, W_V, W_O, n_heads, causal)
    np.testing.assert_array_equal(bw.attention_backward(w, x, W_Q, W_K, W_V, W_O, n_heads, causal, scale, saved), grad)


def test_attention_backward_with_a_batch_axis() -> None:
    """Attention's backward accepts a leading batch axis and treats each batch row on its own."""
    d, r = 4, _rng(10)
    x, w = r.standard_normal((2, 3, d)), r.standard_normal((2, 3, d))
    W = [r.standard_normal((d, d)) for _ in range(4)]
    grad = bw.attention_backward(w, x, *W, 2, True)
    assert_directional(lambda y: float(np.sum(ops.attention(y, *W, 2, True)["out"] * w)), x, grad)
    np.testing.assert_allclose(grad[1], bw.attention_backward(w[1], x[1], *W, 2, True), rtol=1e-13)


def test_causal_attention_gradient_never_reaches_back_from_the_past() -> None:
    """With the mask, a loss on position 0 alone sends no gradient to later positions."""
    d, r = 4, _rng(11)
    x, w = r.standard_normal((4, d)), np.zeros((4, d))
    w[0] = r.standard_normal(d)
    W = [r.standard_normal((d, d)) for _ in range(4)]
    grad = bw.attention_backward(w, x, *W, 1, True)
    assert np.all(grad[1:] == 0.0) and np.any(grad[0] != 0.0)


@pytest.mark.parametrize(
    ("name", "backward", "sample"),
    [
        ("silu", bw.silu_backward, lambda: 3 * _rng(12).standard_normal((4, 7))),
        ("gelu", bw.gelu_backward, lambda: 3 * _rng(13).standard_normal((4, 7))),
        ("relu", bw.relu_backward, lambda: _away_from_zero((4, 7), 14)),
    ],
)
def test_activation_backward(name: str, backward: Callable, sample: Callable) -> None:
    """Each activation's derivative matches finite differences."""
    x, w = sample(), _rng(15).standard_normal((4, 7))
    assert_directional(lambda y: float(np.sum(getattr(ops, name)(y) * w)), x, backward(w, x))


def test_activation_backward_at_extremes_is_quiet() -> None:
    """At 0 and at ±1e4 the derivatives are finite, raise no warning, and take their limiting values."""
    x = np.array([-1e4, -0.0, 0.0, 1e4])
    ones = np.ones_like(x)
    np.testing.assert_array_equal(bw.relu_backward(ones, x), [0.0, 0.0, 0.0, 1.0])
    np.testing.assert_allclose(bw.gelu_backward(ones, x), [0.0, 0.5, 0.5, 1.0], atol=1e-12)
    np.testing.assert_allclose(bw.silu_backward(ones, x), [0.0, 0.5, 0.5, 1.0], atol=1e-12)


@pytest.mark.parametrize("d", [4, 8])
def test_swiglu_backward(d: int) -> None:
    """SwiGLU's input gradient (through gate and value) matches finite differences."""
    r, d_mlp = _rng(d, 16), 2 * d
    x, w = r.standard_normal((5, d)), r.standard_normal((5, d))
    W_gate, W_value = r.standard_normal((d, d_mlp)), r.standard_normal((d, d_mlp))
    W_down = r.standard_normal((d_mlp, d))
    grad = bw.swiglu_backward(w, x, W_gate, W_value, W_down)
    assert_directional(lambda y: float(np.sum(ops.swiglu(y, W_gate, W_value, W_down)["out"] * w)), x, grad)
    saved = ops.swiglu(x, W_gate, W_value, W_down)
    np.testing.assert_array_equal(bw.swiglu_backward(w, x, W_gate, W_value, W_down, saved), grad)


@pytest.mark.parametrize("act", ["gelu", "relu"])
def test_dense_mlp_backward(act: str) -> None:
    """The GELU and ReLU MLPs' input gradients (biases included) match finite differences."""
    r, d, d_mlp = _rng(17), 6, 12
    x, w = r.standard_normal((4, d)), r.standard_normal((4, d))
    W_in, b_in = r.standard_normal((d, d_mlp)), r.standard_normal(d_mlp)
    W_out, b_out = r.standard_normal((d_mlp, d)), r.standard_normal(d)
    assert np.min(np.abs(x @ W_in + b_in)) > 1e-3  # no step crosses ReLU's kink
    activation, activation_backward = getattr(ops, act), getattr(bw, act + "_backward")
    grad = bw.dense_mlp_backward(w, x, W_in, b_in, W_out, activation_backward)
    assert_directional(
        lambda y: float(np.sum(ops.dense_mlp(y, W_in, b_in, W_out, b_out, activation)["out"] * w)), x, grad
    )
    saved = ops.dense_mlp(x, W_in, b_in, W_out, b_out, activation)
    np.testing.assert_array_equal(bw.dense_mlp_backward(w, x, W_in, b_in, W_out, activation_backward, saved), grad)


@pytest.mark.parametrize("residual", ["add", "replace"])
def test_residual_backward(residual: str) -> None:
    """The residual step's gradients w.r.t. stream and update match finite differences of forward.py's step."""
    r = _rng(18)
    stream, update, w = (r.standard_normal((3, 4)) for _ in range(3))
    grad_stream, grad_update = bw.COMBINE[residual](w)
    both = np.stack([stream, update])
    assert_directional(
        lambda y: float(np.sum(COMBINE[residual](y[0], y[1]) * w)), both, np.stack([grad_stream, grad_update])
    )


# --- one block -------------------------------------------------------------------------------

BLOCK_VARIANTS = [
    pytest.param(*v, id="-".join(v))
    for v in itertools.product(NORMS, PLACEMENT_NAMES, MLPS, RESIDUALS)
]


@pytest.mark.parametrize(("norm", "placement", "mlp", "residual"), BLOCK_VARIANTS)
def test_block_backward(norm: str, placement: str, mlp: str, residual: str) -> None:
    """The pre- and post-norm block backward matches finite differences of forward.py's block function."""
    config = BlockConfig(
        d_model=6, n_heads=2, d_mlp=12, norm=norm, placement=placement, mlp=mlp, residual=residual,
        causal=True, attention_scale=0.8, mlp_scale=1.2, seed=5,
    )
    params = init_params(config, 0.1)
    x, w = _rng(19).standard_normal((4, 6)), _rng(20).standard_normal((4, 6))
    block, s = PLACEMENTS[placement], Sublayers(config, params, "blocks.0.")
    saved: dict[str, np.ndarray] = {}
    block(x, s, saved.__setitem__)
    grad = bw.BLOCKS[placement](w, saved, bw.SublayersBackward(config, params, "blocks.0."))
    assert_directional(lambda y: float(np.sum(block(y, s, _noop) * w)), x, grad)


# --- the whole stack -------------------------------------------------------------------------

SIZES = {1: (4, 3), 2: (6, 4), 3: (8, 5)}  # n_layers -> (d_model, n_pos)
STACK_VARIANTS = [
    pytest.param(*v, id="-".join(str(p) for p in v))
    for v in itertools.product(
        NORMS, PLACEMENT_NAMES, MLPS, RESIDUALS, (False, True), (1, 2), (1, 2, 3),
    )
]


def _stack(n_layers: int, **changes) -> tuple[BlockConfig, dict, np.ndarray]:
    d, n_pos = SIZES[n_layers]
    config = BlockConfig(d_model=d, d_mlp=2 * d, n_layers=n_layers, attention_scale=0.8, mlp_scale=1.2, seed=7)
    config = config.with_(d_head=None, **changes)
    embed = _rng(d, n_layers, 21).standard_normal((n_pos, d))
    return config, init_params(config, 0.1), embed


@pytest.mark.parametrize(("norm", "placement", "mlp", "residual", "causal", "n_heads", "n_layers"), STACK_VARIANTS)
def test_stack_gradient_matches_finite_differences(
    norm: str, placement: str, mlp: str, residual: str, causal: bool, n_heads: int, n_layers: int
) -> None:
    """∂L/∂input of the whole stack matches finite differences of forward()'s output under every variant."""
    config, params, embed = _stack(
        n_layers, norm=norm, placement=placement, mlp=mlp, residual=residual, causal=causal, n_heads=n_heads
    )
    result = bw.grad_wrt_input(config, params, embed)
    r = result.grad_output
    assert_directional(lambda y: float(np.sum(forward(config, params, y).output * r)), embed, result.grads["embed"])


PARAM_VARIANTS = [
    pytest.param(*v, id="-".join(str(p) for p in v))
    for v in itertools.product(NORMS, PLACEMENT_NAMES, MLPS, RESIDUALS, (False, True))
]


@pytest.mark.parametrize(("norm", "placement", "mlp", "residual", "causal"), PARAM_VARIANTS)
def test_every_parameter_gradient_matches_finite_differences(
    norm: str, placement: str, mlp: str, residual: str, causal: bool
) -> None:
    """∂L/∂ of every parameter of a two-block, two-head stack (batch and positions included) matches finite
    differences of forward()'s output, under every variant."""
    config, params, _ = _stack(2, norm=norm, placement=placement, mlp=mlp, residual=residual, causal=causal,
                               n_heads=2, positions=True)
    embed = _rng(5, 22).standard_normal((2, 3, config.d_model))  # [batch, pos, d_model]
    result = bw.grad_wrt_input(config, params, embed, with_params=True)
    assert list(result.param_grads) != [] and set(result.param_grads) == set(param_names(config))
    r = result.grad_output
    for i, name in enumerate(param_names(config)):
        grad = result.param_grads[name]
        assert grad.shape == params[name].shape, name

        def loss(value: np.ndarray, name: str = name) -> float:
            return float(np.sum(forward(config, {**params, name: value}, embed).output * r))

        assert_directional(loss, params[name], grad, seed=i)


def test_parameter_gradients_do_not_change_the_stream_gradients() -> None:
    """Asking for the parameters' gradients leaves the loss and every stream gradient exactly as without."""
    config, params, embed = _stack(2, mlp="gelu", norm="layernorm", n_heads=2)
    plain = bw.grad_wrt_input(config, params, embed)
    full = bw.grad_wrt_input(config, params, embed, with_params=True)
    assert plain.param_grads == {} and full.loss == plain.loss
    for key, value in plain.grads.items():
        np.testing.assert_array_equal(full.grads[key], value)


def test_a_gain_gradient_is_the_normalized_rows_weighted_by_the_output_gradient() -> None:
    """RMSNorm's gain gradient is Σ over rows of ∂y ⊙ x / RMS(x), as the lesson's formula gives it."""
    x, w = _rng(9, 1).standard_normal((2, 3, 4)), _rng(9, 2).standard_normal((2, 3, 4))
    into: dict = {}
    bw.rms_norm_backward(w, x, np.ones(4), 0.0, into)
    rms = np.sqrt(np.mean(x * x, axis=-1, keepdims=True))
    np.testing.assert_allclose(into["g"], (w * x / rms).sum(axis=(0, 1)), rtol=1e-12)


def test_dense_mlp_parameter_gradients_need_the_hidden_activations() -> None:
    """Without the forward's hidden activations the dense MLP refuses to guess its W_out gradient."""
    x, grad = _rng(3, 1).standard_normal((3, 4)), _rng(3, 2).standard_normal((3, 4))
    w_in, w_out = _rng(3, 3).standard_normal((4, 6)), _rng(3, 4).standard_normal((6, 4))
    with pytest.raises(ValueError, match="hidden"):
        bw.dense_mlp_backward(grad, x, w_in, np.zeros(6), w_out, bw.relu_backward, None, {})


@pytest.mark.parametrize(
    ("norm", "placement", "residual"), list(itertools.product(NORMS, PLACEMENT_NAMES, RESIDUALS))
)
def test_every_block_input_gradient_matches_finite_differences(norm: str, placement: str, residual: str) -> None:
    """∂L/∂resid_pre of each block of a 3-block stack matches finite differences of the blocks above it."""
    config, params, embed = _stack(3, norm=norm, placement=placement, residual=residual, causal=True, n_heads=2)
    result = bw.grad_wrt_input(config, params, embed)
    block = PLACEMENTS[placement]

    def loss_from(i: int) -> Callable[[np.ndarray], float]:
        def f(stream: np.ndarray) -> float:
            for j in range(i, config.n_layers):
                stream = block(stream, Sublayers(config, params, f"blocks.{j}."), _noop)
            return float(np.sum(stream * result.grad_output))
        return f

    for i in range(config.n_layers):
        x = result.values[f"blocks.{i}.resid_pre"]
        assert_directional(loss_from(i), x, result.grads[f"blocks.{i}.resid_pre"], seed=i)


def test_positions_and_batch_axis() -> None:
    """With position vectors and a [batch, pos, d_model] input, ∂L/∂embed still matches finite differences."""
    config, params, _ = _stack(2, positions=True, causal=True, n_heads=2)
    embed = _rng(22).standard_normal((2, 4, 6))
    result = bw.grad_wrt_input(config, params, embed)
    assert result.grads["embed"].shape == (2, 4, 6)
    r = result.grad_output
    assert_directional(lambda y: float(np.sum(forward(config, params, y).output * r)), embed, result.grads["embed"])


@pytest.mark.parametrize("placement", ["pre", "post"])
def test_forward_values_are_the_traces(placement: str) -> None:
    """The intermediates grad_wrt_input keeps are exactly forward()'s trace, under the same stable keys."""
    config, params, embed = _stack(2, placement=placement, positions=True, mlp="gelu")
    trace, result = forward(config, params, embed), bw.grad_wrt_input(config, params, embed)
    assert list(result.values) == trace.keys()
    for key in trace.keys():
        np.testing.assert_array_equal(result.values[key], trace[key])


# --- identities the depth plot relies on -----------------------------------------------------

ZERO_VARIANTS = [
    pytest.param(*v, id="-".join(v))
    for v in itertools.product(NORMS, MLPS)
]


@pytest.mark.parametrize(("norm", "mlp"), ZERO_VARIANTS)
def test_zero_updates_pass_the_gradient_unchanged(norm: str, mlp: str) -> None:
    """Pre-norm, add residuals and both update scales 0: ∂L/∂input equals ∂L/∂output exactly at every block."""
    config, params, embed = _stack(3, norm=norm, mlp=mlp, attention_scale=0.0, mlp_scale=0.0, causal=True, n_heads=2)
    result = bw.grad_wrt_input(config, params, embed)
    for grad in result.stream_grads():
        np.testing.assert_array_equal(grad, result.grad_output)


@pytest.mark.parametrize("placement", ["pre", "post"])
@pytest.mark.parametrize(("norm", "mlp"), ZERO_VARIANTS)
def test_replace_with_zero_updates_sends_no_gradient_down(norm: str, mlp: str, placement: str) -> None:
    """Replace residuals with both update scales 0: the gradient reaching every block's input is exactly 0."""
    config, params, embed = _stack(
        2, norm=norm, mlp=mlp, placement=placement, residual="replace", attention_scale=0.0, mlp_scale=0.0
    )
    result = bw.grad_wrt_input(config, params, embed)
    assert np.any(result.grad_output != 0.0)
    for i in range(config.n_layers):
        assert np.all(result.grads[f"blocks.{i}.resid_pre"] == 0.0)


def test_loss_direction_is_seeded_and_has_unit_norm() -> None:
    """R depends only on the seed and shape, has Frobenius norm 1, and is not zero."""
    config = BlockConfig(seed=3)
    r = bw.loss_direction(config, (4, 8))
    np.testing.assert_array_equal(r, bw.loss_direction(BlockConfig(seed=3, norm="layernorm"), (4, 8)))
    assert not np.array_equal(r, bw.loss_direction(BlockConfig(seed=4), (4, 8)))
    np.testing.assert_allclose(np.linalg.norm(r), 1.0, rtol=1e-14)


def test_energy_loss_and_explicit_direction() -> None:
    """The energy loss ½·mean‖row‖² and a caller's own direction both give gradients that match finite differences."""
    config, params, embed = _stack(2, placement="post", norm="layernorm", n_heads=2)
    energy = bw.grad_wrt_input(config, params, embed, loss="energy")

    def half_mean_square(y: np.ndarray) -> float:
        out = forward(config, params, y).output
        return float(0.5 * np.mean(np.sum(out * out, axis=-1)))

    np.testing.assert_allclose(energy.loss, half_mean_square(embed), rtol=1e-13)
    assert_directional(half_mean_square, embed, energy.grads["embed"])
    r = _rng(23).standard_normal(energy.output.shape)
    mine = bw.grad_wrt_input(config, params, embed, loss=r)
    np.testing.assert_array_equal(mine.grad_output, r)
    assert_directional(lambda y: float(np.sum(forward(config, params, y).output * r)), embed, mine.grads["embed"])


def test_bad_loss_is_refused() -> None:
    """An unknown loss name or a direction of the wrong shape raises ConfigError."""
    config, params, embed = _stack(1)
    with pytest.raises(ConfigError, match="loss must be one of"):
        bw.grad_wrt_input(config, params, embed, loss="cross-entropy")
    with pytest.raises(ConfigError, match="shape"):
        bw.grad_wrt_input(config, params, embed, loss=np.ones((2, 2)))


@pytest.mark.parametrize(("placement", "residual"), list(itertools.product(PLACEMENT_NAMES, RESIDUALS)))
def test_depth_profile(placement: str, residual: str) -> None:
    """depth_profile gives n_layers + 1 finite RMS and gradient norms, the last gradient norm exactly 1."""
    config = BlockConfig(d_model=8, d_mlp=16, n_layers=12, causal=True, seed=42, placement=placement, residual=residual)
    params, embed = init_params(config), _rng(24).standard_normal((4, 8))
    profile = bw.depth_profile(config, params, embed)
    assert profile["resid_rms"].shape == profile["grad_norm"].shape == (13,)
    np.testing.assert_array_equal(profile["depth"], np.arange(13))
    assert np.all(np.isfinite(profile["resid_rms"])) and np.all(np.isfinite(profile["grad_norm"]))
    np.testing.assert_allclose(profile["grad_norm"][-1], 1.0, rtol=1e-14)
    np.testing.assert_allclose(profile["resid_rms"][0], np.sqrt(np.mean(embed**2)), rtol=1e-14)
    trace = forward(config, params, embed)
    np.testing.assert_allclose(profile["resid_rms"][-1], np.sqrt(np.mean(trace.output**2)), rtol=1e-14)


@pytest.mark.parametrize(("norm", "placement"), list(itertools.product(NORMS, PLACEMENT_NAMES)))
def test_eps_zero_on_a_zero_row_gives_nan_quietly(norm: str, placement: str) -> None:
    """With eps = 0 a zero row makes the norm 0/0: the gradients show NaN plainly and raise no warning."""
    config = BlockConfig(n_layers=2, eps=0.0, norm=norm, placement=placement, residual="replace", attention_scale=0.0)
    profile = bw.depth_profile(config, init_params(config), _rng(25).standard_normal((3, 8)))
    assert np.isnan(profile["grad_norm"][0]) and np.isnan(profile["resid_rms"][-1])
    assert np.isfinite(profile["resid_rms"][0])
    np.testing.assert_allclose(profile["grad_norm"][-1], 1.0, rtol=1e-14)  # the seed's norm, to the last bit or so


def test_backward_imports_no_ui_library() -> None:
    """`import blocktrace.explorables.engine.backward` and a depth profile leave panel, bokeh and param unloaded."""
    code = (
        "import json, sys\n"
        "from blocktrace.explorables.engine import BlockConfig, init_params\n"
        "from blocktrace.explorables.engine.backward import depth_profile\n"
        "c = BlockConfig(n_layers=2)\n"
        "depth_profile(c, init_params(c), [[1.0] * 8, [0.5] * 8])\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    modules = json.loads(done.stdout.splitlines()[-1])
    assert "numpy" in modules
    assert [m for m in ("panel", "bokeh", "param") if m in modules] == []
