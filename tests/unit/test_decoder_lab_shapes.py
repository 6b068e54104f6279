"""The decoder-block lab's pure parts: shape and parameter formulas, the causal badge, the invariants, the split."""

from __future__ import annotations

import numpy as np
import pytest

from blocktrace.explorables.decoder_block_lab import checks
from blocktrace.explorables.decoder_block_lab.shapes import (
    Sizes,
    attention_params,
    block_params,
    exercise_answer,
    mlp_bias_params,
    mlp_weight_params,
    norm_params,
    param_rows,
    shape_rows,
)
from blocktrace.explorables.engine import BlockConfig, forward, init_params, ops

SIZES = [(1, 4, 8), (2, 16, 256), (1, 128, 256), (3, 7, 64), (1, 1, 512), (2, 128, 512), (4, 3, 16)]


def _by_tensor(rows):
    return {r.tensor: r for r in rows}


@pytest.mark.parametrize(("B", "T", "d"), SIZES)
def test_stream_keeps_b_t_d_and_swiglu_widens_to_4d_then_2d(B: int, T: int, d: int) -> None:
    """Every stream tensor is [B, T, d]; SwiGLU's projection is [B, T, 4d] and gate · value is [B, T, 2d]."""
    rows = _by_tensor(shape_rows(Sizes(B=B, T=T, d=d, heads=1, expansion=4), "swiglu"))
    for name in ("X", "X_norm", "attn_out", "X1", "X1_norm", "mlp_out", "X2"):
        assert rows[name].shape == (B, T, d), name
        assert rows[name].symbols == "[B, T, d]"
    assert rows["x_proj"].shape == (B, T, 4 * d) and rows["x_proj"].symbols == "[B, T, 4d]"
    for name in ("gate", "val", "x_swish"):
        assert rows[name].shape == (B, T, 2 * d) and rows[name].symbols == "[B, T, 2d]"
    assert rows["attn_weights"].shape == (B, 1, T, T)


