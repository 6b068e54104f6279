"""Reference solution of lessons/train-the-block/exercise (kept out of the student's folder).

tests/app/test_exercises.py runs the exercise's tests against this file through BLOCKTRACE_SOLUTION.
Written independently of blocktrace.explorables.engine.optim, which the tests compare it with.
"""

from __future__ import annotations

import numpy as np

Array = np.ndarray


def warmup_lr(base_lr: float, step: int, warmup_steps: int) -> float:
    """lr(step) = base_lr · min(1, (step + 1) / warmup_steps); warmup_steps 0: base_lr throughout."""
    if warmup_steps == 0:
        return base_lr
    return base_lr * min(1.0, (step + 1) / warmup_steps)


def clip_by_global_norm(grads: dict[str, Array], max_norm: float) -> tuple[dict[str, Array], float]:
    """g ← g · min(1, max_norm / (‖g‖ + 1e-6)), one factor for every array; also ‖g‖ before clipping."""
    norm = float(np.sqrt(sum(float(np.sum(np.square(g))) for g in grads.values())))
    scale = min(1.0, max_norm / (norm + 1e-6))
    return {name: np.asarray(g, dtype=float) * scale for name, g in grads.items()}, norm


def adam_step(param: Array, grad: Array, m: Array, v: Array, t: int, lr: float,
              beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8) -> tuple[Array, Array, Array]:
    """θ ← θ − lr · m̂ / (√v̂ + eps), with m̂ and v̂ the bias-corrected running means of g and g²."""
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    m_hat = m / (1 - beta1**t)
    v_hat = v / (1 - beta2**t)
    return param - lr * m_hat / (np.sqrt(v_hat) + eps), m, v
