"""Property tests over random small configurations and random finite inputs (hypothesis)."""

from __future__ import annotations

import warnings

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from blocktrace.explorables.engine import BlockConfig, Trace, forward, init_params

# Under `-W error`, a failing property crashes pytest (INTERNALERROR, no falsifying example shown):
# Hypothesis's report imports libcst, whose typing_inspect touches the deprecated mypy_extensions.TypedDict.
# Importing that report helper once here, with the warning silenced, keeps failures readable.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    try:
        import hypothesis.extra._patching  # noqa: F401
    except ImportError:  # libcst absent: Hypothesis then skips the patch and the warning never arises
        pass

PROPERTY_SETTINGS = settings(max_examples=50, deadline=None, database=None)


@st.composite
def configs(draw: st.DrawFn, **fixed) -> BlockConfig:
    """A small random configuration; keyword arguments pin fields."""
    n_heads = draw(st.integers(1, 3))
    fields = {
        "d_model": n_heads * draw(st.integers(1, 4)),
        "n_heads": n_heads,
        "d_mlp": draw(st.integers(1, 8)),
        "n_layers": draw(st.integers(1, 3)),
        "norm": draw(st.sampled_from(["rmsnorm", "layernorm"])),
        "placement": draw(st.sampled_from(["pre", "post"])),
        "mlp": draw(st.sampled_from(["swiglu", "gelu", "relu"])),
        "residual": draw(st.sampled_from(["add", "replace"])),
        "attention_scale": draw(st.floats(-3.0, 3.0)),
        "mlp_scale": draw(st.floats(-3.0, 3.0)),
        "causal": draw(st.booleans()),
        "positions": draw(st.booleans()),
        "eps": draw(st.floats(1e-12, 1.0)),
        "seed": draw(st.integers(0, 2**32 - 1)),
    }
    fields.update(fixed)
    return BlockConfig(**fields)


def inputs(config: BlockConfig, min_pos: int = 1, bound: float = 1e6) -> st.SearchStrategy[np.ndarray]:
    """Random finite [pos, d_model] embeddings within the engine's accepted range."""
    return st.integers(min_pos, 5).flatmap(
        lambda n_pos: arrays(np.float64, (n_pos, config.d_model),
                             elements=st.floats(-bound, bound, allow_nan=False, allow_infinity=False))
    )


@st.composite
def cases(draw: st.DrawFn, min_pos: int = 1, bound: float = 1e6, **fixed) -> tuple[BlockConfig, np.ndarray]:
    config = draw(configs(**fixed))
    return config, draw(inputs(config, min_pos, bound))


def _run(config: BlockConfig, x: np.ndarray) -> Trace:
    return forward(config, init_params(config), x)


def _pos_axis(values: np.ndarray) -> int:
    return 1 if values.ndim == 3 else 0  # [n_heads, pos, ...] or [pos, ...]


@PROPERTY_SETTINGS
@given(cases())
def test_finite_in_finite_out(case: tuple[BlockConfig, np.ndarray]) -> None:
    """With eps > 0, finite inputs give finite values at every stage (masked scores aside)."""
    config, x = case
    trace = _run(config, x)
    for stage in trace:
        values = stage.values
        if stage.local_key == "attn.scores" and config.causal:
            future = np.triu(np.ones(values.shape[-2:], dtype=bool), k=1)
            assert np.all(values[:, future] == -np.inf)
            values = values[:, ~future]
        assert np.all(np.isfinite(values)), stage.key


@PROPERTY_SETTINGS
@given(cases())
def test_attention_rows_sum_to_one(case: tuple[BlockConfig, np.ndarray]) -> None:
    """Every head's every row of attention weights is non-negative and sums to 1."""
    config, x = case
    trace = _run(config, x)
    for i in range(config.n_layers):
        pattern = trace[f"blocks.{i}.attn.pattern"]
        assert np.all(pattern >= 0.0)
        np.testing.assert_allclose(pattern.sum(axis=-1), 1.0, rtol=1e-12)


@PROPERTY_SETTINGS
@given(cases(min_pos=2, causal=True), st.data())
def test_causal_safety(case: tuple[BlockConfig, np.ndarray], data: st.DataObject) -> None:
    """Under the causal mask, corrupting position j leaves every stage at positions before j exactly unchanged."""
    config, x = case
    j = data.draw(st.integers(1, x.shape[0] - 1), label="corrupted position")
    corrupted = x.copy()
    corrupted[j] = 999.0
    params = init_params(config)
    clean, dirty = forward(config, params, x), forward(config, params, corrupted)
    assert clean.keys() == dirty.keys()
    for stage in clean:
        axis = _pos_axis(stage.values)
        before = np.take(stage.values, range(j), axis=axis)
        assert np.array_equal(before, np.take(dirty[stage.key], range(j), axis=axis)), stage.key


@PROPERTY_SETTINGS
@given(cases(min_pos=2, bound=10.0, causal=False, positions=False), st.data())
def test_permutation_equivariance(case: tuple[BlockConfig, np.ndarray], data: st.DataObject) -> None:
    """With positions off and no mask, permuting the input rows permutes every stage's rows the same way."""
    config, x = case
    perm = data.draw(st.permutations(range(x.shape[0])), label="permutation")
    params = init_params(config)
    plain, permuted = forward(config, params, x), forward(config, params, x[perm])
    for stage in plain:
        expected = stage.values
        if stage.local_key in ("attn.scores", "attn.pattern"):
            expected = expected[:, perm][:, :, perm]
        elif expected.ndim == 3:
            expected = expected[:, perm]
        else:
            expected = expected[perm]
        np.testing.assert_allclose(permuted[stage.key], expected, rtol=1e-9, atol=1e-9, err_msg=stage.key)


@PROPERTY_SETTINGS
@given(cases(placement="pre", residual="add", attention_scale=0.0, mlp_scale=0.0))
def test_zero_scales_return_the_stream_unchanged(case: tuple[BlockConfig, np.ndarray]) -> None:
    """Pre-norm with additive residuals and both update scales 0 outputs the incoming stream exactly."""
    config, x = case
    trace = _run(config, x)
    np.testing.assert_array_equal(trace.output, trace["blocks.0.resid_pre"])
    if not config.positions:
        np.testing.assert_array_equal(trace.output, x)


@PROPERTY_SETTINGS
@given(cases(placement="pre", residual="replace", attention_scale=0.0, mlp_scale=0.0))
def test_replace_with_zero_updates_erases_the_stream(case: tuple[BlockConfig, np.ndarray]) -> None:
    """Pre-norm replace mode with zero updates throws the stream away: every block outputs zeros."""
    config, x = case
    trace = _run(config, x)
    for i in range(config.n_layers):
        np.testing.assert_array_equal(trace[f"blocks.{i}.resid_mid"], np.zeros_like(x))
        np.testing.assert_array_equal(trace[f"blocks.{i}.resid_post"], np.zeros_like(x))
