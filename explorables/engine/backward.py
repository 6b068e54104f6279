"""The backward pass: how a scalar loss changes with the residual stream entering each block, and with
every parameter.

Each operation of ops.py has a backward function here, its chain rule on the docstring's
first line. It takes the gradient of the loss with respect to the op's output (`grad`,
shaped like the output) and the op's forward inputs, and returns the gradient with respect
to its input. Forward values come from ops.py and forward.py (recomputed or handed in),
never re-derived here. Given a dict `into`, an op also puts there the gradient of each of its
parameters under the parameter's local name ("g", "W_Q", ...), summed over every leading
dimension (batch and position). The depth plot needs only the stream's gradient and passes no
dict; training (engine/language_model.py) needs both.

The loss. By default L = Σ output ⊙ R, a fixed direction R drawn from a standard normal
seeded by (config.seed, "loss.direction") and scaled to Frobenius norm 1. So ∂L/∂output = R
has norm exactly 1 at the top of every stack, whatever the variant; it is never trivially
zero, and it stays meaningful in post-norm (where ‖output‖ is pinned by the last norm, so a
loss built from ‖output‖² would barely depend on the input). loss="energy" gives
L = ½ · mean over rows of ‖output row‖² instead.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from blocktrace.explorables.engine import ops
from blocktrace.explorables.engine.config import BlockConfig, ConfigError
from blocktrace.explorables.engine.forward import COMBINE as COMBINE_FORWARD
from blocktrace.explorables.engine.forward import PLACEMENTS, Sublayers, check_input
from blocktrace.explorables.engine.params import Params, check_params, position_vectors

__all__ = [
    "ParamGrads", "SavedForward", "StreamGradients", "SublayersBackward", "add_backward", "attention_backward",
    "backward_stack", "dense_mlp_backward", "depth_profile", "forward_saved", "gelu_backward", "grad_wrt_input",
    "layer_norm_backward", "loss_direction", "post_norm_block_backward", "pre_norm_block_backward", "relu_backward",
    "replace_backward", "rms_norm_backward", "rms_normalize_backward", "silu_backward", "softmax_backward",
    "swiglu_backward"
]

Array = np.ndarray
Saved = dict[str, Array]  # forward intermediates of one block, under the stages' local keys
ParamGrads = dict[str, Array]  # parameter name -> ∂L/∂parameter, shaped like the parameter


def _sum_leading(a: Array) -> Array:
    """Σ over every axis but the last: a per-feature parameter is shared by every row. # [..., n] -> [n]"""
    return a.reshape(-1, a.shape[-1]).sum(axis=0)


def _weight_grad(x: Array, grad: Array) -> Array:
    """∂W for y = x W, summed over every row: xᵀ ∂y. # [..., n_in], [..., n_out] -> [n_in, n_out]"""
    return x.reshape(-1, x.shape[-1]).T @ grad.reshape(-1, grad.shape[-1])

# --- operations -----------------------------------------------------------------------------


def rms_normalize_backward(grad: Array, x: Array, eps: float) -> Array:
    """∂x = (∂y − y · mean(∂y ⊙ y)) / sqrt(mean(x²) + eps), with y = x / sqrt(mean(x²) + eps).

    Only the part of ∂y along the row's own direction is removed: scaling x never changes y.
    # [..., d_model], [..., d_model] -> [..., d_model]
    """
    d = x.shape[-1]
    with np.errstate(divide="ignore", invalid="ignore"):  # eps = 0 on a zero row: NaN, as in the forward
        inv_rms = 1.0 / np.sqrt((x * x).sum(axis=-1, keepdims=True) / d + eps)
        y = x * inv_rms  # ops.rms_normalize(x, eps), from the factor needed anyway
        return inv_rms * (grad - y * ((grad * y).sum(axis=-1, keepdims=True) / d))


def rms_norm_backward(grad: Array, x: Array, g: Array, eps: float, into: ParamGrads | None = None) -> Array:
    """∂x = rms_normalize_backward(g ⊙ ∂y, x): the gain scales the gradient, then the normalising step.

    Into `into`: ∂g = Σ ∂y ⊙ rms_normalize(x).
    # [..., d_model], [..., d_model], [d_model] -> [..., d_model]
    """
    if into is not None:
        into["g"] = _sum_leading(grad * ops.rms_normalize(x, eps))
    return rms_normalize_backward(grad * g, x, eps)


