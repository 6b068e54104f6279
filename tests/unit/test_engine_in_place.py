"""The engine's in-place arithmetic and shared tables: they never reach a caller's arrays or another stage."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from blocktrace.explorables.engine import BlockConfig, forward, init_params, ops
from blocktrace.explorables.engine.params import position_vectors
from blocktrace.explorables.engine.stages import BLOCK_KEYS, describe, stage_texts

VARIANTS = list(itertools.product(("rmsnorm", "layernorm"), ("pre", "post"), ("swiglu", "gelu", "relu"),
                                  ("add", "replace")))


def read_only(array: np.ndarray) -> np.ndarray:
    array = np.array(array, dtype=float)
    array.flags.writeable = False
    return array


@pytest.mark.parametrize(("norm", "placement", "mlp", "residual"), VARIANTS)
def test_a_trace_writes_into_neither_its_input_nor_its_parameters(norm, placement, mlp, residual):
    """Read-only input and weights trace without error: no in-place step writes into what the caller handed in."""
    config = BlockConfig(d_model=6, n_heads=2, d_mlp=10, n_layers=2, norm=norm, placement=placement, mlp=mlp,
                         residual=residual, causal=True, positions=True, attention_scale=0.5, mlp_scale=2.0)
    params = {name: read_only(value) for name, value in init_params(config).items()}
    embed = read_only(np.random.default_rng(0).standard_normal((4, 6)))
    before = {name: value.copy() for name, value in params.items()}
    trace = forward(config, params, embed)
    assert np.array_equal(trace["embed"], embed)
    assert all(np.array_equal(params[name], before[name]) for name in params)


@pytest.mark.parametrize(("norm", "placement", "mlp", "residual"), VARIANTS)
def test_stages_share_memory_only_when_they_are_the_same_array(norm, placement, mlp, residual):
    """Scaling an update in place must not alter another stage: distinct stages never overlap in memory."""
    config = BlockConfig(d_model=4, n_heads=1, d_mlp=8, n_layers=2, norm=norm, placement=placement, mlp=mlp,
                         residual=residual, causal=True, attention_scale=0.5, mlp_scale=2.0)
    trace = forward(config, init_params(config), np.random.default_rng(1).standard_normal((3, 4)))
    for a, b in itertools.combinations(trace, 2):
        if a.values is not b.values:
            assert not np.may_share_memory(a.values, b.values), (a.key, b.key)


def test_elementwise_ops_leave_their_input_unchanged():
    """sigmoid, SiLU, softmax and SwiGLU work in place on their own results only, never on their arguments."""
    x = read_only(np.linspace(-30.0, 30.0, 24).reshape(4, 6))
    for op in (ops.sigmoid, ops.silu, ops.softmax):
        op(x)
    ops.swiglu(x, read_only(np.ones((6, 3))), read_only(np.ones((6, 3))), read_only(np.ones((3, 6))))
    ops.attention(x, *(read_only(np.eye(6)) for _ in range(4)), n_heads=2, causal=True)


def test_the_in_place_forms_give_the_textbook_numbers():
    """The in-place sigmoid, SiLU and softmax equal their one-line equations bit for bit, also on a 0-d input."""
    x = np.random.default_rng(2).standard_normal((5, 7)) * 10
    assert np.array_equal(ops.sigmoid(x), 0.5 * (1.0 + np.tanh(0.5 * x)))
    assert np.array_equal(ops.silu(x), x * (0.5 * (1.0 + np.tanh(0.5 * x))))
    shifted = np.exp(x - np.max(x, axis=-1, keepdims=True))
    assert np.array_equal(ops.softmax(x), shifted / np.sum(shifted, axis=-1, keepdims=True))
    assert ops.silu(np.array(2.0)) == 2.0 * 0.5 * (1.0 + np.tanh(1.0))


def test_shared_tables_are_built_once_and_cannot_be_written():
    """The causal mask and the position vectors are cached per size, equal a fresh build, and are read-only."""
    mask = ops.causal_mask(5)
    assert mask is ops.causal_mask(5)
    assert np.array_equal(mask, np.tril(np.ones((5, 5), dtype=bool)))
    pos = position_vectors(6, 4)
    assert pos is position_vectors(6, 4)
    assert np.array_equal(pos, position_vectors.__wrapped__(6, 4))
    for table in (mask, pos):
        with pytest.raises(ValueError):
            table[0, 0] = table[0, 1]


def test_stage_texts_are_read_only_and_agree_with_describe():
    """The per-config table of labels, looked up once per trace, is shared, read-only and matches describe()."""
    config = BlockConfig(mlp="gelu", placement="post")
    texts = stage_texts(config)
    assert texts is stage_texts(config)
    assert all(texts[key] == describe(key, config) for key in ("embed", "pos_embed", *BLOCK_KEYS))
    with pytest.raises(TypeError):
        texts["embed"] = ("x", "y")  # type: ignore[index]
