"""Optimisers for a dict of parameter arrays: gradient clipping, linear warm-up, SGD and Adam.

Each rule is PyTorch's (torch.nn.utils.clip_grad_norm_, LambdaLR with a linear warm-up, torch.optim.SGD and
torch.optim.Adam), checked against torch's own values in tests/unit/test_optim_parity.py. Nothing here
writes into an array it was given: parameters may be read-only arrays shared by every session
(params.seeded_normal), so each step returns new arrays and keeps its state in arrays of its own.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from blocktrace.explorables.engine.config import ConfigError
from blocktrace.explorables.engine.params import Params

__all__ = ["CLIP_EPS", "Adam", "SGD", "clip_by_global_norm", "warmup_lr"]

CLIP_EPS = 1e-6  # torch's clip_grad_norm_ adds this to the norm, so a zero gradient never divides by zero


def clip_by_global_norm(grads: Params, max_norm: float | None) -> tuple[Params, float]:
    """g ← g · min(1, max_norm / (‖g‖ + 1e-6)), with ‖g‖ the 2-norm of every entry of every array together.

    Returns (new gradients, ‖g‖ before clipping). max_norm None or inf never clips; either way the
    gradients come back as new arrays. A NaN norm scales every gradient by NaN, as torch does.
    # {name: [...]} -> ({name: [...]}, float)
    """
    if max_norm is not None and max_norm != math.inf:
        _check("max_norm", max_norm, lambda x: x > 0, "a finite number > 0 (or None for no clipping)")
    # Norm of the per-array norms: torch's order of summation, and no concatenated copy of every gradient.
    total = float(np.linalg.norm([np.linalg.norm(g) for g in grads.values()])) if grads else 0.0
    if max_norm is None or max_norm == math.inf:
        return {name: np.array(g, dtype=float) for name, g in grads.items()}, total
    scale = float(np.minimum(1.0, max_norm / (total + CLIP_EPS)))  # np.minimum keeps a NaN, as torch.clamp does
    return {name: np.asarray(g, dtype=float) * scale for name, g in grads.items()}, total


def warmup_lr(base_lr: float, step: int, warmup_steps: int) -> float:
    """lr(step) = base_lr · min(1, (step + 1) / warmup_steps): rises linearly over the first warmup_steps steps.

    step counts from 0, so step 0 takes base_lr / warmup_steps and step warmup_steps − 1 onwards the full
    base_lr; warmup_steps 0 means no warm-up. This is the lr torch's LambdaLR with that lambda gives the
    optimiser for its step number `step` (LambdaLR applies lambda(0) on creation, then lambda(k) after
    its k-th scheduler.step()).
    """
    _check("base_lr", base_lr, lambda x: x >= 0, "a finite number >= 0")
    _check_count("step", step)
    _check_count("warmup_steps", warmup_steps)
    if warmup_steps == 0:
        return float(base_lr)
    return base_lr * min(1.0, (step + 1) / warmup_steps)


@dataclass
class _AdamSlot:
    """One parameter's Adam state: its own step count t and the moment averages m and v."""

    step: int
    exp_avg: np.ndarray  # m, the running mean of the gradient
    exp_avg_sq: np.ndarray  # v, the running mean of its square


@dataclass(frozen=True)
class Adam:
    """θ ← θ − lr / (1 − β1ᵗ) · m / (√v / √(1 − β2ᵗ) + ε), torch.optim.Adam's rule (amsgrad off).

    The settings are frozen and checked on creation; the state (m, v and the step count t, per parameter
    name) is changed only by step, and read or restored with state_dict / load_state_dict / reset.
    """

    betas: tuple[float, float] = (0.9, 0.999)  # decay of the moment averages m and v
    eps: float = 1e-8  # added to √v̂ so a zero gradient moves nothing instead of dividing by zero
    weight_decay: float = 0.0  # L2 as torch's Adam: adds weight_decay · θ to the gradient (not AdamW)
    _slots: dict[str, _AdamSlot] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.betas, tuple | list) or len(self.betas) != 2:
            raise ConfigError(f"betas must be a pair of numbers, got {self.betas!r}")
        betas = tuple(_check(f"betas[{i}]", b, lambda x: 0 <= x < 1, "in [0, 1)") for i, b in enumerate(self.betas))
        object.__setattr__(self, "betas", betas)
        object.__setattr__(self, "eps", _check("eps", self.eps, lambda x: x > 0, "a finite number > 0"))
        object.__setattr__(self, "weight_decay",
                           _check("weight_decay", self.weight_decay, lambda x: x >= 0, "a finite number >= 0"))

    def step(self, params: Params, grads: Params, lr: float) -> Params:
        """New parameters after one Adam step; a parameter with no gradient is passed through unchanged.

        # {name: [...]}, {name: [...] same shape} -> {name: [...]}
        """
        _check("lr", lr, lambda x: x >= 0, "a finite number >= 0")
        _check_grads(params, grads)
        beta1, beta2 = self.betas
        new = dict(params)
        for name, grad in grads.items():
            param, g = _decayed(params[name], grad, self.weight_decay)
            slot = self._slots.get(name)
            if slot is None or slot.exp_avg.shape != param.shape:  # new, or a new model's array under the name
                slot = self._slots[name] = _AdamSlot(0, np.zeros(param.shape), np.zeros(param.shape))
            slot.step += 1
            slot.exp_avg += (1 - beta1) * (g - slot.exp_avg)  # torch's lerp toward g
            slot.exp_avg_sq *= beta2
            slot.exp_avg_sq += (1 - beta2) * g * g
            bias_correction1 = 1 - beta1**slot.step
            bias_correction2_sqrt = (1 - beta2**slot.step) ** 0.5
            denom = np.sqrt(slot.exp_avg_sq) / bias_correction2_sqrt + self.eps
            new[name] = param - (lr / bias_correction1) * (slot.exp_avg / denom)
        return new

    def state_dict(self) -> dict[str, dict[str, Any]]:
        """A copy of the state, torch's names: {name: {"step": t, "exp_avg": m, "exp_avg_sq": v}}."""
        return {name: {"step": s.step, "exp_avg": s.exp_avg.copy(), "exp_avg_sq": s.exp_avg_sq.copy()}
                for name, s in self._slots.items()}

    def load_state_dict(self, state: dict[str, dict[str, Any]]) -> None:
        """Replace the state with a copy of one state_dict returned (e.g. to restart a race from a checkpoint)."""
        self._slots.clear()
        for name, s in state.items():
            self._slots[name] = _AdamSlot(int(s["step"]), np.array(s["exp_avg"], dtype=float),
                                          np.array(s["exp_avg_sq"], dtype=float))

    def reset(self) -> None:
        """Forget every moment and step count: the next step is a first step again."""
        self._slots.clear()


