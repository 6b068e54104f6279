"""A tiny language model around the engine's stack, for training: embed, N blocks, unembed, cross-entropy.

logits = Norm_f(blocks(W_E[tokens] + positions)) W_U, and the loss is the mean cross-entropy of the
targets over the scored positions. Pre-norm stacks end in a final norm (Norm_f, parameters "ln_f.*", as
GPT-2 does); post-norm stacks already end in one, so they have none. The blocks, their parameters and their
gradients are the engine's own (forward.py, params.py, backward.py); this module adds only the two ends.

Parameters are seeded by (seed, name) like the blocks', so two models that differ in one choice share every
array whose name and shape agree: a race between them starts from the same weights wherever it can.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from blocktrace.explorables.engine import backward as bw
from blocktrace.explorables.engine import ops
from blocktrace.explorables.engine.config import BlockConfig, ConfigError
from blocktrace.explorables.engine.forward import Trace, forward
from blocktrace.explorables.engine.params import Params, init_params, param_names, seeded_normal

__all__ = ["MAX_VOCAB", "LossAndGrads", "cross_entropy", "init_model", "loss_and_grads", "loss_and_logits",
           "model_param_names", "predict", "trace_sequence"]

MAX_VOCAB = 256  # the tasks use a few dozen tokens at most


def _has_final_norm(config: BlockConfig) -> bool:
    return config.placement == "pre"


def model_param_names(config: BlockConfig) -> list[str]:
    """Every parameter of the model, ends first then the blocks in params.py's order."""
    names = ["embed.W_E", "unembed.W_U"]
    if _has_final_norm(config):
        names += ["ln_f.g"] + (["ln_f.b"] if config.norm == "layernorm" else [])
    return names + param_names(config)


def init_model(config: BlockConfig, vocab: int, gain_jitter: float = 0.0) -> Params:
    """Seeded parameters: the blocks' from params.init_params, W_E with unit entries (rows of RMS 1, like the
    stream the blocks expect), W_U with entries of size 1/d_model (so the first
    logits are small and the first loss is close to chance), the final norm a unit gain and zero bias.

    # -> {"embed.W_E": [vocab, d_model], "unembed.W_U": [d_model, vocab], "ln_f.g": [d_model], ...}
    """
    _check_vocab(vocab)
    d = config.d_model
    params = {
        "embed.W_E": seeded_normal(config.seed, "embed.W_E", (vocab, d), 1.0),
        "unembed.W_U": seeded_normal(config.seed, "unembed.W_U", (d, vocab), 1.0 / d),
    }
    if _has_final_norm(config):
        params["ln_f.g"] = np.ones(d)
        if config.norm == "layernorm":
            params["ln_f.b"] = np.zeros(d)
    params.update(init_params(config, gain_jitter))
    return params


def _check_vocab(vocab: int) -> None:
    if isinstance(vocab, bool) or not isinstance(vocab, int) or not 2 <= vocab <= MAX_VOCAB:
        raise ConfigError(f"the vocabulary must have between 2 and {MAX_VOCAB} tokens, got {vocab!r}")


def _check_tokens(tokens: np.ndarray, vocab: int) -> np.ndarray:
    t = np.asarray(tokens)
    if t.ndim != 2 or not np.issubdtype(t.dtype, np.integer):
        raise ConfigError(f"tokens must be whole numbers shaped [batch, pos], got {t.dtype} {t.shape}")
    if t.size and (t.min() < 0 or t.max() >= vocab):
        raise ConfigError(f"every token must be between 0 and {vocab - 1}")
    return t


def _final_norm(config: BlockConfig, params: Params, h: np.ndarray) -> np.ndarray:
    if not _has_final_norm(config):
        return h
    if config.norm == "rmsnorm":
        return ops.rms_norm(h, params["ln_f.g"], config.eps)
    return ops.layer_norm(h, params["ln_f.g"], params["ln_f.b"], config.eps)


def _final_norm_backward(config: BlockConfig, params: Params, grad: np.ndarray, h: np.ndarray,
                         into: bw.ParamGrads) -> np.ndarray:
    if not _has_final_norm(config):
        return grad
    local: bw.ParamGrads = {}
    backward = bw.rms_norm_backward if config.norm == "rmsnorm" else bw.layer_norm_backward
    result = backward(grad, h, params["ln_f.g"], config.eps, local)
    into.update({f"ln_f.{key}": value for key, value in local.items()})
    return result


def _logits(config: BlockConfig, params: Params, tokens: np.ndarray) -> tuple[bw.SavedForward, np.ndarray,
                                                                               np.ndarray]:
    """The saved stack run, the final norm's output and the logits. # [batch, pos] -> ..., [batch, pos, vocab]"""
    vocab = params["embed.W_E"].shape[0]
    t = _check_tokens(tokens, vocab)
    run = bw.forward_saved(config, params, params["embed.W_E"][t])
    z = _final_norm(config, params, run.output)
    return run, z, z @ params["unembed.W_U"]


