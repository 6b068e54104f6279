"""The identities the lessons teach, asserted for every variant of the block.

Every combination of norm × placement × MLP × residual × causal runs at three sizes (one head
and one block; three heads, two blocks and position vectors; two heads and three blocks). Expected values are computed
here from the parameters with plain NumPy, not read back from the engine.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import pytest

from blocktrace.explorables.engine import BlockConfig, Trace, block_keys, forward, init_params
from blocktrace.explorables.engine.params import position_vectors

NORMS = ("rmsnorm", "layernorm")
PLACEMENTS = ("pre", "post")
MLPS = ("swiglu", "gelu", "relu")
RESIDUALS = ("add", "replace")
CAUSAL = (False, True)
SIZES = {  # name -> (d_model, n_heads, n_layers, positions, n_pos)
    "1head-1layer": (4, 1, 1, False, 3),
    "3heads-2layers-pos": (6, 3, 2, True, 4),
    "2heads-3layers": (8, 2, 3, False, 5),
}
VARIANTS = [
    pytest.param(*v, id="-".join(str(p) for p in v))
    for v in itertools.product(NORMS, PLACEMENTS, MLPS, RESIDUALS, CAUSAL, SIZES)
]
POST_VARIANTS = [
    pytest.param(*v, id="-".join(str(p) for p in v))
    for v in itertools.product(NORMS, ("post",), MLPS, RESIDUALS, CAUSAL, SIZES)
]
EPS = 1e-10  # small, so that normalised rows have RMS 1 to well within the tolerances below


@functools.cache
def _config(norm: str, placement: str, mlp: str, residual: str, causal: bool, size: str, **changes) -> BlockConfig:
    d_model, n_heads, n_layers, positions, _ = SIZES[size]
    return BlockConfig(
        d_model=d_model, n_heads=n_heads, d_mlp=4 * d_model, n_layers=n_layers, norm=norm, placement=placement,
        mlp=mlp, residual=residual, causal=causal, positions=positions, eps=EPS, seed=7, **changes,
    )


def _embed(size: str) -> np.ndarray:
    d_model, _, _, _, n_pos = SIZES[size]
    return np.random.default_rng(11).standard_normal((n_pos, d_model)) * 1.5


@functools.cache
def _trace(*variant, gain_jitter: float = 0.1, **changes) -> Trace:
    config = _config(*variant, **changes)
    return forward(config, init_params(config, gain_jitter), _embed(variant[-1]))


# --- independent re-statements of the operations, for expected values ---------------------

def _norm(x: np.ndarray, trace: Trace, name: str) -> np.ndarray:
    c, p = trace.config, trace.params
    if c.norm == "rmsnorm":
        return x / np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + c.eps) * p[name + ".g"]
    centred = x - x.mean(axis=-1, keepdims=True)
    return centred / np.sqrt(np.mean(centred**2, axis=-1, keepdims=True) + c.eps) * p[name + ".g"] + p[name + ".b"]


def _attention_update(x: np.ndarray, trace: Trace, prefix: str) -> np.ndarray:
    """attention_scale · concat_h(pattern_h @ V_h) @ W_O, head by head with explicit column slices."""
    c, p = trace.config, trace.params
    q, k, v = (x @ p[f"{prefix}attn.W_{n}"] for n in "QKV")
    n_pos, dh = x.shape[0], c.d_head
    heads = []
    for h in range(c.n_heads):
        cols = slice(h * dh, (h + 1) * dh)
        out = np.zeros((n_pos, dh))
        for i in range(n_pos):
            visible = range(i + 1) if c.causal else range(n_pos)
            s = [float(q[i, cols] @ k[j, cols]) / math.sqrt(dh) for j in visible]
            w = [math.exp(v_ - max(s)) for v_ in s]
            for j, w_j in zip(visible, w, strict=True):
                out[i] += w_j / sum(w) * v[j, cols]
        heads.append(out)
    return c.attention_scale * np.concatenate(heads, axis=-1) @ p[f"{prefix}attn.W_O"]


def _mlp_update(x: np.ndarray, trace: Trace, prefix: str) -> np.ndarray:
    c, p = trace.config, trace.params
    if c.mlp == "swiglu":
        gate = x @ p[prefix + "mlp.W_gate"]
        hidden = gate / (1.0 + np.exp(-gate)) * (x @ p[prefix + "mlp.W_value"])
        return c.mlp_scale * hidden @ p[prefix + "mlp.W_down"]
    pre = x @ p[prefix + "mlp.W_in"] + p[prefix + "mlp.b_in"]
    if c.mlp == "relu":
        hidden = np.where(pre > 0, pre, 0.0)
    else:
        hidden = 0.5 * pre * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (pre + 0.044715 * pre**3)))
    return c.mlp_scale * (hidden @ p[prefix + "mlp.W_out"] + p[prefix + "mlp.b_out"])


def _blocks(trace: Trace) -> list[str]:
    return [f"blocks.{i}." for i in range(trace.config.n_layers)]


TOL = {"rtol": 1e-10, "atol": 1e-12}


# --- the residual lines ------------------------------------------------------------------

@pytest.mark.parametrize(("norm", "placement", "mlp", "residual", "causal", "size"), VARIANTS)
def test_residual_lines(norm: str, placement: str, mlp: str, residual: str, causal: bool, size: str) -> None:
    """Pre-norm add: resid_mid = resid_pre + attn_out, resid_post = resid_mid + mlp_out; replace keeps only the update;
    post-norm normalises each sum."""
    t = _trace(norm, placement, mlp, residual, causal, size)
    for b in _blocks(t):
        pre, attn, mid, mlp_out, post = (t[b + k] for k in ("resid_pre", "attn_out", "resid_mid", "mlp_out",
                                                             "resid_post"))
        first = pre + attn if residual == "add" else attn
        if placement == "pre":
            np.testing.assert_array_equal(mid, first)
            second = mid + mlp_out if residual == "add" else mlp_out
            np.testing.assert_array_equal(post, second)
        else:
            np.testing.assert_allclose(mid, _norm(first, t, b + "ln1"), **TOL)
            second = mid + mlp_out if residual == "add" else mlp_out
            np.testing.assert_allclose(post, _norm(second, t, b + "ln2"), **TOL)
            np.testing.assert_array_equal(t[b + "ln1.normalized"], mid)
            np.testing.assert_array_equal(t[b + "ln2.normalized"], post)


@pytest.mark.parametrize(("norm", "placement", "mlp", "residual", "causal", "size"), VARIANTS)
def test_stream_flows_from_block_to_block(norm: str, placement: str, mlp: str, residual: str, causal: bool,
                                          size: str) -> None:
    """The first block reads embed (+ pos_embed when positions are on); each later block reads the one before."""
    t = _trace(norm, placement, mlp, residual, causal, size)
    first_in = t["embed"] + position_vectors(*t["embed"].shape) if t.config.positions else t["embed"]
    np.testing.assert_array_equal(t["blocks.0.resid_pre"], first_in)
    for i in range(1, t.config.n_layers):
        np.testing.assert_array_equal(t[f"blocks.{i}.resid_pre"], t[f"blocks.{i - 1}.resid_post"])
    np.testing.assert_array_equal(t.output, t[f"blocks.{t.config.n_layers - 1}.resid_post"])


@pytest.mark.parametrize(("norm", "placement", "mlp", "residual", "causal", "size"), VARIANTS)
def test_sublayers_match_their_equations(norm: str, placement: str, mlp: str, residual: str, causal: bool,
                                         size: str) -> None:
    """Norm, attention (head h on columns h·d_head…, scores over √d_head) and MLP equal an independent computation."""
    t = _trace(norm, placement, mlp, residual, causal, size)
    for b in _blocks(t):
        if placement == "pre":
            attn_in = _norm(t[b + "resid_pre"], t, b + "ln1")
            np.testing.assert_allclose(t[b + "ln1.normalized"], attn_in, **TOL)
            mlp_in = _norm(t[b + "resid_mid"], t, b + "ln2")
            np.testing.assert_allclose(t[b + "ln2.normalized"], mlp_in, **TOL)
        else:
            attn_in, mlp_in = t[b + "resid_pre"], t[b + "resid_mid"]
        np.testing.assert_allclose(t[b + "attn_out"], _attention_update(attn_in, t, b), **TOL)
        np.testing.assert_allclose(t[b + "mlp_out"], _mlp_update(mlp_in, t, b), **TOL)


@pytest.mark.parametrize(("norm", "placement", "mlp", "residual", "causal", "size"), VARIANTS)
def test_attention_rows_sum_to_one_and_masked_entries_are_zero(norm: str, placement: str, mlp: str, residual: str,
                                                                causal: bool, size: str) -> None:
    """Every row of attention weights sums to 1; under the causal mask the future gets exactly 0 and score −∞."""
    t = _trace(norm, placement, mlp, residual, causal, size)
    for b in _blocks(t):
        pattern, scores = t[b + "attn.pattern"], t[b + "attn.scores"]
        np.testing.assert_allclose(pattern.sum(axis=-1), 1.0, rtol=1e-13)
        assert np.all(pattern >= 0.0)
        future = np.triu(np.ones(pattern.shape[-2:], dtype=bool), k=1)
        if causal:
            assert np.all(pattern[:, future] == 0.0)
            assert np.all(scores[:, future] == -np.inf)
            assert np.all(np.isfinite(scores[:, ~future]))
        else:
            assert np.all(np.isfinite(scores))
            assert np.all(pattern > 0.0)


@pytest.mark.parametrize(("norm", "placement", "mlp", "residual", "causal", "size"), VARIANTS)
def test_stage_keys_in_forward_order(norm: str, placement: str, mlp: str, residual: str, causal: bool,
                                     size: str) -> None:
    """The trace lists embed, pos_embed (iff positions are on), then block_keys(config) per block, as blocks.{i}.*."""
    t = _trace(norm, placement, mlp, residual, causal, size)
    c = t.config
    expected = ["embed"] + (["pos_embed"] if c.positions else [])
    expected += [f"blocks.{i}.{k}" for i in range(c.n_layers) for k in block_keys(c)]
    assert t.keys() == expected
    assert ("pos_embed" in t) == c.positions
    assert len(set(t.keys())) == len(t.keys())


@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("mlp", MLPS)
def test_block_keys_are_the_lessons_order(placement: str, mlp: str) -> None:
    """block_keys follows the issue's list; post-norm moves each norm after its addition; only SwiGLU has mlp.value."""
    config = BlockConfig(placement=placement, mlp=mlp)
    mlp_keys = ["mlp.gate"] + (["mlp.value"] if mlp == "swiglu" else []) + ["mlp.hidden", "mlp_out"]
    attn_keys = ["attn.q", "attn.k", "attn.v", "attn.scores", "attn.pattern", "attn_out"]
    if placement == "pre":
        expected = ["resid_pre", "ln1.normalized", *attn_keys, "resid_mid", "ln2.normalized", *mlp_keys, "resid_post"]
    else:
        expected = ["resid_pre", *attn_keys, "ln1.normalized", "resid_mid", *mlp_keys, "ln2.normalized", "resid_post"]
    assert block_keys(config) == expected


