"""Training one model on one task, step by step, and racing two that differ in one choice.

A step: the batch of (seed, step) from the task's training stream, the loss and every gradient
(language_model.loss_and_grads), clipping by the global norm, the warm-up's learning rate, one optimiser
step. Everything is seeded, so the same set-up gives the same curves, bit for bit, on the same NumPy;
two runs of a race see the same batches in the same order and start from the same weights wherever
their shapes agree (language_model.init_model).

A run whose loss or gradients stop being finite, or whose weights leave the engine's range (MAX_ABS_VALUE),
has diverged: it keeps its last good parameters, records the step, and takes no further steps (a race goes
on with the other model).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from blocktrace.explorables.engine import language_model as lm
from blocktrace.explorables.engine import tasks as task_data
from blocktrace.explorables.engine.config import MAX_ABS_VALUE, BlockConfig, ConfigError
from blocktrace.explorables.engine.optim import SGD, Adam, clip_by_global_norm, warmup_lr
from blocktrace.explorables.engine.params import Params

__all__ = ["DEFAULT_SETUPS", "HELD_OUT", "MAX_BATCH", "MAX_STEPS", "Race", "Run", "Setup", "StepRecord",
           "TrainSettings"]

MAX_BATCH = 256  # sequences per step: bounds one step's work
MAX_STEPS = 20_000  # steps one run may take
HELD_OUT = 256  # held-out sequences an evaluation reads


@dataclass(frozen=True)
class TrainSettings:
    """How a model is trained: the optimiser and its knobs, checked on creation."""

    optimizer: Literal["adam", "sgd"] = "adam"  # Adam, or SGD with momentum
    lr: float = 3e-3  # the learning rate after warm-up
    warmup: int = 0  # steps over which the rate rises linearly from lr / warmup to lr (0: none)
    clip: float | None = 1.0  # largest global gradient norm (None: no clipping)
    batch: int = 32  # sequences per step
    momentum: float = 0.9  # SGD only

    def __post_init__(self) -> None:
        if self.optimizer not in ("adam", "sgd"):
            raise ConfigError(f"optimizer must be adam or sgd, got {self.optimizer!r}")
        if isinstance(self.batch, bool) or not isinstance(self.batch, int) or not 1 <= self.batch <= MAX_BATCH:
            raise ConfigError(f"batch must be a whole number between 1 and {MAX_BATCH}, got {self.batch!r}")
        warmup_lr(self.lr, 0, self.warmup)  # checks lr and warmup with the optimiser's own messages
        if self.clip is not None:
            clip_by_global_norm({}, self.clip)
        SGD(momentum=self.momentum)  # checks momentum, whichever optimiser is chosen

    def make_optimizer(self) -> Adam | SGD:
        return Adam() if self.optimizer == "adam" else SGD(momentum=self.momentum)


@dataclass(frozen=True)
class Setup:
    """A task's starting set-up: the model, how it is trained, and within how many steps it reaches 95 %
    held-out accuracy (tests/unit/test_training.py checks each, by steps)."""

    config: BlockConfig
    settings: TrainSettings
    learned_within: int  # steps


def _model(n_layers: int) -> BlockConfig:
    return BlockConfig(d_model=16, n_heads=2, d_mlp=32, n_layers=n_layers, causal=True, positions=True, seed=1)


_FAST = TrainSettings(lr=0.01)
DEFAULT_SETUPS: dict[str, Setup] = {
    "copy": Setup(_model(1), _FAST, 1000),
    "reverse": Setup(_model(1), _FAST, 500),
    "sort": Setup(_model(1), _FAST, 1000),
    "induction": Setup(_model(2), _FAST, 800),
    "sum": Setup(_model(1), _FAST, 500),
}


@dataclass(frozen=True)
class StepRecord:
    """What one step measured, before its update: the batch's loss, the global gradient norm (before
    clipping), the learning rate used, and ‖∂loss/∂stream‖ entering each floor and at the output."""

    step: int
    loss: float
    grad_norm: float
    lr: float
    floor_grad_norms: tuple[float, ...]


@dataclass
class Run:
    """One model learning one task: its parameters, optimiser state and what every step measured."""

    config: BlockConfig
    task: task_data.Task
    settings: TrainSettings = TrainSettings()
    data_seed: int = 0  # seeds the batches and the held-out set (the model's weights use config.seed)
    params: Params = field(init=False)
    steps: list[StepRecord] = field(init=False, default_factory=list)
    diverged_at: int | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.task.causal and not self.config.causal:
            raise ConfigError(f"the {self.task.title} task shows each answer later in its input: "
                              "train it with the causal mask on, or the model can read the answer")
        self._optimizer = self.settings.make_optimizer()
        self.params = lm.init_model(self.config, len(self.task.vocab))
        self.held_out = task_data.held_out(self.task, self.data_seed, HELD_OUT)  # what evaluate reads

    @property
    def step_count(self) -> int:
        return len(self.steps)

    @property
    def running(self) -> bool:
        return self.diverged_at is None and self.step_count < MAX_STEPS

    def step(self) -> StepRecord | None:
        """One training step; None once the run has diverged or reached MAX_STEPS."""
        if not self.running:
            return None
        n = self.step_count
        batch = task_data.training_batch(self.task, self.data_seed, n, self.settings.batch)
        with np.errstate(all="ignore"):  # a diverging run is reported below, not as warnings
            result = lm.loss_and_grads(self.config, self.params, batch.tokens, batch.targets, batch.scored)
            grads, norm = clip_by_global_norm(result.grads, self.settings.clip)
            lr = warmup_lr(self.settings.lr, n, self.settings.warmup)
            finite = math.isfinite(result.loss) and math.isfinite(norm)
            new = self._optimizer.step(self.params, grads, lr) if finite else self.params
            finite = finite and all(np.abs(value).max() <= MAX_ABS_VALUE for value in new.values())  # NaN fails
        record = StepRecord(n, result.loss, norm, lr, tuple(float(v) for v in result.floor_grad_norms()))
        self.steps.append(record)
        if finite:
            self.params = new
        else:
            self.diverged_at = n
        return record

    def evaluate(self) -> tuple[float, float]:
        """(loss, accuracy) on the held-out set, with the current parameters."""
        b = self.held_out
        with np.errstate(all="ignore"):
            loss, logits = lm.loss_and_logits(self.config, self.params, b.tokens, b.targets, b.scored)
        return loss, task_data.accuracy(logits.argmax(axis=-1), b)


@dataclass
class Race:
    """Two runs on the same task, batches and seeds, differing in the choices their configs and settings
    differ in; they step together."""

    a: Run
    b: Run

    def __post_init__(self) -> None:
        if self.a.task != self.b.task or self.a.data_seed != self.b.data_seed:
            raise ConfigError("both models of a race must learn the same task from the same data")

    def step(self) -> tuple[StepRecord | None, StepRecord | None]:
        return self.a.step(), self.b.step()