def layer_norm_backward(grad: Array, x: Array, g: Array, eps: float, into: ParamGrads | None = None) -> Array:
    """∂x = c − mean(c) with c = rms_normalize_backward(g ⊙ ∂y, x − mean(x)): undo the rescale, then the centring.

    The bias adds a constant, so it does not appear in ∂x. Into `into`: ∂g = Σ ∂y ⊙ rms_normalize(x − mean(x)),
    ∂b = Σ ∂y.
    # [..., d_model], [..., d_model], [d_model] -> [..., d_model]
    """
    centred = x - np.mean(x, axis=-1, keepdims=True)
    if into is not None:
        into["g"] = _sum_leading(grad * ops.rms_normalize(centred, eps))
        into["b"] = _sum_leading(grad)
    grad_centred = rms_normalize_backward(grad * g, centred, eps)
    return grad_centred - np.mean(grad_centred, axis=-1, keepdims=True)


def softmax_backward(grad: Array, p: Array) -> Array:
    """∂x_j = p_j · (∂p_j − Σ_k ∂p_k p_k), with p = softmax(x) over the last axis.

    Masked entries have p = 0, so they get gradient exactly 0.
    # [..., n], [..., n] -> [..., n]
    """
    return p * (grad - np.sum(grad * p, axis=-1, keepdims=True))


def attention_backward(
    grad: Array,
    x: Array,
    W_Q: Array,
    W_K: Array,
    W_V: Array,
    W_O: Array,
    n_heads: int,
    causal: bool,
    scale: float = 1.0,
    saved: Saved | None = None,
    into: ParamGrads | None = None,
) -> Array:
    """∂x = ∂q W_Qᵀ + ∂k W_Kᵀ + ∂v W_Vᵀ, back through out = scale · concat_h(softmax(q_h k_hᵀ / √d_head) v_h) W_O.

    `saved` may hold the forward's q, k, v and pattern (as ops.attention returns them, or as
    a block records them under attn.*); otherwise they are recomputed with ops.attention.
    Into `into`: ∂W_Q = xᵀ ∂q, ∂W_K = xᵀ ∂k, ∂W_V = xᵀ ∂v (heads merged), ∂W_O = mixedᵀ (scale · ∂out).
    # grad [..., pos, d_model], x [..., pos, d_model] -> [..., pos, d_model]
    """
    if saved is None:
        saved = ops.attention(x, W_Q, W_K, W_V, W_O, n_heads, causal)
    q, k, v, pattern = (saved[name] for name in ("q", "k", "v", "pattern"))  # [..., n_heads, pos, d_head|pos]
    grad_out = scale * grad
    grad_mixed = ops.split_heads(grad_out @ W_O.T, n_heads)  # [..., n_heads, pos, d_head]
    grad_pattern = grad_mixed @ np.swapaxes(v, -1, -2)  # [..., n_heads, pos, pos]
    grad_v = ops.merge_heads(np.swapaxes(pattern, -1, -2) @ grad_mixed)  # [..., pos, n_heads * d_head]
    grad_scores = softmax_backward(grad_pattern, pattern) / np.sqrt(q.shape[-1])  # the mask's zeros stay 0
    grad_q = ops.merge_heads(grad_scores @ k)  # [..., pos, n_heads * d_head]
    grad_k = ops.merge_heads(np.swapaxes(grad_scores, -1, -2) @ q)  # [..., pos, n_heads * d_head]
    if into is not None:
        into["W_Q"], into["W_K"], into["W_V"] = (_weight_grad(x, g) for g in (grad_q, grad_k, grad_v))
        into["W_O"] = _weight_grad(ops.merge_heads(pattern @ v), grad_out)
    return grad_q @ W_Q.T + grad_k @ W_K.T + grad_v @ W_V.T


def silu_backward(grad: Array, x: Array) -> Array:
    """∂x = ∂y · σ(x) · (1 + x · (1 − σ(x))), the derivative of x · σ(x).

    # [...], [...] -> [...]
    """
    s = ops.sigmoid(x)
    return grad * s * (1.0 + x * (1.0 - s))


