"""The three presets the explorables start from, and the lesson's word-order experiment on eat-an-orange."""

from __future__ import annotations

import math

import numpy as np
import pytest

from blocktrace.explorables.engine import PRESETS, ConfigError, Trace, get_preset, run_preset

STREAM_STAGES = ("embed", "pos_embed", "blocks.0.resid_pre", "blocks.0.ln1.normalized")


def test_there_are_exactly_the_three_presets() -> None:
    """The explorables rely on single-token, eat-an-orange and decoder-lab, and unknown names are refused."""
    assert set(PRESETS) == {"single-token", "eat-an-orange", "decoder-lab"}
    with pytest.raises(ConfigError, match="unknown preset"):
        get_preset("nope")


def test_single_token_is_one_width_4_token() -> None:
    """single-token traces one token of width 4 through one pre-norm SwiGLU block, without position vectors."""
    t = run_preset("single-token")
    c = t.config
    assert (c.d_model, c.n_layers, c.placement, c.mlp, c.positions) == (4, 1, "pre", "swiglu", False)
    assert t["embed"].shape == (1, 4)
    assert t.output.shape == (1, 4)
    assert t.tokens == ["x"]
    assert "pos_embed" not in t


def test_single_token_uses_unit_gains() -> None:
    """The lesson's constant vector [2, 2, 2, 2] normalises to [1, 1, 1, 1], so the preset's RMSNorm gains are 1."""
    t = run_preset("single-token", vector=[2.0, 2.0, 2.0, 2.0])
    np.testing.assert_allclose(t["blocks.0.ln1.normalized"], [[1.0, 1.0, 1.0, 1.0]], rtol=1e-6)