@pytest.mark.parametrize("heads", [1, 2, 4, 8])
def test_heads_split_the_width_and_each_get_a_t_by_t_pattern(heads: int) -> None:
    """With h heads, queries are [B, h, T, d/h] and the attention weights [B, h, T, T]."""
    rows = _by_tensor(shape_rows(Sizes(B=2, T=5, d=64, heads=heads), "swiglu"))
    assert rows["Q"].shape == (2, heads, 5, 64 // heads)
    assert rows["attn_weights"].shape == (2, heads, 5, 5)


def test_gelu_keeps_the_full_hidden_width_and_post_norm_drops_the_pre_norm_rows() -> None:
    """GELU: [B, T, 4d] before and after the activation; post-norm has no separate normalised-input rows."""
    rows = _by_tensor(shape_rows(Sizes(B=1, T=4, d=8), "gelu", "post"))
    assert rows["x_proj"].shape == rows["x_act"].shape == (1, 4, 32)
    assert "X_norm" not in rows and "X1_norm" not in rows and "gate" not in rows


@pytest.mark.parametrize("d", [4, 8, 64, 256, 512, 768, 4096])
def test_parameter_formulas(d: int) -> None:
    """Norm d vs 2d; attention 4d²; SwiGLU 4d² + 2d² = 6d²; GELU 4d² + 4d² = 8d² (at expansion 4)."""
    assert norm_params(d, "rmsnorm") == d
    assert norm_params(d, "layernorm") == 2 * d
    assert attention_params(d) == 4 * d * d
    assert mlp_weight_params(d, "swiglu") == 6 * d * d
    assert mlp_weight_params(d, "gelu") == 8 * d * d
    assert mlp_bias_params(d, "swiglu") == 0 and mlp_bias_params(d, "gelu") == 5 * d


def test_the_lessons_exercise_2_at_d_512() -> None:
    """Exercise 2: combined projection [512, 2048], output projection [1024, 512], 6 · 512² parameters."""
    assert mlp_weight_params(512, "swiglu", 4) == 6 * 512**2 == 1_572_864
    text = exercise_answer(512)
    assert "[512, 2048]" in text and "[1024, 512]" in text and "6·512²" in text and "1,572,864" in text
    swiglu = next(r for r in param_rows(512) if r.option == "swiglu")
    assert swiglu.formula == "4d² + 2d² = 6d²" and swiglu.count == 6 * 512**2


@pytest.mark.parametrize("expansion", [2, 4, 8])
@pytest.mark.parametrize("norm", ["rmsnorm", "layernorm"])
@pytest.mark.parametrize("mlp", ["swiglu", "gelu"])
@pytest.mark.parametrize("d", [8, 32, 128])
def test_block_count_equals_the_engines_parameters(d: int, mlp: str, norm: str, expansion: int) -> None:
    """The formula total is exactly the number of values the engine stores for one block."""
    d_mlp = expansion * d // 2 if mlp == "swiglu" else expansion * d
    config = BlockConfig(d_model=d, d_mlp=d_mlp, n_heads=2, norm=norm, mlp=mlp)
    assert block_params(d, norm, mlp, expansion) == sum(v.size for v in init_params(config).values())


@pytest.mark.parametrize(("B", "T", "d", "heads"), [(1, 4, 8, 1), (2, 3, 16, 4), (3, 8, 64, 8)])
@pytest.mark.parametrize("placement", ["pre", "post"])
@pytest.mark.parametrize("mlp", ["swiglu", "gelu"])
def test_shape_rows_match_the_engine(B: int, T: int, d: int, heads: int, placement: str, mlp: str) -> None:
    """Each formula row with an engine stage has exactly the shape the engine's forward pass produces."""
    sizes = Sizes(B=B, T=T, d=d, heads=heads)
    config = BlockConfig(d_model=d, n_heads=heads, d_mlp=sizes.half if mlp == "swiglu" else sizes.hidden,
                         mlp=mlp, placement=placement)
    trace = forward(config, init_params(config), np.ones((B, T, d)))
    for row in shape_rows(sizes, mlp, placement):
        if row.key is not None:
            assert trace["blocks.0." + row.key].shape == row.shape, row.tensor


@pytest.mark.parametrize("bad", [dict(d=10, heads=4), dict(B=0), dict(T=-1), dict(d=3, expansion=1)])
def test_sizes_refuse_impossible_combinations(bad: dict) -> None:
    """Heads that do not divide d, non-positive sizes and an odd SwiGLU width are refused with a message."""
    with pytest.raises(ValueError):
        Sizes(**bad)


# --- the causal badge ---------------------------------------------------------------------------


def test_causal_badge_passes_when_every_earlier_position_is_exactly_zero() -> None:
    """Exactly 0 before the corrupted position is a PASS, whatever happens at or after it."""
    delta = np.array([[0.0, 0.0], [0.0, 0.0], [999.0, 3.0], [0.1, 0.0]])
    v = checks.causal_verdict(delta, 2)
    assert v.status == checks.PASS and v.badge == "PASS" and v.leaked == ()
    assert "Positions 0 and 1 are exactly unchanged" in v.text


def test_causal_badge_fails_on_any_leak_even_a_tiny_one() -> None:
    """Any nonzero change before the corrupted position fails, and names the positions that leaked."""
    v = checks.causal_verdict(np.array([1e-15, 0.0, 0.0, 5.0]), 3)
    assert v.status == checks.FAIL and v.badge == "FAIL" and v.leaked == (0,)
    assert "0" in v.text and "leaks" in v.text


def test_causal_badge_fails_on_nan_and_has_nothing_to_test_at_position_0() -> None:
    """NaN cannot be shown to be 0 (FAIL); corrupting position 0 leaves nothing earlier to test."""
    nan = checks.causal_verdict(np.array([[np.nan, 0.0], [1.0, 1.0]]), 1)
    assert nan.status == checks.FAIL and "NaN" in nan.text
    first = checks.causal_verdict(np.array([5.0, 1.0]), 0)
    assert first.status == checks.NOT_APPLICABLE and first.badge == "NOTHING TO TEST"


def test_causal_badge_refuses_a_position_outside_the_sequence() -> None:
    """A corrupt position beyond the sequence is a programming error, not a verdict."""
    with pytest.raises(ValueError):
        checks.causal_verdict(np.zeros(3), 3)


@pytest.mark.parametrize("causal", [True, False])
def test_causal_badge_on_the_engine(causal: bool) -> None:
    """The lesson's test on a real block: PASS with the mask on, FAIL with it off."""
    config = BlockConfig(d_model=8, d_mlp=16, n_heads=2, causal=causal)
    params = init_params(config)
    x = np.random.default_rng(0).standard_normal((4, 8))
    corrupted = x.copy()
    corrupted[2] = 999.0
    delta = np.abs(forward(config, params, corrupted).output - forward(config, params, x).output)
    assert checks.causal_verdict(delta, 2).status == (checks.PASS if causal else checks.FAIL)


# --- invariants -----------------------------------------------------------------------------------


def _trace(**changes):
    config = BlockConfig(**{"d_model": 8, "d_mlp": 16, "n_heads": 2, "causal": True, **changes})
    return forward(config, init_params(config, gain_jitter=0.0), np.random.default_rng(1).standard_normal((1, 4, 8)))


def _status(found: list[checks.Check]) -> dict[str, str]:
    return {c.name: c.status for c in found}


def test_every_invariant_holds_for_a_pre_norm_causal_block() -> None:
    """Pre-norm, add, mask on, unit gains: every check passes."""
    found = checks.invariants(_trace())
    assert all(c.status == checks.PASS for c in found), found


@pytest.mark.parametrize(("changes", "reason"), [
    (dict(residual="replace"), "replace"),
    (dict(placement="post"), "post-norm"),
])
def test_residual_identity_fails_in_replace_and_post_norm_and_says_why(changes: dict, reason: str) -> None:
    """resid_mid == resid_pre + attn_out fails in replace mode and in post-norm, with the reason in words."""
    check = next(c for c in checks.invariants(_trace(**changes)) if c.name == "resid_mid == resid_pre + attn_out")
    assert check.status == checks.FAIL and reason in check.detail


def test_future_weights_fail_without_the_mask() -> None:
    """With the mask off some weight falls on a later position, so the check fails and says the mask is off."""
    check = next(c for c in checks.invariants(_trace(causal=False)) if c.name.startswith("Weights on future"))
    assert check.status == checks.FAIL and "mask is off" in check.detail


def test_layer_norm_rows_have_mean_0_and_std_1() -> None:
    """LayerNorm's check is mean 0 and std 1 per row, and it holds."""
    found = _status(checks.invariants(_trace(norm="layernorm")))
    assert found["Norm 1: every row has mean 0 and std 1"] == checks.PASS


def test_norm_check_fails_on_nan_and_on_rows_that_are_not_unit_rms() -> None:
    """A NaN row, or a row of RMS 2, fails the RMSNorm check."""
    assert checks.check_normalised(np.array([[np.nan, 1.0]]), "rmsnorm", "Norm").status == checks.FAIL
    assert checks.check_normalised(np.array([[2.0, -2.0]]), "rmsnorm", "Norm").status == checks.FAIL
    assert checks.check_normalised(np.array([[1.0, -1.0]]), "rmsnorm", "Norm").status == checks.PASS


def test_row_sum_and_future_checks_on_hand_made_patterns() -> None:
    """Rows that do not sum to 1 fail; a single position has no future to check."""
    assert checks.check_row_sums(np.array([[0.5, 0.4]])).status == checks.FAIL
    assert checks.check_row_sums(np.array([[1.0, 0.0], [0.3, 0.7]])).status == checks.PASS
    assert checks.check_future_zero(np.ones((1, 1, 1)), True).status == checks.NOT_APPLICABLE
    assert checks.check_future_zero(np.array([[1.0, 0.0], [0.3, 0.7]]), True).status == checks.PASS


# --- the gate/value split --------------------------------------------------------------------------


def test_right_split_equals_the_engines_swiglu() -> None:
    """Splitting the combined projection along features gives exactly the engine's SwiGLU output."""
    rng = np.random.default_rng(2)
    x, Wg, Wv, Wd = rng.standard_normal((2, 4, 8)), *(rng.standard_normal(s) for s in ((8, 16), (8, 16), (16, 8)))
    result = checks.swiglu_split(x, Wg, Wv, Wd)
    assert result.error == "" and dict(result.shapes)["x_proj"] == (2, 4, 32)
    np.testing.assert_allclose(result.out, ops.swiglu(x, Wg, Wv, Wd)["out"], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("T", [2, 3, 4, 7])
def test_wrong_split_returns_the_shape_error_as_text(T: int) -> None:
    """Splitting along positions halves T, keeps 4d features, and the error comes back as text, not raised."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, T, 8))
    result = checks.swiglu_split(x, rng.standard_normal((8, 16)), rng.standard_normal((8, 16)),
                                 rng.standard_normal((16, 8)), wrong=True)
    assert result.out is None and result.error
    assert dict(result.shapes)["gate"] == (1, (T + 1) // 2, 32)