def gelu_backward(grad: Array, x: Array) -> Array:
    """∂x = ∂y · (½(1 + t) + ½ x (1 − t²) √(2/π) (1 + 3 · 0.044715 x²)), t = tanh(√(2/π)(x + 0.044715 x³)).

    # [...], [...] -> [...]
    """
    c = np.sqrt(2.0 / np.pi)
    t = np.tanh(c * (x + 0.044715 * x**3))
    return grad * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3 * 0.044715 * x * x))


def relu_backward(grad: Array, x: Array) -> Array:
    """∂x = ∂y · [x > 0]: clipped units pass no gradient (at exactly 0 we take the slope 0).

    # [...], [...] -> [...]
    """
    return np.where(x > 0.0, grad, 0.0)


def swiglu_backward(
    grad: Array, x: Array, W_gate: Array, W_value: Array, W_down: Array, saved: Saved | None = None,
    into: ParamGrads | None = None,
) -> Array:
    """∂x = (∂h ⊙ value ⊙ SiLU′(gate)) W_gateᵀ + (∂h ⊙ SiLU(gate)) W_valueᵀ, with ∂h = ∂y W_downᵀ.

    `saved` may hold the forward's gate and value; otherwise ops.swiglu recomputes them.
    Into `into`: ∂W_gate = xᵀ ∂gate, ∂W_value = xᵀ ∂value, ∂W_down = hiddenᵀ ∂y.
    # grad [..., d_model], x [..., d_model] -> [..., d_model]
    """
    if saved is None:
        saved = ops.swiglu(x, W_gate, W_value, W_down)
    gate, value = saved["gate"], saved["value"]  # [..., d_mlp] each
    grad_hidden = grad @ W_down.T  # [..., d_mlp]
    grad_gate = silu_backward(grad_hidden * value, gate)
    silu_gate = ops.silu(gate)
    grad_value = grad_hidden * silu_gate
    if into is not None:
        into["W_gate"], into["W_value"] = _weight_grad(x, grad_gate), _weight_grad(x, grad_value)
        into["W_down"] = _weight_grad(silu_gate * value, grad)
    return grad_gate @ W_gate.T + grad_value @ W_value.T


ActivationBackward = Callable[[Array, Array], Array]


def dense_mlp_backward(
    grad: Array,
    x: Array,
    W_in: Array,
    b_in: Array,
    W_out: Array,
    activation_backward: ActivationBackward,
    saved: Saved | None = None,
    into: ParamGrads | None = None,
) -> Array:
    """∂x = act′(x W_in + b_in) ⊙ (∂y W_outᵀ), then times W_inᵀ; the biases only shift, so they drop out.

    `saved` may hold the forward's pre-activation as "gate" (as ops.dense_mlp reports it);
    otherwise it is recomputed. Into `into` (which needs the forward's "hidden" in `saved`):
    ∂W_in = xᵀ ∂pre, ∂b_in = Σ ∂pre, ∂W_out = hiddenᵀ ∂y, ∂b_out = Σ ∂y.
    # grad [..., d_model], x [..., d_model] -> [..., d_model]
    """
    pre = x @ W_in + b_in if saved is None else saved["gate"]  # [..., d_mlp]
    grad_pre = activation_backward(grad @ W_out.T, pre)
    if into is not None:
        if saved is None or "hidden" not in saved:
            raise ValueError("parameter gradients of the dense MLP need the forward's hidden activations")
        into["W_in"], into["b_in"] = _weight_grad(x, grad_pre), _sum_leading(grad_pre)
        into["W_out"], into["b_out"] = _weight_grad(saved["hidden"], grad), _sum_leading(grad)
    return grad_pre @ W_in.T


def add_backward(grad: Array) -> tuple[Array, Array]:
    """out = stream + update, so ∂stream = ∂out and ∂update = ∂out: the residual line passes the gradient unchanged.

    # [..., pos, d_model] -> (∂stream, ∂update), each [..., pos, d_model]
    """
    return grad, grad


def replace_backward(grad: Array) -> tuple[Array, Array]:
    """out = update, so ∂stream = 0 and ∂update = ∂out: the broken mode cuts the gradient's direct path.

    # [..., pos, d_model] -> (∂stream, ∂update), each [..., pos, d_model]
    """
    return np.zeros_like(grad), grad


# --- variants, each chosen once from the config (as in forward.py) ---------------------------


def _rms(grad: Array, x: Array, params: Params, name: str, eps: float, into: ParamGrads | None) -> Array:
    return rms_norm_backward(grad, x, params[f"{name}.g"], eps, into)