@dataclass(frozen=True)
class SGD:
    """θ ← θ − lr · b, with b = momentum · b + g (b = g on a parameter's first step), torch.optim.SGD's rule.

    Momentum 0 uses the gradient itself (no buffer kept). Dampening and Nesterov are not offered.
    """

    momentum: float = 0.0  # share of the previous step kept in the buffer b
    weight_decay: float = 0.0  # L2: adds weight_decay · θ to the gradient
    _buffers: dict[str, np.ndarray] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "momentum", _check("momentum", self.momentum, lambda x: 0 <= x < 1, "in [0, 1)"))
        object.__setattr__(self, "weight_decay",
                           _check("weight_decay", self.weight_decay, lambda x: x >= 0, "a finite number >= 0"))

    def step(self, params: Params, grads: Params, lr: float) -> Params:
        """New parameters after one SGD step; a parameter with no gradient is passed through unchanged.

        # {name: [...]}, {name: [...] same shape} -> {name: [...]}
        """
        _check("lr", lr, lambda x: x >= 0, "a finite number >= 0")
        _check_grads(params, grads)
        new = dict(params)
        for name, grad in grads.items():
            param, g = _decayed(params[name], grad, self.weight_decay)
            if self.momentum:
                buf = self._buffers.get(name)
                if buf is None or buf.shape != param.shape:  # first step, as torch: b = g
                    buf = self._buffers[name] = g.copy()  # a copy: the buffer is updated in place later
                else:
                    buf *= self.momentum
                    buf += g
                g = buf
            new[name] = param - lr * g
        return new

    def state_dict(self) -> dict[str, dict[str, Any]]:
        """A copy of the state, torch's names: {name: {"momentum_buffer": b}} (empty without momentum)."""
        return {name: {"momentum_buffer": buf.copy()} for name, buf in self._buffers.items()}

    def load_state_dict(self, state: dict[str, dict[str, Any]]) -> None:
        """Replace the state with a copy of one state_dict returned."""
        self._buffers.clear()
        self._buffers.update({name: np.array(s["momentum_buffer"], dtype=float) for name, s in state.items()})

    def reset(self) -> None:
        """Forget every momentum buffer: the next step is a first step again."""
        self._buffers.clear()


# --- Private API ---------------------------------------------------------------------------

def _decayed(param: np.ndarray, grad: np.ndarray, weight_decay: float) -> tuple[np.ndarray, np.ndarray]:
    """(θ, g + weight_decay · θ) as float arrays: torch's L2 weight decay, added to the gradient."""
    param, g = np.asarray(param, dtype=float), np.asarray(grad, dtype=float)
    return param, (g + weight_decay * param if weight_decay else g)


def _check(name: str, value: Any, ok: Callable[[float], bool], rule: str) -> float:
    """value as a float when it is a finite real number that satisfies ok; otherwise ConfigError naming the rule."""
    if (isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value)
            or not ok(float(value))):
        raise ConfigError(f"{name} must be {rule}, got {value!r}")
    return float(value)


def _check_count(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ConfigError(f"{name} must be a whole number >= 0, got {value!r}")


def _check_grads(params: Params, grads: Params) -> None:
    """Raise ValueError when a gradient names no parameter or has another shape than its parameter."""
    for name, grad in grads.items():
        if name not in params:
            raise ValueError(f"gradient for {name}, which is not a parameter")
        if np.shape(grad) != np.shape(params[name]):
            raise ValueError(f"gradient for {name} has shape {np.shape(grad)}, parameter {np.shape(params[name])}")
