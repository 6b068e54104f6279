"""The training model's two ends (embedding, final norm, unembedding, cross-entropy) and its gradients."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from blocktrace.explorables.engine import BlockConfig, ConfigError
from blocktrace.explorables.engine import language_model as lm
from tests.unit.test_backward import assert_directional

VOCAB = 7
VARIANTS = [pytest.param(*v, id="-".join(v)) for v in itertools.product(
    ("rmsnorm", "layernorm"), ("pre", "post"), ("swiglu", "gelu", "relu"), ("add", "replace"))]


def _case(seed: int = 0, **changes) -> tuple[BlockConfig, dict, np.ndarray, np.ndarray, np.ndarray]:
    config = BlockConfig(d_model=6, n_heads=2, d_mlp=8, n_layers=2, causal=True, positions=True, seed=3,
                         attention_scale=0.9, mlp_scale=1.1).with_(**changes)
    rng = np.random.default_rng([seed, 11])
    tokens = rng.integers(0, VOCAB, (2, 5))
    tokens[0, :2] = 4  # a token seen twice in a row: its embedding gathers both gradients
    targets, scored = rng.integers(0, VOCAB, (2, 5)), rng.random((2, 5)) < 0.7
    scored[0, 0] = True
    return config, lm.init_model(config, VOCAB, gain_jitter=0.2), tokens, targets, scored


@pytest.mark.parametrize(("norm", "placement", "mlp", "residual"), VARIANTS)
def test_every_model_parameter_gradient_matches_finite_differences(
    norm: str, placement: str, mlp: str, residual: str
) -> None:
    """∂loss/∂ every parameter, embedding and unembedding included, matches central differences of the loss."""
    config, params, tokens, targets, scored = _case(norm=norm, placement=placement, mlp=mlp, residual=residual)
    result = lm.loss_and_grads(config, params, tokens, targets, scored)
    assert sorted(result.grads) == sorted(lm.model_param_names(config)) == sorted(params)
    for i, name in enumerate(lm.model_param_names(config)):
        assert result.grads[name].shape == params[name].shape, name

        def loss(value: np.ndarray, name: str = name) -> float:
            return lm.loss_and_grads(config, {**params, name: value}, tokens, targets, scored).loss

        assert_directional(loss, params[name], result.grads[name], seed=i)


def test_cross_entropy_is_minus_log_of_the_target_probability() -> None:
    """The loss is the mean of −log p(target) over scored positions only, computed here the long way."""
    rng = np.random.default_rng(5)
    logits, targets = rng.standard_normal((2, 3, 4)) * 3, rng.integers(0, 4, (2, 3))
    scored = np.array([[True, False, True], [False, True, True]])
    loss, grad = lm.cross_entropy(logits, targets, scored)
    p = np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True)
    expected = [-np.log(p[b, s, targets[b, s]]) for b in range(2) for s in range(3) if scored[b, s]]
    assert loss == pytest.approx(np.mean(expected), rel=1e-12)
    np.testing.assert_allclose(grad.sum(axis=-1), 0.0, atol=1e-15)  # probabilities minus a one-hot
    assert not grad[~scored].any()  # unscored positions pass no gradient
    assert grad[0, 0, targets[0, 0]] < 0  # raising the target's logit lowers the loss


def test_equal_logits_cost_the_log_of_the_vocabulary() -> None:
    """A model that spreads its bets evenly pays ln(vocab) per position: the chance loss."""
    loss, _ = lm.cross_entropy(np.zeros((1, 4, 9)), np.arange(4)[None], np.ones((1, 4), bool))
    assert loss == pytest.approx(np.log(9), rel=1e-12)


def test_the_first_loss_is_close_to_chance() -> None:
    """A fresh model's logits are small, so its first loss is within 10 % of ln(vocab)."""
    config, params, tokens, targets, scored = _case()
    assert lm.loss_and_grads(config, params, tokens, targets, scored).loss == pytest.approx(np.log(VOCAB), rel=0.1)