def _layer(grad: Array, x: Array, params: Params, name: str, eps: float, into: ParamGrads | None) -> Array:
    return layer_norm_backward(grad, x, params[f"{name}.g"], eps, into)


def _swiglu(grad: Array, x: Array, params: Params, prefix: str, saved: Saved, into: ParamGrads | None) -> Array:
    return swiglu_backward(
        grad, x, params[prefix + "W_gate"], params[prefix + "W_value"], params[prefix + "W_down"], saved, into
    )


def _dense(activation_backward: ActivationBackward):
    def mlp(grad: Array, x: Array, params: Params, prefix: str, saved: Saved, into: ParamGrads | None) -> Array:
        return dense_mlp_backward(
            grad, x, params[prefix + "W_in"], params[prefix + "b_in"], params[prefix + "W_out"], activation_backward,
            saved, into,
        )
    return mlp


NORMS = {"rmsnorm": _rms, "layernorm": _layer}
MLPS = {"swiglu": _swiglu, "gelu": _dense(gelu_backward), "relu": _dense(relu_backward)}
COMBINE = {"add": add_backward, "replace": replace_backward}


@dataclass(frozen=True)
class SublayersBackward:
    """The backward of each piece of one block, bound to one block's parameters (mirrors forward.Sublayers).

    With `param_grads`, each piece also puts its parameters' gradients there, under their full names.
    """

    config: BlockConfig
    params: Params
    prefix: str  # "blocks.{i}."
    param_grads: ParamGrads | None = None

    def _into(self) -> ParamGrads | None:
        """A dict for one piece's local parameter gradients, or None when they are not wanted."""
        return None if self.param_grads is None else {}

    def _keep(self, name: str, local: ParamGrads | None) -> None:
        if local is not None and self.param_grads is not None:
            self.param_grads.update({f"{self.prefix}{name}.{key}": value for key, value in local.items()})

    def norm(self, grad: Array, x: Array, which: str) -> Array:
        local = self._into()
        result = NORMS[self.config.norm](grad, x, self.params, self.prefix + which, self.config.eps, local)
        self._keep(which, local)
        return result

    def attention(self, grad: Array, x: Array, saved: Saved) -> Array:
        p, c, a = self.params, self.config, self.prefix + "attn."
        kept = {name: saved["attn." + name] for name in ("q", "k", "v", "pattern")}
        local = self._into()
        result = attention_backward(
            grad, x, p[a + "W_Q"], p[a + "W_K"], p[a + "W_V"], p[a + "W_O"], c.n_heads, c.causal,
            c.attention_scale, kept, local,
        )
        self._keep("attn", local)
        return result

    def mlp(self, grad: Array, x: Array, saved: Saved) -> Array:
        kept = {name: saved["mlp." + name] for name in ("gate", "value", "hidden") if "mlp." + name in saved}
        local = self._into()
        result = MLPS[self.config.mlp](self.config.mlp_scale * grad, x, self.params, self.prefix + "mlp.", kept,
                                       local)
        self._keep("mlp", local)
        return result

    def combine(self, grad: Array) -> tuple[Array, Array]:
        return COMBINE[self.config.residual](grad)


def pre_norm_block_backward(grad: Array, saved: Saved, s: SublayersBackward) -> Array:
    """∂resid_mid = ∂resid_post + Norm′ᵀ MLP′ᵀ ∂resid_post; ∂resid_pre = ∂resid_mid + Norm′ᵀ Attention′ᵀ ∂resid_mid.

    (Add residuals; in replace mode the bare `∂resid_post` and `∂resid_mid` terms are 0.)
    `saved` is what forward.pre_norm_block records for this block.
    # [..., pos, d_model] -> [..., pos, d_model]
    """
    grad_mid, grad_mlp_out = s.combine(grad)
    grad_ln2 = s.mlp(grad_mlp_out, saved["ln2.normalized"], saved)
    grad_mid = grad_mid + s.norm(grad_ln2, saved["resid_mid"], "ln2")
    grad_pre, grad_attn_out = s.combine(grad_mid)
    grad_ln1 = s.attention(grad_attn_out, saved["ln1.normalized"], saved)
    return grad_pre + s.norm(grad_ln1, saved["resid_pre"], "ln1")


