"""Tests for decoder.py: RMSNorm and SwiGLU from scratch, then LayerNorm and GELU swapped in.

Every function is compared with the project's engine (blocktrace.explorables.engine.ops) on random inputs, and the
last two tests rebuild the MLP half of a whole block traced by the engine. Run, in this folder:

    blocktrace check
"""

from __future__ import annotations

import math

import numpy as np

from blocktrace.explorables.engine import BlockConfig, forward, init_params, ops

EPS = 1e-6
TOL = {"rtol": 1e-9, "atol": 1e-12}


def rng(seed: int = 42) -> np.random.Generator:
    return np.random.default_rng(seed)


def swiglu_weights(d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A combined projection W [d, 4d] and an output projection W_out [2d, d]."""
    r = rng(seed)
    return r.normal(size=(d, 4 * d)) / math.sqrt(d), r.normal(size=(2 * d, d)) / math.sqrt(2 * d)


def engine_swiglu(x: np.ndarray, W: np.ndarray, W_out: np.ndarray) -> np.ndarray:
    """The engine keeps gate and value as two matrices: the combined W is their columns side by side."""
    half = W.shape[1] // 2
    return ops.swiglu(x, W[:, :half], W[:, half:], W_out)["out"]


def exact_gelu(z: np.ndarray) -> np.ndarray:
    """GELU(z) = z · Φ(z) with the error function: the other common form, not the one asked for."""
    return z * 0.5 * (1.0 + np.vectorize(math.erf)(z / math.sqrt(2.0)))


# --- RMSNorm -------------------------------------------------------------------------------------

def test_rms_norm_matches_the_engine(decoder):
    """On a random [2, 16, 512] input with a non-unit gain, rms_norm equals the engine's."""
    x = rng().normal(size=(2, 16, 512))
    gain = 1.0 + 0.1 * rng(1).normal(size=512)
    np.testing.assert_allclose(decoder.rms_norm(x, gain, EPS), ops.rms_norm(x, gain, EPS), **TOL,
                               err_msg="rms_norm differs from the engine's on a random [2, 16, 512] input")


def test_rms_norm_keeps_a_constant_vector(decoder):
    """RMSNorm only rescales: [3, 3, …] becomes [1, 1, …]; subtracting the mean would give zeros."""
    out = decoder.rms_norm(np.full((1, 8), 3.0), np.ones(8), EPS)
    all_zero = bool(np.allclose(out, 0.0))
    assert not all_zero, "your rms_norm subtracts the mean: that is LayerNorm, not RMSNorm"
    np.testing.assert_allclose(out, 1.0, atol=1e-6)


def test_rms_norm_of_a_zero_vector_is_finite(decoder):
    """eps inside the square root: without it a zero row divides 0 by 0 and gives NaN."""
    with np.errstate(all="ignore"):
        out = decoder.rms_norm(np.zeros((2, 8)), np.ones(8), EPS)
    assert np.all(np.isfinite(out)), f"RMSNorm without eps divides by zero on a zero row: got {out[0]}"


# --- SwiGLU --------------------------------------------------------------------------------------

def test_swiglu_keeps_the_stream_shape(decoder):
    """[1, 4, 8] in, [1, 4, 8] out: the MLP's update must fit the residual addition."""
    W, W_out = swiglu_weights(8)
    out = decoder.swiglu(rng().normal(size=(1, 4, 8)), W, W_out)
    assert np.shape(out) == (1, 4, 8), (
        f"swiglu must return [B, T, d] = (1, 4, 8), got {np.shape(out)}: split x W [.., 4d] into two halves of 2d, "
        "multiply them, then project with W_out [2d, d]")


def test_swiglu_matches_the_engine(decoder):
    """On random [2, 5, 16] inputs, swiglu equals the engine's SiLU(gate) ⊙ value, projected back."""
    x = rng().normal(size=(2, 5, 16))
    W, W_out = swiglu_weights(16)
    out = decoder.swiglu(x, W, W_out)
    swapped = engine_swiglu(x, np.concatenate([W[:, 32:], W[:, :32]], axis=1), W_out)
    swapped_matches = bool(np.allclose(out, swapped))
    assert not swapped_matches, "gate and value are swapped: SiLU goes on the FIRST 2d columns (the gate)"
    np.testing.assert_allclose(out, engine_swiglu(x, W, W_out), **TOL,
                               err_msg="swiglu differs from the engine's SiLU(gate) ⊙ value, times W_out")


def test_swiglu_param_count(decoder):
    """W [d, 4d] holds 4d² weights and W_out [2d, d] holds 2d²: 6d² in all (1,572,864 for d = 512)."""
    for d in (8, 64, 512, 4096):
        got = decoder.swiglu_param_count(d)
        assert got == 6 * d * d, (f"for d = {d} the SwiGLU MLP holds {6 * d * d} weights, got {got}: "
                                  "count W [d, 4d] and W_out [2d, d]")


# --- LayerNorm and GELU swapped in ---------------------------------------------------------------

def test_layer_norm_matches_the_engine(decoder):
    """On a random [2, 16, 64] input with gain and bias, layer_norm equals the engine's."""
    x = rng().normal(1.0, 2.0, size=(2, 16, 64))
    gain, bias = 1.0 + 0.1 * rng(1).normal(size=64), 0.1 * rng(2).normal(size=64)
    np.testing.assert_allclose(decoder.layer_norm(x, gain, bias, EPS), ops.layer_norm(x, gain, bias, EPS), **TOL,
                               err_msg="layer_norm differs from the engine's: centre, divide by √(var + eps), "
                                       "then gain and bias")


def test_layer_norm_centres_a_constant_vector(decoder):
    """LayerNorm subtracts the mean first, so a constant row leaves only the bias."""
    bias = np.linspace(-0.5, 0.5, 8)
    out = decoder.layer_norm(np.full((1, 8), 3.0), np.ones(8), bias, EPS)
    np.testing.assert_allclose(out[0], bias, atol=1e-6,
                               err_msg="a constant row must become the bias: LayerNorm centres before it scales")


def test_gelu_mlp_matches_the_engine(decoder):
    """On random [2, 5, 8] inputs with hidden width 4d, gelu_mlp equals the engine's tanh-GELU MLP."""
    r = rng(3)
    d = 8
    x = r.normal(size=(2, 5, d))
    W_in, b_in = r.normal(size=(d, 4 * d)) / math.sqrt(d), 0.1 * r.normal(size=4 * d)
    W_out, b_out = r.normal(size=(4 * d, d)) / math.sqrt(4 * d), 0.1 * r.normal(size=d)
    out = decoder.gelu_mlp(x, W_in, b_in, W_out, b_out)
    erf_form = exact_gelu(x @ W_in + b_in) @ W_out + b_out
    erf_matches = bool(np.allclose(out, erf_form, rtol=1e-9, atol=1e-12))
    assert not erf_matches, "you used the exact (erf) GELU; this exercise and the engine use the tanh form"
    np.testing.assert_allclose(out, ops.dense_mlp(x, W_in, b_in, W_out, b_out, ops.gelu)["out"], **TOL,
                               err_msg="gelu_mlp differs from the engine's GELU(x W_in + b_in) W_out + b_out")


# --- whole blocks ----------------------------------------------------------------------------------

def _traced(norm: str, mlp: str, d_mlp: int):
    config = BlockConfig(d_model=8, n_heads=2, d_mlp=d_mlp, norm=norm, mlp=mlp, causal=True, seed=42)
    params = init_params(config)  # gains near 1, small biases: not the trivial values
    trace = forward(config, params, rng(4).normal(size=(1, 4, 8)))
    return config, params, trace


def test_rmsnorm_swiglu_block_matches_the_engine(decoder):
    """resid_post = resid_mid + SwiGLU(RMSNorm(resid_mid)) with the engine's own weights (d = 8, 4d = 32)."""
    config, p, trace = _traced("rmsnorm", "swiglu", 16)
    mid = trace["blocks.0.resid_mid"]
    W = np.concatenate([p["blocks.0.mlp.W_gate"], p["blocks.0.mlp.W_value"]], axis=1)  # [8, 32]
    normed = decoder.rms_norm(mid, p["blocks.0.ln2.g"], config.eps)
    out = mid + decoder.swiglu(normed, W, p["blocks.0.mlp.W_down"])
    np.testing.assert_allclose(out, trace["blocks.0.resid_post"], **TOL,
                               err_msg="the MLP half of the engine's RMSNorm + SwiGLU block does not match")


def test_layernorm_gelu_block_matches_the_engine(decoder):
    """Swap both choices; the residual line stays the same: resid_post = resid_mid + MLP(Norm(resid_mid))."""
    config, p, trace = _traced("layernorm", "gelu", 32)
    mid = trace["blocks.0.resid_mid"]
    normed = decoder.layer_norm(mid, p["blocks.0.ln2.g"], p["blocks.0.ln2.b"], config.eps)
    out = mid + decoder.gelu_mlp(normed, p["blocks.0.mlp.W_in"], p["blocks.0.mlp.b_in"], p["blocks.0.mlp.W_out"],
                                 p["blocks.0.mlp.b_out"])
    np.testing.assert_allclose(out, trace["blocks.0.resid_post"], **TOL,
                               err_msg="the MLP half of the engine's LayerNorm + GELU block does not match")