@pytest.mark.parametrize(("norm", "placement", "mlp", "residual", "causal", "size"), VARIANTS)
def test_stage_shapes(norm: str, placement: str, mlp: str, residual: str, causal: bool, size: str) -> None:
    """Stream stages are [pos, d_model], q/k/v [n_heads, pos, d_head], scores/pattern [n_heads, pos, pos],
    MLP stages [pos, d_mlp]."""
    t = _trace(norm, placement, mlp, residual, causal, size)
    c = t.config
    n_pos = t["embed"].shape[0]
    for stage in t:
        local = stage.local_key
        if local in ("attn.q", "attn.k", "attn.v"):
            want = (c.n_heads, n_pos, c.d_head)
        elif local in ("attn.scores", "attn.pattern"):
            want = (c.n_heads, n_pos, n_pos)
        elif local.startswith("mlp."):
            want = (n_pos, c.d_mlp)
        else:
            want = (n_pos, c.d_model)
        assert stage.values.shape == want, stage.key


@pytest.mark.parametrize(("norm", "placement", "mlp", "residual", "causal", "size"), POST_VARIANTS)
def test_post_norm_output_rows_are_normalised(norm: str, placement: str, mlp: str, residual: str, causal: bool,
                                              size: str) -> None:
    """With unit gains and zero biases, post-norm outputs have RMS 1 (RMSNorm) or mean 0 and std 1 (LayerNorm)."""
    t = _trace(norm, placement, mlp, residual, causal, size, gain_jitter=0.0)
    for b in _blocks(t):
        for key in ("resid_mid", "resid_post"):
            rows = t[b + key]
            if norm == "rmsnorm":
                np.testing.assert_allclose(np.sqrt(np.mean(rows**2, axis=-1)), 1.0, rtol=1e-6)
            else:
                np.testing.assert_allclose(rows.mean(axis=-1), 0.0, atol=1e-12)
                np.testing.assert_allclose(rows.std(axis=-1), 1.0, rtol=1e-6)


