"""Models of one race stepped together: one NumPy computation with a leading model axis, for speed.

A race's arrays are tiny (width 16, batch 32), so a step's time is Python's overhead per NumPy call, paid per
model, per floor, per op (benchmarks/race_speed.py). Here both models of a race go through each op in one call,
shaped [model, batch, pos, d_model], and their parameters, gradients and Adam moments live in one [model,
n_params] buffer each, so clipping and Adam are a few calls per step instead of a few per parameter array.

Bit for bit: every number is computed by the same operations, in the same order, as training.Run computes it
for each model alone (tests/unit/test_stacked.py compares the step records of every variant a race offers). A
product runs over the rows of many sequences at once only where this machine's BLAS was seen to give the bits
of the product per sequence a model alone computes (checked once per shape: _merged_is_exact); reductions run
over the same axes of the same rows; elementwise steps are done in place, with the same roundings in the same
order; a max, exact in any order, is taken column by column; Adam is elementwise. The held-out readings of all
models come from one forward pass of the same code.

Pre- and post-norm models differ only in which gain each norm reads: at every point where a pre-norm model
normalises, a post-norm model normalises the same array (pre's ln2 and post's ln1 both read resid_pre +
attn_out; pre's next ln1, or ln_f, and post's ln2 both read resid_mid + mlp_out), so one norm call with a gain
per model serves both, and only the first floor's input norm is pre-norm's alone.

What stacks: models with the same task, data, width, heads, MLP (SwiGLU), RMSNorm, depth, scales, batch,
clipping and Adam; they may differ in placement, residual (add or replace), weights' seed, learning rate and
warm-up. Anything else (`stackable` says so) runs as training.Race, one model after the other.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from blocktrace.explorables.engine import language_model as lm
from blocktrace.explorables.engine import ops
from blocktrace.explorables.engine import tasks as task_data
from blocktrace.explorables.engine.config import MAX_ABS_VALUE, BlockConfig, ConfigError
from blocktrace.explorables.engine.optim import CLIP_EPS, Adam, warmup_lr
from blocktrace.explorables.engine.params import Params, position_vectors
from blocktrace.explorables.engine.training import HELD_OUT, MAX_STEPS, StepRecord, TrainSettings

__all__ = ["StackedRace", "StackedSide", "stackable"]

Array = np.ndarray

_SAME_CONFIG = ("d_model", "n_heads", "d_head", "d_mlp", "n_layers", "norm", "mlp", "attention_scale", "mlp_scale",
                "causal", "positions", "eps")  # may differ: placement, residual, seed
_SAME_SETTINGS = ("optimizer", "clip", "batch")  # may differ: lr, warmup (momentum is SGD's)


def stackable(configs: list[BlockConfig], settings: list[TrainSettings]) -> bool:
    """Whether these models can step together here (else they run one after the other, as training.Race)."""
    first, s0 = configs[0], settings[0]
    return (all(getattr(c, name) == getattr(first, name) for c in configs for name in _SAME_CONFIG)
            and all(getattr(s, name) == getattr(s0, name) for s in settings for name in _SAME_SETTINGS)
            and first.norm == "rmsnorm" and first.mlp == "swiglu" and s0.optimizer == "adam")


@dataclass
class StackedSide:
    """One model of a stacked race, read as a training.Run is: its set-up, steps, and current parameters."""

    config: BlockConfig
    task: task_data.Task
    settings: TrainSettings
    data_seed: int
    held_out: task_data.Batch
    _race: StackedRace = field(repr=False)
    _index: int = 0
    steps: list[StepRecord] = field(default_factory=list)
    diverged_at: int | None = None

    @property
    def params(self) -> Params:
        """A copy of the model's parameters as they are now (the race updates its buffer in place)."""
        return self._race._params_of(self._index)

    @property
    def step_count(self) -> int:
        return len(self.steps)

    @property
    def running(self) -> bool:
        return self.diverged_at is None and self.step_count < MAX_STEPS

    def evaluate(self) -> tuple[float, float]:
        """(loss, accuracy) on the held-out set, with the current parameters (as training.Run.evaluate)."""
        return self._race._held_out_readings()[self._index]