def test_models_differing_in_one_choice_share_the_weights_they_can() -> None:
    """Depth 2 and 4 share the first two blocks and both ends; pre and post share every block array, and only
    pre-norm has a final norm."""
    base = BlockConfig(d_model=6, n_layers=2, seed=9)
    two, four = lm.init_model(base, VOCAB), lm.init_model(base.with_(n_layers=4), VOCAB)
    post = lm.init_model(base.with_(placement="post"), VOCAB)
    for name, value in two.items():
        np.testing.assert_array_equal(four[name], value)
        if not name.startswith("ln_f."):
            np.testing.assert_array_equal(post[name], value)
    assert "ln_f.g" in two and "ln_f.g" not in post and "blocks.3.attn.W_Q" in four


def test_predict_is_the_most_likely_token() -> None:
    """predict() gives the argmax of the logits the loss is computed from."""
    config, params, tokens, targets, scored = _case()
    logits = lm.loss_and_grads(config, params, tokens, targets, scored).logits
    np.testing.assert_array_equal(lm.predict(config, params, tokens), logits.argmax(axis=-1))


@pytest.mark.parametrize(("tokens", "message"), [
    (np.array([[0, 7]]), "between 0 and 6"), (np.array([[-1, 0]]), "between 0 and 6"),
    (np.array([0.5, 1.0]), "whole numbers"), (np.array([0, 1]), "whole numbers"),
])
def test_bad_tokens_are_refused(tokens: np.ndarray, message: str) -> None:
    """Tokens outside the vocabulary, fractional or of the wrong shape are refused with a clear message."""
    config, params, _, _, _ = _case()
    with pytest.raises(ConfigError, match=message):
        lm.predict(config, params, tokens)


def test_bad_targets_are_refused() -> None:
    """No scored position, a target outside the vocabulary, or a misshapen mask are refused."""
    logits = np.zeros((1, 3, 4))
    with pytest.raises(ConfigError, match="nothing to learn"):
        lm.cross_entropy(logits, np.zeros((1, 3), int), np.zeros((1, 3), bool))
    with pytest.raises(ConfigError, match="between 0 and 3"):
        lm.cross_entropy(logits, np.array([[0, 4, 0]]), np.ones((1, 3), bool))
    with pytest.raises(ConfigError, match="shaped like the tokens"):
        lm.cross_entropy(logits, np.zeros((1, 3), int), np.ones((3, 1), bool))
    lm.cross_entropy(logits, np.array([[0, 99, 0]]), np.array([[True, False, True]]))  # unscored: ignored


@pytest.mark.parametrize("vocab", [1, 257, 2.0, True])
def test_bad_vocabulary_is_refused(vocab) -> None:
    """A vocabulary too small, too large or not a whole number is refused."""
    with pytest.raises(ConfigError, match="vocabulary"):
        lm.init_model(BlockConfig(), vocab)


def test_the_forward_only_loss_is_the_training_loss() -> None:
    """Held-out readings use the forward pass alone: the same loss and logits as the full pass gives."""
    config, params, tokens, targets, scored = _case()
    full = lm.loss_and_grads(config, params, tokens, targets, scored)
    loss, logits = lm.loss_and_logits(config, params, tokens, targets, scored)
    assert loss == full.loss
    np.testing.assert_array_equal(logits, full.logits)


@pytest.mark.parametrize("placement", ["pre", "post"])
def test_one_traced_sequence_is_that_row_of_the_batch(placement: str) -> None:
    """The look inside a model (trace_sequence) is the batch's forward pass for that row: the same logits and
    the same stream entering and leaving every floor, under the engine's keys and with the tokens' names."""
    config, params, tokens, targets, scored = _case(placement=placement)
    full = lm.loss_and_grads(config, params, tokens, targets, scored)
    names = tuple("abcdefg")
    trace, logits = lm.trace_sequence(config, params, tokens[1], names)
    np.testing.assert_allclose(logits, full.logits[1], rtol=1e-12, atol=1e-12)
    for key in ("blocks.0.resid_pre", "blocks.1.attn.pattern", "blocks.1.resid_post"):
        np.testing.assert_allclose(trace[key], full.values[key][1], rtol=1e-12, atol=1e-12)
    assert trace.tokens == [names[t] for t in tokens[1]]
    with pytest.raises(ConfigError, match="token names"):
        lm.trace_sequence(config, params, tokens[1], names[:3])