@pytest.mark.parametrize(("norm", "placement", "mlp", "residual", "causal", "size"), VARIANTS)
def test_zero_updates(norm: str, placement: str, mlp: str, residual: str, causal: bool, size: str) -> None:
    """With both update scales 0: pre-norm add returns the input exactly, post-norm add returns it normalised
    twice per block, and replace erases it (rows become Norm(0): zeros, or LayerNorm 2's bias)."""
    t = _trace(norm, placement, mlp, residual, causal, size, attention_scale=0.0, mlp_scale=0.0)
    stream = t["blocks.0.resid_pre"]
    for b in _blocks(t):
        np.testing.assert_array_equal(t[b + "attn_out"], np.zeros_like(stream))
        np.testing.assert_array_equal(t[b + "mlp_out"], np.zeros_like(stream))
        if residual == "replace":
            stream = np.zeros_like(stream)
            if placement == "post":
                stream = _norm(stream, t, b + "ln2")
        elif placement == "post":
            stream = _norm(_norm(stream, t, b + "ln1"), t, b + "ln2")
        np.testing.assert_allclose(t[b + "resid_post"], stream, **TOL)
    if residual == "add" and placement == "pre":
        np.testing.assert_array_equal(t.output, t["blocks.0.resid_pre"])
    if residual == "replace" and (placement == "pre" or norm == "rmsnorm"):
        np.testing.assert_array_equal(t.output, np.zeros_like(t.output))
    if residual == "replace" and placement == "post" and norm == "layernorm":
        last = f"blocks.{t.config.n_layers - 1}.ln2.b"
        np.testing.assert_allclose(t.output, np.broadcast_to(t.params[last], t.output.shape), **TOL)