class StackedRace:
    """Two (or more) models on the same task and data, stepped together; `a` and `b` read like training.Run."""

    def __init__(self, configs: list[BlockConfig], task: task_data.Task, settings: list[TrainSettings],
                 data_seed: int) -> None:
        if not stackable(configs, settings):
            raise ConfigError("these models cannot step together; race them with training.Race")
        if task.causal and not configs[0].causal:
            raise ConfigError(f"the {task.title} task shows each answer later in its input: "
                              "train it with the causal mask on, or the model can read the answer")
        self.configs, self.settings, self.task, self.data_seed = configs, settings, task, data_seed
        m = self.m = len(configs)
        vocab = len(task.vocab)
        c = configs[0]
        self.n_layers, self.eps = c.n_layers, c.eps
        held = task_data.held_out(task, data_seed, HELD_OUT)
        self.sides = [StackedSide(config, task, s, data_seed, held, self, j)
                      for j, (config, s) in enumerate(zip(configs, settings, strict=True))]
        self.post = np.array([config.placement == "post" for config in configs])
        self.replace = np.array([config.residual == "replace" for config in configs])
        self._any_replace, self._any_post, self._all_post = bool(self.replace.any()), bool(self.post.any()), \
            bool(self.post.all())
        self._runs = _runs(self.post.tolist())  # (rows, post-norm?) of each run of neighbours placed alike
        # One layout for every model: the union of their parameter names (a post-norm model has no ln_f.g; its
        # slot stays 0, gets gradient 0, and Adam leaves it 0).
        inits = [lm.init_model(config, vocab) for config in configs]
        own = [lm.model_param_names(config) for config in configs]
        names = list(dict.fromkeys(name for names_j in own for name in names_j))
        shapes = {name: next(init[name].shape for init in inits if name in init) for name in names}
        self._slots: dict[str, tuple[int, int, tuple[int, ...]]] = {}
        offset = 0
        for name in names:
            size = int(np.prod(shapes[name]))
            self._slots[name] = (offset, offset + size, shapes[name])
            offset += size
        self._own = own
        self.p = np.zeros((m, offset))
        for j, init in enumerate(inits):
            for name, value in init.items():
                start, stop, _ = self._slots[name]
                self.p[j, start:stop] = value.ravel()
        self.g = np.zeros_like(self.p)  # gradients; slots a model lacks are never written, so stay 0
        self.exp_avg, self.exp_avg_sq = np.zeros_like(self.p), np.zeros_like(self.p)
        self.adam_steps = 0
        self._version = 0  # counts updates of p: held-out readings are kept for one version
        self._readings: tuple[int, list[tuple[float, float]]] | None = None
        self._adam = Adam()
        self._views()

    # --- layout ---------------------------------------------------------------------------------

    def _view(self, buffer: Array, name: str) -> Array:
        """Parameter `name` of every model, a view of `buffer`. # -> [model, *shape]"""
        start, stop, shape = self._slots[name]
        return buffer[:, start:stop].reshape((self.m, *shape))

    def _site(self, names: list[str | None]) -> tuple[Array, Array | None]:
        """A norm's gains: flat indices into p (or g) of model j's gain names[j] (None: model j has no norm there),
        and which models have one (None: all)."""
        d, width = self.configs[0].d_model, self.p.shape[1]
        rows = np.array([name is not None for name in names])
        index = np.array([[j * width + self._slots[name][0] + i for i in range(d)]
                          for j, name in enumerate(names) if name is not None])
        return index, (None if rows.all() else rows)

    def _views(self) -> None:
        """Views of each floor's matrices in p and g, shaped to broadcast over batch; gain indices per norm."""
        m, n = self.m, self.n_layers
        pre = [not post for post in self.post]
        self.W: list[dict[str, Array]] = []
        self.dW: list[dict[str, Array]] = []
        for i in range(n):
            keys = [f"blocks.{i}.attn.W_{k}" for k in "QKVO"] + [f"blocks.{i}.mlp.W_{k}"
                                                                 for k in ("gate", "value", "down")]
            self.W.append({k.split(".", 2)[2]: self._view(self.p, k) for k in keys})
            self.dW.append({k.split(".", 2)[2]: self._view(self.g, k) for k in keys})
        # The norm at resid_pre + attn_out of floor i: pre's ln2, post's ln1. At resid_mid + mlp_out of floor i:
        # pre's next ln1 (ln_f after the last floor), post's ln2. At floor 0's input: pre's ln1 alone.
        self.at_s = [self._site([f"blocks.{i}.ln2.g" if pre[j] else f"blocks.{i}.ln1.g" for j in range(m)])
                     for i in range(n)]
        self.at_t = [self._site([(f"blocks.{i + 1}.ln1.g" if i + 1 < n else "ln_f.g") if pre[j]
                                 else f"blocks.{i}.ln2.g" for j in range(m)]) for i in range(n)]
        self.at_x = self._site(["blocks.0.ln1.g" if pre[j] else None for j in range(m)]) if any(pre) else None
        self.W_E, self.W_U = self._view(self.p, "embed.W_E"), self._view(self.p, "unembed.W_U")
        self.dW_E, self.dW_U = self._view(self.g, "embed.W_E"), self._view(self.g, "unembed.W_U")
        # Each model's gradient arrays in the order training.Run's grads dict holds them (clipping sums their
        # norms in that order): unembed, ln_f, the floors from the top (each in its block backward's order),
        # embed.
        self._order: list[list[tuple[int, int]]] = []
        for j in range(m):
            keys = ["unembed.W_U"] + (["ln_f.g"] if pre[j] else [])
            for i in range(n - 1, -1, -1):
                b = f"blocks.{i}."
                mlp = [b + "mlp.W_gate", b + "mlp.W_value", b + "mlp.W_down"]
                attn = [b + f"attn.W_{k}" for k in "QKVO"]
                keys += (mlp + [b + "ln2.g"] + attn + [b + "ln1.g"] if pre[j]
                         else [b + "ln2.g"] + mlp + [b + "ln1.g"] + attn)
            keys.append("embed.W_E")
            assert sorted(keys) == sorted(self._own[j]), "every parameter once"
            self._order.append([self._slots[k][:2] for k in keys])
        # The same segments grouped by length, so each group's √(g·g) is one batched call: flat indices into g
        # [segments, length], and each segment's model and place in that model's order.
        width = self.p.shape[1]
        segments = [(stop - start, j, place, j * width + start) for j, order in enumerate(self._order)
                    for place, (start, stop) in enumerate(order)]
        self._groups = []
        for length in sorted({seg[0] for seg in segments}):
            group = [seg for seg in segments if seg[0] == length]
            self._groups.append((np.array([seg[3] for seg in group])[:, None] + np.arange(length),
                                 np.array([seg[1] for seg in group]), np.array([seg[2] for seg in group])))
        self._array_norms = np.zeros((m, max(len(order) for order in self._order)))
        self._grads, self._work = np.empty_like(self.p), np.empty_like(self.p)  # Adam's scratch, reused

    def _params_of(self, j: int) -> Params:
        return {name: self.p[j, start:stop].reshape(shape).copy()
                for name, (start, stop, shape) in self._slots.items() if name in self._own[j]}

    @property
    def a(self) -> StackedSide:
        return self.sides[0]

    @property
    def b(self) -> StackedSide:
        return self.sides[1]

    # --- one step ---------------------------------------------------------------------------------

    def _norm(self, x: Array, site: tuple[Array, Array | None], saved: list | deque) -> Array:
        """RMSNorm with each model's gain at this site, as ops.rms_norm; keeps what its backward reads. Models
        without a norm here (the site's rows) pass x through."""
        index, rows = site
        x_in = x if rows is None else x[rows]
        gain = self.p.reshape(-1)[index].reshape(len(index), 1, 1, x.shape[-1])
        root = np.add.reduce(x_in * x_in, axis=-1, keepdims=True)  # np.mean is this sum / d, in place
        root /= x.shape[-1]
        root += self.eps
        np.sqrt(root, out=root)
        y = x_in / root  # ops.rms_normalize
        saved.append((x_in, root, y, index, gain, rows))
        if rows is None:
            return y * gain
        out = x.copy()
        out[rows] = y * gain
        return out

    def _norm_backward(self, grad: Array, saved: tuple) -> Array:
        """As backward.rms_norm_backward, with each gain's gradient written into g at the model's own gain.
        Models without a norm at this site pass grad through."""
        x, root, y0, index, gain, rows = saved
        grad_in = grad if rows is None else grad[rows]
        d = x.shape[-1]
        self.g.reshape(-1)[index] = (grad_in * y0).reshape(len(index), -1, d).sum(axis=1)
        g = grad_in * gain
        inv_rms = 1.0 / root
        y = x * inv_rms
        along = np.add.reduce(g * y, axis=-1, keepdims=True)
        along /= d
        y *= along
        g -= y  # g − y · mean(g ⊙ y), in place: the same roundings as backward.rms_normalize_backward
        g *= inv_rms
        if rows is None:
            return g
        out = grad.copy()
        out[rows] = g
        return out

    def _combine(self, stream: Array, update: Array) -> Array:
        """stream + update (add), or update (replace), per model."""
        out = stream + update
        if self._any_replace:
            out[self.replace] = update[self.replace]
        return out

    def _combine_backward(self, grad: Array) -> Array:
        """∂stream: the gradient itself (add) or 0 (replace), per model; ∂update is the gradient."""
        if not self._any_replace:
            return grad
        out = grad.copy()
        out[self.replace] = 0.0
        return out

    def _mm(self, x: Array, W: Array) -> Array:
        """x @ W for each model, as NumPy does it for one model's [batch, pos, n] @ [n, k]: a product per
        sequence; where this machine's BLAS gives the same bits for one product over the rows of a training
        batch's sequences (_merged_is_exact), one product per that many sequences (the held-out set's 256 in
        products of 32 at the default batch: one product over all of them leaves BLAS's small-matrix kernel,
        and was many times slower here). # [model, batch, pos, n], [model, n, k] -> [model, batch, pos, k]"""
        *_, batch, pos, k = x.shape
        group = math.gcd(batch, self.settings[0].batch)  # sequences per product: a training batch's at most
        if group > 1 and _merged_is_exact(group, pos, k, W.shape[-1]):
            return (x.reshape(self.m, batch // group, group * pos, k) @ W[:, None]).reshape(*x.shape[:-1],
                                                                                         W.shape[-1])
        return x @ W[:, None]

    def _mm_t(self, x: Array, W: Array) -> Array:
        """x @ Wᵀ for each model, as NumPy does it for one model's [batch, pos, k] @ [n, k]ᵀ: a product per
        sequence with the transposed view. Where this machine's BLAS gives the same bits for one product over
        every row with Wᵀ copied contiguous (_merged_t_is_exact), that one product, which is cheaper.
        # [model, batch, pos, k], [model, n, k] -> [model, batch, pos, n]"""
        *_, batch, pos, k = x.shape
        if _merged_t_is_exact(batch, pos, k, W.shape[-2]):
            W_t = np.ascontiguousarray(np.swapaxes(W, -1, -2))
            return (x.reshape(self.m, -1, k) @ W_t).reshape(*x.shape[:-1], W.shape[-2])
        return x @ np.swapaxes(W, -1, -2)[:, None]

    def _select_post(self, if_post: Array, if_pre: Array) -> Array:
        """Each model's row of if_post (post-norm) or if_pre (pre-norm): one copy per run of like models, not
        np.where over every entry."""
        if self._all_post:
            return if_post
        if not self._any_post:
            return if_pre
        out = np.empty_like(if_pre)
        for rows, post in self._runs:
            out[rows] = if_post[rows] if post else if_pre[rows]
        return out

    def _attention(self, x: Array, W: dict[str, Array], saved: dict) -> Array:
        c = self.configs[0]
        h = c.n_heads
        q = ops.split_heads(self._mm(x, W["attn.W_Q"]), h)
        k = ops.split_heads(self._mm(x, W["attn.W_K"]), h)
        v = ops.split_heads(self._mm(x, W["attn.W_V"]), h)
        pattern = self._pattern(q, k)
        mixed = _heads_merged(pattern, v)
        out = self._mm(mixed, W["attn.W_O"])
        if c.attention_scale != 1.0:  # x · 1.0 is x, bit for bit
            out *= c.attention_scale
        saved.update(x=x, q=q, k=k, v=v, pattern=pattern, mixed=mixed)
        return out

    def _pattern(self, q: Array, k: Array) -> Array:
        """softmax(ops.attention_scores(q, k)), as ops computes it, with fewer passes: the scores are scaled,
        masked, shifted, exponentiated and normalised in place, and each row's max comes from _row_max.
        # [..., n_heads, pos, d_head] x2 -> [..., n_heads, pos, pos]"""
        scores = q @ np.swapaxes(k, -1, -2)
        scores /= np.sqrt(q.shape[-1])
        if self.configs[0].causal:
            np.copyto(scores, -np.inf, where=_hidden(q.shape[-2]))
        scores -= _row_max(scores)
        np.exp(scores, out=scores)
        scores /= np.add.reduce(scores, axis=-1, keepdims=True)
        return scores

    def _attention_backward(self, grad: Array, i: int, saved: dict) -> Array:
        c, W, dW = self.configs[0], self.W[i], self.dW[i]
        q, k, v, pattern, x = saved["q"], saved["k"], saved["v"], saved["pattern"], saved["x"]
        m = self.m
        grad_out = grad if c.attention_scale == 1.0 else c.attention_scale * grad
        grad_mixed = ops.split_heads(self._mm_t(grad_out, W["attn.W_O"]), c.n_heads)
        grad_scores = grad_mixed @ np.swapaxes(v, -1, -2)  # ∂pattern, made ∂scores in place below
        grad_v = _heads_merged(np.swapaxes(pattern, -1, -2), grad_mixed)
        grad_scores -= np.add.reduce(grad_scores * pattern, axis=-1, keepdims=True)
        grad_scores *= pattern  # backward.softmax_backward
        grad_scores /= np.sqrt(q.shape[-1])
        grad_q = _heads_merged(grad_scores, k)
        grad_k = _heads_merged(np.swapaxes(grad_scores, -1, -2), q)
        xt = np.swapaxes(x.reshape(m, -1, x.shape[-1]), -1, -2)
        for name, g in (("attn.W_Q", grad_q), ("attn.W_K", grad_k), ("attn.W_V", grad_v)):
            np.matmul(xt, g.reshape(m, -1, g.shape[-1]), out=dW[name])
        mixed = saved["mixed"]
        np.matmul(np.swapaxes(mixed.reshape(m, -1, mixed.shape[-1]), -1, -2),
                  grad_out.reshape(m, -1, grad_out.shape[-1]), out=dW["attn.W_O"])
        grad_x = self._mm_t(grad_q, W["attn.W_Q"])
        grad_x += self._mm_t(grad_k, W["attn.W_K"])
        grad_x += self._mm_t(grad_v, W["attn.W_V"])
        return grad_x

    def _mlp(self, x: Array, W: dict[str, Array], saved: dict) -> Array:
        gate = self._mm(x, W["mlp.W_gate"])
        value = self._mm(x, W["mlp.W_value"])
        sigmoid = ops.sigmoid(gate)  # kept: the backward reads σ(gate) and SiLU(gate), as ops.silu makes them
        silu_gate = sigmoid * gate
        hidden = silu_gate * value
        out = self._mm(hidden, W["mlp.W_down"])
        if self.configs[0].mlp_scale != 1.0:
            out *= self.configs[0].mlp_scale
        saved.update(mx=x, gate=gate, value=value, sigmoid=sigmoid, silu_gate=silu_gate, hidden=hidden)
        return out

    def _mlp_backward(self, grad: Array, i: int, saved: dict) -> Array:
        W, dW, m = self.W[i], self.dW[i], self.m
        scale = self.configs[0].mlp_scale
        grad = grad if scale == 1.0 else scale * grad
        x, gate, value, s = saved["mx"], saved["gate"], saved["value"], saved["sigmoid"]
        grad_hidden = self._mm_t(grad, W["mlp.W_down"])
        # backward.silu_backward(∂h ⊙ value, gate) = ∂h ⊙ value ⊙ σ ⊙ (1 + gate ⊙ (1 − σ)), in place
        grad_gate = grad_hidden * value
        grad_gate *= s
        slope = 1.0 - s
        slope *= gate
        slope += 1.0
        grad_gate *= slope
        grad_value = grad_hidden
        grad_value *= saved["silu_gate"]
        xt = np.swapaxes(x.reshape(m, -1, x.shape[-1]), -1, -2)
        np.matmul(xt, grad_gate.reshape(m, -1, grad_gate.shape[-1]), out=dW["mlp.W_gate"])
        np.matmul(xt, grad_value.reshape(m, -1, grad_value.shape[-1]), out=dW["mlp.W_value"])
        h = saved["hidden"]  # SiLU(gate) ⊙ value, which the backward recomputes with the same roundings
        np.matmul(np.swapaxes(h.reshape(m, -1, h.shape[-1]), -1, -2), grad.reshape(m, -1, grad.shape[-1]),
                  out=dW["mlp.W_down"])
        grad_x = self._mm_t(grad_gate, W["mlp.W_gate"])
        grad_x += self._mm_t(grad_value, W["mlp.W_value"])
        return grad_x

    def step(self) -> tuple[StepRecord | None, ...]:
        """One training step of every model still running (as training.Run.step, each); a record per model."""
        live = [side.running for side in self.sides]
        if not any(live):
            return tuple(None for _ in self.sides)
        n = self.sides[live.index(True)].step_count  # the running models have taken the same steps
        batch = task_data.training_batch(self.task, self.data_seed, n, self.settings[0].batch)
        with np.errstate(all="ignore"):  # a diverging run is reported below, not as warnings
            losses, stream_norms = self._loss_and_grads(batch)
            records, finite = self._update(n, losses, stream_norms, live)
        for j, side in enumerate(self.sides):
            if records[j] is not None:
                side.steps.append(records[j])
                if not finite[j]:
                    side.diverged_at = n
        return tuple(records)

    def _held_out_readings(self) -> list[tuple[float, float]]:
        """(loss, accuracy) of every model on the held-out set with its parameters as they are now, as
        training.Run.evaluate computes each: one forward pass for all models, kept until the next update (the
        runner reads both models' readings at the same step)."""
        if self._readings is None or self._readings[0] != self._version:
            b = self.sides[0].held_out
            with np.errstate(all="ignore"):
                nothing = deque(maxlen=0)  # what the backward would read is dropped as it comes: no pass follows
                logits = self._mm(self._forward(np.asarray(b.tokens), nothing, nothing), self.W_U)
                readings = [(lm.cross_entropy(logits[j], b.targets, b.scored)[0],
                             task_data.accuracy(logits[j].argmax(axis=-1), b)) for j in range(self.m)]
            self._readings = (self._version, readings)
        return self._readings[1]

    def _forward(self, tokens: Array, norms: list | deque, floors: list[dict] | deque) -> Array:
        """Every model's stack on tokens: the final norm's output for pre-norm, the stack's output for
        post-norm; what the backward reads goes into norms and floors, in forward order.
        # [batch, pos] -> [model, batch, pos, d_model]"""
        x = self.W_E[:, tokens]  # [model, batch, pos, d_model]
        if self.configs[0].positions:
            x = x + position_vectors(x.shape[-2], x.shape[-1])
        u = x if self.at_x is None else self._norm(x, self.at_x, norms)  # post-norm's attention reads x itself
        r = x
        for i in range(self.n_layers):
            saved: dict = {}
            a = self._attention(u, self.W[i], saved)
            s = self._combine(r, a)
            n_s = self._norm(s, self.at_s[i], norms)  # pre's ln2 (the MLP's input), post's ln1 (resid_mid)
            mid = self._select_post(n_s, s)
            f = self._mlp(n_s, self.W[i], saved)
            t = self._combine(mid, f)
            u = self._norm(t, self.at_t[i], norms)  # pre's next ln1 (or ln_f), post's ln2 (resid_post)
            r = self._select_post(u, t)
            floors.append(saved)
        return u

    def _loss_and_grads(self, batch: task_data.Batch) -> tuple[list[float], list[list[float]]]:
        m, n = self.m, self.n_layers
        tokens = np.asarray(batch.tokens)
        norms: list = []  # every norm's saved values, in forward order
        floors: list[dict] = []
        z = self._forward(tokens, norms, floors)
        logits = self._mm(z, self.W_U)
        losses, grad_logits = [], np.empty_like(logits)
        for j in range(m):
            loss, grad_logits[j] = lm.cross_entropy(logits[j], batch.targets, batch.scored)
            losses.append(loss)
        d, vocab = z.shape[-1], logits.shape[-1]
        self.dW_U[...] = np.swapaxes(z.reshape(m, -1, d), -1, -2) @ grad_logits.reshape(m, -1, vocab)
        grad_z = self._mm_t(grad_logits, self.W_U)
        # Down the stack. `above` is ∂ of the stream entering the floor above (resid_post of this floor) as each
        # model's record reads it; `grad_u` the attention input's gradient, `grad_r` its residual line's.
        post_grads = [None] * (n + 1)  # ‖∂loss/∂resid_pre‖ of each floor, then resid_post of the last
        grad_t = self._norm_backward(grad_z, norms.pop())  # pre: ln_f; post: the last ln2
        post_grads[n] = self._select_post(grad_z, grad_t)
        for i in range(n - 1, -1, -1):
            saved = floors[i]
            grad_mid = self._combine_backward(grad_t)
            grad_n = self._mlp_backward(grad_t, i, saved)
            both = grad_mid + grad_n  # post: ∂resid_mid, before its norm
            into = self._select_post(both, grad_n)
            normed = self._norm_backward(into, norms.pop())
            grad_s = self._select_post(normed, grad_mid + normed)
            grad_r = self._combine_backward(grad_s)
            grad_u = self._attention_backward(grad_s, i, saved)
            total = grad_r + grad_u  # post: ∂resid_pre
            if i > 0:  # the norm at the stream below: pre's ln1 of this floor, post's ln2 of the floor below
                normed = self._norm_backward(self._select_post(total, grad_u), norms.pop())
                below = self._select_post(normed, grad_r + normed)
            elif self.at_x is not None:  # pre-norm's ln1 at the input; post-norm passes grad_u through
                below = self._select_post(total, grad_r + self._norm_backward(grad_u, norms.pop()))
            else:
                below = total
            post_grads[i] = self._select_post(total, below)
            grad_t = below
        grad_embed = self.dW_E
        grad_embed[...] = 0.0
        x_grad = post_grads[0]
        for j in range(m):
            np.add.at(grad_embed[j], tokens, x_grad[j])  # a token seen twice gathers both
        # ‖g‖ of each model's array as np.linalg.norm computes it, √(g·g) with BLAS ddot, a floor per call
        squares = np.array([(g.reshape(m, 1, -1) @ g.reshape(m, -1, 1)).reshape(m) for g in post_grads])
        return losses, np.sqrt(squares).T.tolist()

    def _update(self, n: int, losses: list[float], stream_norms: list[list[float]],
                live: list[bool]) -> tuple[list[StepRecord | None], list[bool]]:
        """Clip, Adam, and each model's record and whether its step stays finite (as training.Run.step)."""
        m = self.m
        flat = self.g.reshape(-1)
        for index, models, places in self._groups:
            seg = flat[index]
            # Each row's g·g as ndarray.dot computes it (BLAS ddot): a [1, n] @ [n, 1] product is that dot.
            self._array_norms[models, places] = np.sqrt((seg[:, None, :] @ seg[:, :, None]).reshape(-1))
        totals, scales, lrs = [], [], []
        clip = self.settings[0].clip
        for j in range(m):
            # np.linalg.norm of each array is √(g·g) of its entries in order; the segments hold them so.
            total = float(np.linalg.norm(self._array_norms[j, :len(self._order[j])]))
            totals.append(total)
            scales.append(float(np.minimum(1.0, clip / (total + CLIP_EPS))) if clip not in (None, math.inf) else None)
            lrs.append(warmup_lr(self.settings[j].lr, n, self.settings[j].warmup))
        grads = self._grads
        if None in scales:
            for j, scale in enumerate(scales):
                grads[j] = self.g[j] if scale is None else self.g[j] * scale
        else:
            np.multiply(self.g, np.array(scales)[:, None], out=grads)
        finite = [math.isfinite(losses[j]) and math.isfinite(totals[j]) for j in range(m)]
        step = [live[j] and finite[j] for j in range(m)]
        if any(step):
            # optim.Adam.step for every model at once, in place with the same roundings (x · y is y · x)
            beta1, beta2 = self._adam.betas
            self.adam_steps += 1
            work = self._work
            np.subtract(grads, self.exp_avg, out=work)
            work *= 1 - beta1
            self.exp_avg += work
            self.exp_avg_sq *= beta2
            np.multiply(grads, 1 - beta2, out=work)
            work *= grads
            self.exp_avg_sq += work
            bias_correction1 = 1 - beta1**self.adam_steps
            bias_correction2_sqrt = (1 - beta2**self.adam_steps) ** 0.5
            denom = np.sqrt(self.exp_avg_sq, out=work)
            denom /= bias_correction2_sqrt
            denom += self._adam.eps
            ratio = np.divide(self.exp_avg, denom, out=work)
            ratio *= np.array([lr / bias_correction1 for lr in lrs])[:, None]
            new = np.subtract(self.p, ratio, out=work)
            for j in range(m):
                if step[j]:
                    finite[j] = bool(np.abs(new[j]).max() <= MAX_ABS_VALUE)  # NaN fails
                    if finite[j]:
                        self.p[j] = new[j]
                        self._version += 1
        records = [StepRecord(n, losses[j], totals[j], lrs[j], tuple(stream_norms[j])) if live[j] else None
                   for j in range(m)]
        return records, finite


# --- Private API ------------------------------------------------------------------------------


def _runs(flags: list[bool]) -> list[tuple[slice, bool]]:
    """(rows, flag) of each run of equal neighbouring flags: [pre, post] -> [(0:1, False), (1:2, True)]."""
    runs, start = [], 0
    for flag, run in itertools.groupby(flags):
        stop = start + len(list(run))
        runs.append((slice(start, stop), bool(flag)))
        start = stop
    return runs


@lru_cache(maxsize=8)
def _hidden(n_pos: int) -> Array:
    """Where the causal mask forbids reading: ~ops.causal_mask, built once per length. # -> [pos, pos] of bool"""
    hidden = ~ops.causal_mask(n_pos)
    hidden.flags.writeable = False
    return hidden


def _heads_merged(a: Array, b: Array) -> Array:
    """ops.merge_heads(a @ b), each head's product written straight into its columns of the merged array (the
    same BLAS products, without the copy that merges them afterwards).
    # [..., n_heads, pos, n], [..., n_heads, n, d_head] -> [..., pos, n_heads * d_head]"""
    *lead, n_heads, pos, _ = a.shape
    d_head = b.shape[-1]
    out = np.empty((*lead, pos, n_heads, d_head))
    np.matmul(a, b, out=np.swapaxes(out, -2, -3))
    return out.reshape(*lead, pos, n_heads * d_head)


def _row_max(x: Array) -> Array:
    """max over the last axis, as np.max(x, axis=-1, keepdims=True): a max is exact in any order, and
    np.maximum down the columns is one vectorised pass per column where np.max pays per short row. NaN
    propagates as in np.max. # [..., n] -> [..., 1]"""
    out = x[..., 0].copy()
    for j in range(1, x.shape[-1]):
        np.maximum(out, x[..., j], out=out)
    return out[..., None]


@lru_cache(maxsize=64)
def _merged_is_exact(batch: int, pos: int, k: int, n: int) -> bool:
    """Whether, on this machine's BLAS, x @ W over all batch · pos rows at once gives the bits of NumPy's
    product per sequence (what a model alone computes); checked as _merged_t_is_exact is."""
    rng = np.random.default_rng(0)
    for _ in range(3):
        x, W = rng.standard_normal((batch, pos, k)), rng.standard_normal((k, n))
        if not np.array_equal((x.reshape(-1, k) @ W).reshape(batch, pos, n), x @ W):
            return False
    return True


@lru_cache(maxsize=64)
def _merged_t_is_exact(batch: int, pos: int, k: int, n: int) -> bool:
    """Whether, on this machine's BLAS, x @ Wᵀ over all batch · pos rows at once with Wᵀ copied contiguous
    gives the bits of NumPy's product per sequence with the transposed view (what a model alone computes).

    Which kernel BLAS runs depends on the sizes and transposes (OpenBLAS takes its small-matrix kernels by
    M · N · K and transpose; here merged products with k = 16 agree and k = 32 do not), and kernels sum in
    different orders; so it is checked once per shape, on random numbers, where different orders show.
    """
    rng = np.random.default_rng(0)
    for _ in range(3):
        x, W = rng.standard_normal((batch, pos, k)), rng.standard_normal((n, k))
        merged = (x.reshape(-1, k) @ np.ascontiguousarray(W.T)).reshape(batch, pos, n)
        if not np.array_equal(merged, x @ W.T):
            return False
    return True