def post_norm_block_backward(grad: Array, saved: Saved, s: SublayersBackward) -> Array:
    """∂resid_mid = (I + MLP′ᵀ) Norm′ᵀ ∂resid_post; ∂resid_pre = (I + Attention′ᵀ) Norm′ᵀ ∂resid_mid.

    (Add residuals; in replace mode the identity terms drop out.) Every gradient crosses a
    norm on its way down, even along the residual line. `saved` is what
    forward.post_norm_block records for this block.
    # [..., pos, d_model] -> [..., pos, d_model]
    """
    combined = COMBINE_FORWARD[s.config.residual](saved["resid_mid"], saved["mlp_out"])  # ln2's input
    grad_mid, grad_mlp_out = s.combine(s.norm(grad, combined, "ln2"))
    grad_mid = grad_mid + s.mlp(grad_mlp_out, saved["resid_mid"], saved)
    combined = COMBINE_FORWARD[s.config.residual](saved["resid_pre"], saved["attn_out"])  # ln1's input
    grad_pre, grad_attn_out = s.combine(s.norm(grad_mid, combined, "ln1"))
    return grad_pre + s.attention(grad_attn_out, saved["resid_pre"], saved)


BLOCKS = {"pre": pre_norm_block_backward, "post": post_norm_block_backward}


# --- the whole stack -------------------------------------------------------------------------

LOSSES = ("direction", "energy")


def loss_direction(config: BlockConfig, shape: Sequence[int]) -> Array:
    """R: a standard-normal array seeded by (config.seed, "loss.direction"), scaled to ‖R‖_F = 1.

    # -> shape of the output, e.g. [pos, d_model]
    """
    rng = np.random.default_rng([config.seed, zlib.crc32(b"loss.direction")])
    r = rng.standard_normal(tuple(shape))
    return r / np.linalg.norm(r)


@dataclass
class StreamGradients:
    """One forward and backward pass: every intermediate, the loss, ∂L/∂(stream) at each block, and, when
    asked for, ∂L/∂ of every parameter."""

    config: BlockConfig
    values: dict[str, Array]  # forward intermediates under the trace's stable keys ("blocks.0.attn.pattern", …)
    loss: float  # the scalar L
    grads: dict[str, Array]  # ∂L/∂ embed, every blocks.{i}.resid_pre, and the last blocks.{n-1}.resid_post
    param_grads: ParamGrads = field(default_factory=dict)  # parameter name -> ∂L/∂parameter (empty unless asked)

    @property
    def output(self) -> Array:
        """The last block's output rows. # [..., pos, d_model]"""
        return self.values[f"blocks.{self.config.n_layers - 1}.resid_post"]

    @property
    def grad_output(self) -> Array:
        """∂L/∂output (R itself for the direction loss). # [..., pos, d_model]"""
        return self.grads[f"blocks.{self.config.n_layers - 1}.resid_post"]

    def stream(self) -> list[Array]:
        """The stream entering each block, then the stack's output: n_layers + 1 arrays."""
        n = self.config.n_layers
        return [self.values[f"blocks.{i}.resid_pre"] for i in range(n)] + [self.output]

    def stream_grads(self) -> list[Array]:
        """∂L/∂ of each entry of stream(), in the same order: n_layers + 1 arrays."""
        n = self.config.n_layers
        return [self.grads[f"blocks.{i}.resid_pre"] for i in range(n)] + [self.grad_output]


@dataclass
class SavedForward:
    """A forward pass through the stack that keeps what its backward pass reads."""

    config: BlockConfig
    params: Params
    values: dict[str, Array]  # every intermediate under the trace's stable keys
    blocks: list[Saved]  # each block's intermediates under their local keys
    output: Array  # the last block's output # [..., pos, d_model]


