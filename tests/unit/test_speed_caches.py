"""Work saved per slider change must not change a number: cached weights and the cached baseline."""

from __future__ import annotations

import numpy as np
import pytest

from blocktrace.explorables.engine import params as params_module
from blocktrace.explorables.engine import run_preset
from blocktrace.explorables.engine.config import BlockConfig
from blocktrace.explorables.engine.params import _rng, init_params
from blocktrace.explorables.transformer_block_trace.state import TRACES, TraceState


def fresh_normal(seed, name, shape, std):
    return _rng(seed, name).standard_normal(shape) * std


def test_cached_small_weights_equal_a_fresh_draw_and_cannot_be_written():
    config = BlockConfig(d_model=4, d_mlp=8, n_heads=1, seed=7)
    first, second = init_params(config), init_params(config)
    name = "blocks.0.attn.W_Q"
    assert np.array_equal(first[name], fresh_normal(7, name, first[name].shape, 1 / np.sqrt(4)))
    assert first[name] is second[name]  # drawn once
    with pytest.raises(ValueError):
        first[name][0, 0] = 99.0
    first[name] = np.zeros_like(first[name])  # replacing an entry of one's own dict is fine ...
    assert not np.array_equal(init_params(config)[name], first[name])  # ... and reaches nobody else


def test_large_weights_are_not_cached():
    d = 64
    assert d * d > params_module.CACHED_SIZE
    config = BlockConfig(d_model=d, d_mlp=4 * d, n_heads=4, seed=3)
    a, b = init_params(config), init_params(config)
    assert np.array_equal(a["blocks.0.attn.W_Q"], b["blocks.0.attn.W_Q"])
    assert a["blocks.0.attn.W_Q"] is not b["blocks.0.attn.W_Q"]


def test_the_baseline_follows_the_vector_and_ignores_the_other_controls():
    state = TraceState()
    baseline = state.baseline
    TRACES.clear()  # the process-wide traces may drop it: the session keeps its own
    state.attention_scale = 0.25
    state.replace = True
    assert state.baseline is baseline  # not recomputed for a control it does not depend on
    state.input_text = "1, -2, 0.5, 3"
    expected = run_preset("single-token", vector=[1, -2, 0.5, 3])
    for key in ("blocks.0.resid_pre", "blocks.0.resid_post"):
        assert np.allclose(state.baseline[key], expected[key], rtol=0, atol=0)
    state.input_text = "2, 2, 2, 2"
    state.input_text = "1, -2, 0.5, 3"  # back again: still the right baseline
    assert np.array_equal(state.baseline["blocks.0.resid_post"], expected["blocks.0.resid_post"])