@pytest.mark.parametrize("residual", RESIDUALS)
@pytest.mark.parametrize("placement", PLACEMENTS)
def test_replace_with_zero_updates_forgets_the_input(placement: str, residual: str) -> None:
    """In replace mode with zero updates the output no longer depends on the input; in add mode it does."""
    config = BlockConfig(d_model=4, n_heads=2, d_mlp=8, residual=residual, placement=placement,
                         attention_scale=0.0, mlp_scale=0.0)
    params = init_params(config)
    a = forward(config, params, np.array([[1.0, 2.0, 3.0, 4.0], [-1.0, 0.5, 0.0, 2.0]])).output
    b = forward(config, params, np.array([[-4.0, 0.0, 1.0, 9.0], [3.0, 3.0, -1.0, 0.25]])).output
    assert np.array_equal(a, b) == (residual == "replace")


def test_lesson_constant_vector_with_attention_off() -> None:
    """The lesson's [2, 2, 2, 2] at scale 0: RMSNorm gives [1, 1, 1, 1] (unit gains); resid_mid equals the input."""
    config = BlockConfig(d_model=4, n_heads=1, d_mlp=8, attention_scale=0.0, eps=0.0)
    t = forward(config, init_params(config, gain_jitter=0.0), np.array([[2.0, 2.0, 2.0, 2.0]]))
    np.testing.assert_array_equal(t["blocks.0.ln1.normalized"], [[1.0, 1.0, 1.0, 1.0]])
    np.testing.assert_array_equal(t["blocks.0.resid_mid"], [[2.0, 2.0, 2.0, 2.0]])
    np.testing.assert_array_equal(t["blocks.0.attn.pattern"], [[[1.0]]])


def test_layer_norm_erases_a_constant_vector_inside_the_block() -> None:
    """Same constant input under LayerNorm: the normalised view is LayerNorm's bias alone, the stream survives."""
    config = BlockConfig(d_model=4, n_heads=1, d_mlp=8, norm="layernorm", attention_scale=0.0)
    t = forward(config, init_params(config), np.array([[2.0, 2.0, 2.0, 2.0]]))
    np.testing.assert_array_equal(t["blocks.0.ln1.normalized"], t.params["blocks.0.ln1.b"][None, :])
    np.testing.assert_array_equal(t["blocks.0.resid_mid"], [[2.0, 2.0, 2.0, 2.0]])


def test_batched_input_matches_each_sequence_alone() -> None:
    """A [batch, pos, d_model] input gives, per batch element, the same stages as that sequence alone."""
    config = BlockConfig(d_model=6, n_heads=2, d_mlp=12, n_layers=2, causal=True, positions=True)
    params = init_params(config)
    x = np.random.default_rng(2).standard_normal((2, 3, 6))
    batched = forward(config, params, x)
    for i in range(2):
        alone = forward(config, params, x[i])
        assert alone.keys() == batched.keys()
        for stage in alone:
            got = batched[stage.key] if stage.key == "pos_embed" else batched[stage.key][i]  # slots are shared
            np.testing.assert_allclose(got, stage.values, rtol=1e-12, atol=1e-14)


# --- parameters --------------------------------------------------------------------------