def forward_saved(config: BlockConfig, params: Params, embed: Array, pos_vectors: Array | None = None) -> SavedForward:
    """Run the stack with forward.py's own block functions, keeping each block's intermediates.

    # [pos, d_model] or [batch, pos, d_model] -> SavedForward
    """
    x = check_input(embed, config)
    check_params(params, config)
    values: dict[str, Array] = {"embed": x}
    if config.positions:
        n_pos = x.shape[-2]
        pos = position_vectors(n_pos, config.d_model) if pos_vectors is None else np.asarray(pos_vectors, float)
        if pos.shape != (n_pos, config.d_model):
            raise ConfigError(f"position vectors have shape {pos.shape}, expected {(n_pos, config.d_model)}")
        values["pos_embed"] = pos
        x = x + pos
    block = PLACEMENTS[config.placement]
    blocks: list[Saved] = []
    stream = x
    for i in range(config.n_layers):
        record: Saved = {}
        stream = block(stream, Sublayers(config, params, f"blocks.{i}."), record.__setitem__)
        blocks.append(record)
        values.update({f"blocks.{i}.{key}": value for key, value in record.items()})
    return SavedForward(config, params, values, blocks, stream)


def backward_stack(run: SavedForward, grad: Array, param_grads: ParamGrads | None = None) -> dict[str, Array]:
    """∂L/∂resid_pre of every block, and of the embeddings, from ∂L/∂output, block by block from the top.

    With `param_grads`, every block parameter's gradient is put there under its full name.
    Position vectors are added to the embeddings, so they pass the gradient unchanged.
    # grad [..., pos, d_model] -> {"blocks.{i}.resid_pre", "blocks.{n-1}.resid_post", "embed": [..., pos, d_model]}
    """
    config = run.config
    last = config.n_layers - 1
    grads = {f"blocks.{last}.resid_post": grad}
    block_backward = BLOCKS[config.placement]
    for i in range(last, -1, -1):
        grad = block_backward(grad, run.blocks[i], SublayersBackward(config, run.params, f"blocks.{i}.", param_grads))
        grads[f"blocks.{i}.resid_pre"] = grad
    grads["embed"] = grad
    return grads


def grad_wrt_input(
    config: BlockConfig,
    params: Params,
    embed: Array,
    loss: str | Array = "direction",
    pos_vectors: Array | None = None,
    with_params: bool = False,
) -> StreamGradients:
    """∂L/∂resid_pre of every block (and of the output), by the chain rule from the top down.

    loss: "direction" (L = Σ output ⊙ R, R from loss_direction), "energy"
    (L = ½ · mean over rows of ‖output row‖²), or an array R of the output's shape (L = Σ output ⊙ R).
    with_params: also ∂L/∂ of every parameter (StreamGradients.param_grads).
    # [pos, d_model] or [batch, pos, d_model] -> StreamGradients
    """
    run = forward_saved(config, params, embed, pos_vectors)
    stream = run.output
    if isinstance(loss, str):
        if loss not in LOSSES:
            raise ConfigError(f"loss must be one of {', '.join(LOSSES)} or an array; got {loss!r}")
        if loss == "direction":
            grad = loss_direction(config, stream.shape)
            value = float(np.sum(stream * grad))
        else:
            n_rows = stream.size // stream.shape[-1]
            grad = stream / n_rows
            value = float(0.5 * np.sum(stream * stream) / n_rows)
    else:
        grad = np.asarray(loss, dtype=float)
        if grad.shape != stream.shape:
            raise ConfigError(f"the loss direction has shape {grad.shape}, but the output has {stream.shape}")
        value = float(np.sum(stream * grad))
    param_grads: ParamGrads = {}
    grads = backward_stack(run, grad, param_grads if with_params else None)
    return StreamGradients(config, run.values, value, grads, param_grads)


def depth_profile(
    config: BlockConfig, params: Params, embed: Array, loss: str | Array = "direction"
) -> dict[str, Array]:
    """Per depth: the residual stream's RMS and ‖∂L/∂stream‖_F, for the depth plot.

    Both arrays have n_layers + 1 entries: entry i < n_layers is the stream entering block i
    (blocks.{i}.resid_pre), the last entry is the stack's output. RMS is sqrt(mean(x²)) over
    every position and feature. With the default loss, grad_norm[-1] is 1 (up to rounding).
    Also returns "loss" (a 0-d array) and "depth" (0 … n_layers).
    # [pos, d_model] -> {"depth", "resid_rms", "grad_norm": [n_layers + 1], "loss": []}
    """
    result = grad_wrt_input(config, params, embed, loss)
    return {
        "depth": np.arange(config.n_layers + 1),
        "resid_rms": np.array([np.sqrt(np.mean(s * s)) for s in result.stream()]),
        "grad_norm": np.array([np.linalg.norm(g) for g in result.stream_grads()]),
        "loss": np.asarray(result.loss),
    }
