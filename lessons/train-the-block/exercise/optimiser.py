"""Exercise: the arithmetic of one training step, as every race in the lesson takes it.

A step of a race: clip the gradients by their global norm, read the learning rate off the warm-up,
then let Adam move every weight. Write the three functions below, then run, in this folder:

    blocktrace check

Use only NumPy: the tests compare your results with the project's engine
(blocktrace.explorables.engine.optim), which follows PyTorch's rules.
"""

from __future__ import annotations

import numpy as np

Array = np.ndarray


def warmup_lr(base_lr: float, step: int, warmup_steps: int) -> float:
    """lr(step) = base_lr · min(1, (step + 1) / warmup_steps): the rate rises in a straight line, then stays.

    step counts from 0, so step 0 already takes base_lr / warmup_steps, and from step warmup_steps − 1 on
    the rate is base_lr. warmup_steps 0 means no warm-up: base_lr at every step.
    """
    raise NotImplementedError("warmup_lr is not written yet")


def clip_by_global_norm(grads: dict[str, Array], max_norm: float) -> tuple[dict[str, Array], float]:
    """g ← g · min(1, max_norm / (‖g‖ + 1e-6)) for every array, where ‖g‖ = √(sum of g² over every entry of
    every array together): one factor for all of them.

    Returns the clipped gradients (new arrays, under the same names; the ones given stay as they were) and
    ‖g‖ before clipping.
    # {name: [...]}, float -> ({name: [...]}, float)
    """
    raise NotImplementedError("clip_by_global_norm is not written yet")


def adam_step(param: Array, grad: Array, m: Array, v: Array, t: int, lr: float,
              beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8) -> tuple[Array, Array, Array]:
    """One Adam step for one array of weights; t is the number of this step, counting from 1.

    m ← β1 · m + (1 − β1) · g          (the running mean of the gradient)
    v ← β2 · v + (1 − β2) · g²         (the running mean of its square)
    m̂ = m / (1 − β1ᵗ),  v̂ = v / (1 − β2ᵗ)
    θ ← θ − lr · m̂ / (√v̂ + eps)

    Returns (new θ, new m, new v) as new arrays; the arrays given stay as they were.
    # [...], [...], [...], [...] -> ([...], [...], [...]), all of one shape
    """
    raise NotImplementedError("adam_step is not written yet")