def _contract_shapes(c: BlockConfig) -> dict[str, tuple[int, ...]]:
    """The parameter names and shapes the JSON export contract promises."""
    d, inner, hidden = c.d_model, c.n_heads * c.d_head, c.d_mlp
    shapes: dict[str, tuple[int, ...]] = {}
    for i in range(c.n_layers):
        p = f"blocks.{i}."
        for ln in ("ln1", "ln2"):
            shapes[f"{p}{ln}.g"] = (d,)
            if c.norm == "layernorm":
                shapes[f"{p}{ln}.b"] = (d,)
        shapes.update({f"{p}attn.W_{n}": (d, inner) for n in "QKV"})
        shapes[f"{p}attn.W_O"] = (inner, d)
        if c.mlp == "swiglu":
            shapes.update({f"{p}mlp.W_gate": (d, hidden), f"{p}mlp.W_value": (d, hidden),
                           f"{p}mlp.W_down": (hidden, d)})
        else:
            shapes.update({f"{p}mlp.W_in": (d, hidden), f"{p}mlp.b_in": (hidden,), f"{p}mlp.W_out": (hidden, d),
                           f"{p}mlp.b_out": (d,)})
    return shapes


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("mlp", MLPS)
@pytest.mark.parametrize(("d_model", "n_heads", "d_head", "n_layers"), [(4, 1, None, 1), (8, 2, None, 3), (6, 2, 5, 2)])
def test_param_shapes_follow_the_contract(norm: str, mlp: str, d_model: int, n_heads: int, d_head: int | None,
                                          n_layers: int) -> None:
    """init_params gives exactly the contract's names: W_Q/W_K/W_V [d_model, n_heads·d_head], W_O the transpose, etc."""
    config = BlockConfig(d_model=d_model, n_heads=n_heads, d_head=d_head, d_mlp=5, n_layers=n_layers, norm=norm,
                         mlp=mlp)
    params = init_params(config)
    want = _contract_shapes(config)
    assert set(params) == set(want)
    for name, shape in want.items():
        assert params[name].shape == shape, name
        assert np.all(np.isfinite(params[name]))


def test_default_d_head_is_width_over_heads() -> None:
    """d_head defaults to d_model // n_heads, and a width the heads do not divide is refused."""
    from blocktrace.explorables.engine import ConfigError

    assert BlockConfig(d_model=12, n_heads=3).d_head == 4
    with pytest.raises(ConfigError, match="divisible"):
        BlockConfig(d_model=4, n_heads=3)


def test_with_rederives_the_default_head_width() -> None:
    """Changing n_heads or d_model with with_() re-derives a d_head that was never set, like constructing afresh."""
    assert BlockConfig(d_model=8).with_(n_heads=2) == BlockConfig(d_model=8, n_heads=2)
    assert BlockConfig(d_model=8).with_(d_model=16) == BlockConfig(d_model=16)


def test_unit_gain_jitter_gives_unit_gains_and_zero_biases() -> None:
    """init_params(config, gain_jitter=0) gives gains exactly 1 and biases exactly 0."""
    config = BlockConfig(d_model=4, d_mlp=6, norm="layernorm", mlp="gelu", n_layers=2)
    params = init_params(config, gain_jitter=0.0)
    for name, value in params.items():
        leaf = name.rsplit(".", 1)[1]
        if leaf == "g":
            np.testing.assert_array_equal(value, np.ones_like(value))
        elif leaf.startswith("b"):
            np.testing.assert_array_equal(value, np.zeros_like(value))


def test_same_seed_same_params_other_seed_other_params() -> None:
    """Parameters are a function of the seed: equal for equal seeds, different for different seeds."""
    config = BlockConfig(d_model=8, n_heads=2, n_layers=2, seed=3)
    a, b = init_params(config), init_params(config)
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])
    other = init_params(config.with_(seed=4))
    assert not np.array_equal(a["blocks.0.attn.W_Q"], other["blocks.0.attn.W_Q"])


def test_params_are_drawn_per_name() -> None:
    """Switching the norm or MLP family, or adding blocks, leaves the shared weights (e.g. W_Q) unchanged."""
    base = BlockConfig(d_model=8, n_heads=2, seed=5)
    ref = init_params(base)
    for changed in (base.with_(norm="layernorm"), base.with_(mlp="relu"), base.with_(placement="post"),
                    base.with_(n_layers=3), base.with_(residual="replace")):
        params = init_params(changed)
        for name in ("blocks.0.attn.W_Q", "blocks.0.attn.W_K", "blocks.0.attn.W_V", "blocks.0.attn.W_O",
                     "blocks.0.ln1.g"):
            np.testing.assert_array_equal(params[name], ref[name])
    assert not np.array_equal(ref["blocks.0.attn.W_Q"], ref["blocks.0.attn.W_K"])