def cross_entropy(logits: np.ndarray, targets: np.ndarray, scored: np.ndarray) -> tuple[float, np.ndarray]:
    """L = mean over scored positions of −log softmax(logits)[target], and ∂L/∂logits = (p − onehot) / n_scored
    at scored positions, 0 elsewhere.

    # [batch, pos, vocab], [batch, pos], [batch, pos] -> (scalar, [batch, pos, vocab])
    """
    t, mask = np.asarray(targets), np.asarray(scored, dtype=bool)
    if t.shape != logits.shape[:-1] or mask.shape != t.shape:
        raise ConfigError(f"targets {t.shape} and scored {mask.shape} must both be shaped like the tokens")
    n = int(mask.sum())
    if n == 0:
        raise ConfigError("no position is scored: there is nothing to learn from")
    if t[mask].min() < 0 or t[mask].max() >= logits.shape[-1]:
        raise ConfigError(f"every scored target must be between 0 and {logits.shape[-1] - 1}")
    t = np.where(mask, t, 0)  # unscored targets may hold anything
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    rows, cols = np.indices(t.shape)
    loss = float(-log_p[rows, cols, t][mask].sum() / n)
    grad = np.exp(log_p)
    grad[rows, cols, t] -= 1.0
    grad *= mask[..., None] / n
    return loss, grad


@dataclass
class LossAndGrads:
    """One training example's worth of work: the loss, ∂loss/∂ every parameter, and the logits it came from."""

    loss: float
    grads: bw.ParamGrads  # parameter name -> gradient, shaped like the parameter
    logits: np.ndarray  # [batch, pos, vocab]
    values: dict[str, np.ndarray]  # every block intermediate under the trace's stable keys
    stream_grads: dict[str, np.ndarray]  # ∂loss/∂ each blocks.{i}.resid_pre, the last resid_post and embed

    def floor_grad_norms(self) -> np.ndarray:
        """‖∂loss/∂stream‖ entering each floor, then at the stack's output, as the depth plot shows it.

        # -> [n_layers + 1]
        """
        n = sum(key.endswith(".resid_pre") for key in self.stream_grads)
        keys = [f"blocks.{i}.resid_pre" for i in range(n)] + [f"blocks.{n - 1}.resid_post"]
        return np.array([np.linalg.norm(self.stream_grads[key]) for key in keys])


def loss_and_grads(config: BlockConfig, params: Params, tokens: np.ndarray, targets: np.ndarray,
                   scored: np.ndarray) -> LossAndGrads:
    """The mean cross-entropy over scored positions and its gradient for every parameter, by the chain rule
    through unembed, the final norm, the engine's blocks (backward.backward_stack) and the embedding lookup.

    # [batch, pos] x3 -> LossAndGrads
    """
    run, z, logits = _logits(config, params, tokens)
    loss, grad_logits = cross_entropy(logits, targets, scored)
    d, vocab = params["unembed.W_U"].shape
    grads: bw.ParamGrads = {"unembed.W_U": z.reshape(-1, d).T @ grad_logits.reshape(-1, vocab)}  # zᵀ ∂logits
    grad_h = _final_norm_backward(config, params, grad_logits @ params["unembed.W_U"].T, run.output, grads)
    stream_grads = bw.backward_stack(run, grad_h, grads)
    grad_embed = np.zeros_like(params["embed.W_E"])
    np.add.at(grad_embed, np.asarray(tokens), stream_grads["embed"])  # a token seen twice gathers both
    grads["embed.W_E"] = grad_embed
    return LossAndGrads(loss, grads, logits, run.values, stream_grads)


def loss_and_logits(config: BlockConfig, params: Params, tokens: np.ndarray, targets: np.ndarray,
                    scored: np.ndarray) -> tuple[float, np.ndarray]:
    """The mean cross-entropy over scored positions and the logits, forward only (no backward pass): for
    held-out readings. # [batch, pos] x3 -> (scalar, [batch, pos, vocab])"""
    logits = _logits(config, params, tokens)[2]
    return cross_entropy(logits, targets, scored)[0], logits


def predict(config: BlockConfig, params: Params, tokens: np.ndarray) -> np.ndarray:
    """The most likely token at every position. # [batch, pos] -> [batch, pos]"""
    return np.argmax(_logits(config, params, tokens)[2], axis=-1)


def trace_sequence(config: BlockConfig, params: Params, tokens: np.ndarray, names: tuple[str, ...]) -> tuple[Trace,
                                                                                                           np.ndarray]:
    """One sequence through the model, every stage of its stack recorded under the engine's keys (forward.py's
    trace, as the other explorables show it), and the logits the model gives at each position.

    # [pos] -> Trace of [pos, ...] stages, [pos, vocab]
    """
    vocab = params["embed.W_E"].shape[0]
    t = _check_tokens(np.asarray(tokens)[None, :], vocab)[0]
    if len(names) != vocab:
        raise ConfigError(f"{len(names)} token names for a vocabulary of {vocab}")
    trace = forward(config, params, params["embed.W_E"][t], tokens=[names[i] for i in t])
    return trace, _final_norm(config, params, trace.output) @ params["unembed.W_U"]