def test_single_token_with_a_wider_vector_resizes_the_model() -> None:
    """A vector of another width sets d_model (and the MLP width by the preset's ratio)."""
    t = run_preset("single-token", vector=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    assert t.config.d_model == 6
    assert t.config.d_mlp == 12
    np.testing.assert_array_equal(t["embed"], [[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]])


def test_vector_and_phrase_together_are_refused() -> None:
    """Giving a vector and a phrase at once is a ConfigError, not a silent choice."""
    with pytest.raises(ConfigError, match="not both"):
        run_preset("single-token", vector=[1.0, 2.0], tokens=["a"])


def test_eat_an_orange_shapes() -> None:
    """eat-an-orange: three words, width 2, a 2→3→2 ReLU MLP, no mask, position vectors on."""
    t = run_preset("eat-an-orange")
    c = t.config
    assert t.tokens == ["eat", "an", "orange"]
    assert (c.d_model, c.d_mlp, c.mlp, c.causal, c.positions, c.n_heads) == (2, 3, "relu", False, True, 1)
    assert t["embed"].shape == (3, 2)
    assert t["blocks.0.mlp.hidden"].shape == (3, 3)
    assert t["blocks.0.attn.pattern"].shape == (1, 3, 3)
    assert np.all(t["blocks.0.attn.pattern"] > 0.0)  # unmasked: every word reads every word


def test_eat_an_orange_matches_the_lessons_first_stages() -> None:
    """The lesson's table for 'orange' (slot 2): embedding [−0.68, 0.44], stamp [0, 0.4], RMSNorm [−0.890, 1.099]."""
    t = run_preset("eat-an-orange")
    np.testing.assert_allclose(t["embed"][2], [-0.68, 0.44], atol=1e-12)
    np.testing.assert_allclose(t["pos_embed"][2], [0.0, 0.4], atol=1e-12)
    np.testing.assert_allclose(t["blocks.0.resid_pre"][2], [-0.68, 0.84], atol=1e-12)
    rms = math.sqrt((0.68**2 + 0.84**2) / 2)
    np.testing.assert_allclose(t["blocks.0.ln1.normalized"][2], [-0.68 / rms, 0.84 / rms], rtol=1e-5)
    np.testing.assert_allclose(t["blocks.0.ln1.normalized"][2], [-0.890, 1.099], atol=5e-4)


def test_eat_an_orange_position_stamps_are_45_degree_arrows() -> None:
    """At width 2, slot k's stamp is 0.4 · (cos 45k°, sin 45k°): p0 = [0.4, 0], p2 = [0, 0.4] as in the lesson."""
    t = run_preset("eat-an-orange")
    for k in range(3):
        angle = math.radians(45 * k)
        np.testing.assert_allclose(t["pos_embed"][k], [0.4 * math.cos(angle), 0.4 * math.sin(angle)], atol=1e-15)


def test_reverse_reverses_the_words() -> None:
    """reverse=True traces the phrase back to front."""
    t = run_preset("eat-an-orange", reverse=True)
    assert t.tokens == ["orange", "an", "eat"]
    original = run_preset("eat-an-orange")
    np.testing.assert_array_equal(t["embed"], original["embed"][::-1])


def _reverse_rows(key: str, values: np.ndarray) -> np.ndarray:
    local = key.split(".", 2)[2] if key.startswith("blocks.") else key
    if local in ("attn.scores", "attn.pattern"):
        return values[:, ::-1, ::-1]
    if values.ndim == 3:  # q, k, v: [n_heads, pos, d_head]
        return values[:, ::-1]
    return values[::-1]


def test_without_positions_or_mask_reversal_only_reverses_the_rows() -> None:
    """With positions off and no mask, the reversed phrase's trace is the original's with its rows reversed."""
    original = run_preset("eat-an-orange", positions=False)
    reversed_ = run_preset("eat-an-orange", positions=False, reverse=True)
    assert original.keys() == reversed_.keys()
    for stage in original:
        np.testing.assert_allclose(reversed_[stage.key], _reverse_rows(stage.key, stage.values), rtol=1e-12,
                                   atol=1e-14, err_msg=stage.key)


def _pair() -> tuple[Trace, Trace]:
    return run_preset("eat-an-orange"), run_preset("eat-an-orange", reverse=True)


def test_middle_word_agrees_until_attention_reads_its_neighbours() -> None:
    """'an' keeps slot 1 in both orders: identical up to ln1.normalized (and q, k, v), different from the scores on."""
    original, reversed_ = _pair()
    for key in STREAM_STAGES:
        np.testing.assert_array_equal(reversed_[key][1], original[key][1], err_msg=key)
    for key in ("blocks.0.attn.q", "blocks.0.attn.k", "blocks.0.attn.v"):
        np.testing.assert_allclose(reversed_[key][:, 1], original[key][:, 1], rtol=1e-14, err_msg=key)
    for key in ("blocks.0.attn.scores", "blocks.0.attn_out", "blocks.0.resid_mid", "blocks.0.resid_post"):
        row = (lambda v: v[:, 1]) if key.endswith("scores") else (lambda v: v[1])
        assert not np.allclose(row(reversed_[key]), row(original[key]), rtol=1e-6, atol=1e-9), key


def test_end_words_differ_from_resid_pre() -> None:
    """'eat' and 'orange' swap slots, so the same word vector gets a different stamp: they differ at resid_pre."""
    original, reversed_ = _pair()
    for word in ("eat", "orange"):
        i, j = original.tokens.index(word), reversed_.tokens.index(word)
        assert i != j
        np.testing.assert_array_equal(original["embed"][i], reversed_["embed"][j])
        assert not np.allclose(original["blocks.0.resid_pre"][i], reversed_["blocks.0.resid_pre"][j])


def test_decoder_lab_shapes() -> None:
    """decoder-lab: T = 4 tokens of width 8, one head, SwiGLU with gate and value of width 16 each, causal."""
    t = run_preset("decoder-lab")
    c = t.config
    assert (c.d_model, c.n_heads, c.d_head, c.d_mlp, c.mlp, c.causal) == (8, 1, 8, 16, "swiglu", True)
    assert len(t.tokens) == 4
    assert t["embed"].shape[-2:] == (4, 8)
    assert t.output.shape[-2:] == (4, 8)
    assert t["blocks.0.mlp.gate"].shape[-1] == 16
    assert t["blocks.0.mlp.value"].shape[-1] == 16
    assert t["blocks.0.attn.pattern"].shape[-3:] == (1, 4, 4)
    assert t.params["blocks.0.mlp.W_down"].shape == (16, 8)


@pytest.mark.parametrize("name", list(PRESETS))
def test_presets_are_deterministic(name: str) -> None:
    """Running a preset twice gives identical traces (seeded parameters and embeddings)."""
    a, b = run_preset(name), run_preset(name)
    assert a.keys() == b.keys()
    for stage in a:
        np.testing.assert_array_equal(b[stage.key], stage.values)


def test_any_phrase_gets_fixed_embeddings() -> None:
    """A student's own words get seeded embeddings: the same word (any case) always gets the same vector."""
    a = run_preset("decoder-lab", tokens=["Zebra", "runs", "zebra"])
    np.testing.assert_array_equal(a["embed"][0], a["embed"][2])
    b = run_preset("decoder-lab", tokens=["zebra"])
    np.testing.assert_array_equal(b["embed"][0], a["embed"][0])
    assert not np.array_equal(a["embed"][0], a["embed"][1])


def test_empty_phrase_is_refused() -> None:
    """An empty phrase is a ConfigError."""
    with pytest.raises(ConfigError, match="empty"):
        run_preset("eat-an-orange", tokens=[])


# The worked trace of lesson 001 (the seed), for "orange" in "eat an orange", to three decimals.
SEED_ORANGE = {
    "embed": [-0.680, 0.440],
    "blocks.0.resid_pre": [-0.680, 0.840],
    "blocks.0.ln1.normalized": [-0.890, 1.099],
    "blocks.0.attn_out": [-0.143, 0.680],
    "blocks.0.resid_mid": [-0.823, 1.520],
    "blocks.0.ln2.normalized": [-0.673, 1.244],
    "blocks.0.mlp_out": [0.000, 1.244],
    "blocks.0.resid_post": [-0.823, 2.764],
}
SEED_WEIGHTS = [[0.339, 0.480, 0.181], [0.261, 0.401, 0.338], [0.053, 0.055, 0.892]]  # rows eat, an, orange


@pytest.mark.parametrize("key", SEED_ORANGE)
def test_eat_an_orange_reproduces_the_seed_trace_of_orange(key) -> None:
    """Every stage the seed prints for orange, rounded to 3 decimals as the explorable shows it."""
    t = run_preset("eat-an-orange")
    assert np.round(t[key][2], 3).tolist() == pytest.approx(SEED_ORANGE[key], abs=1e-12)


def test_eat_an_orange_reproduces_the_seed_attention_weights() -> None:
    """The 3 × 3 weights, each row summing to 1."""
    pattern = run_preset("eat-an-orange")["blocks.0.attn.pattern"][0]
    np.testing.assert_allclose(np.round(pattern, 3), SEED_WEIGHTS, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pattern.sum(axis=-1), 1.0, rtol=1e-12)


def test_eat_an_orange_keeps_the_seed_claims() -> None:
    """Orange's stamps p2 = [0, 0.4] and p0 = [0.4, 0]; ReLU clips what feeds output 1; "an" parts at attention."""
    original, reversed_ = run_preset("eat-an-orange"), run_preset("eat-an-orange", reverse=True)
    np.testing.assert_allclose(original["pos_embed"][2], [0.0, 0.4], atol=1e-12)
    assert reversed_.tokens[0] == "orange"
    np.testing.assert_allclose(reversed_["pos_embed"][0], [0.4, 0.0], atol=1e-12)
    w_out, gate = original.params["blocks.0.mlp.W_out"], original["blocks.0.mlp.gate"][2]
    feeding = np.flatnonzero(w_out[:, 0])
    assert feeding.size and np.all(gate[feeding] < 0) and original["blocks.0.mlp_out"][2, 0] == 0.0
    an = 1
    same = [k for k in ("embed", "pos_embed", "blocks.0.resid_pre", "blocks.0.ln1.normalized")
            if np.allclose(original[k][an], reversed_[k][an])]
    assert len(same) == 4
    assert not np.allclose(original["blocks.0.attn_out"][an], reversed_["blocks.0.attn_out"][an], atol=1e-3)
