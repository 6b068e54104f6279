"""Training a model on a task, and racing two: learning, reproducibility, fairness and divergence."""

from __future__ import annotations

import numpy as np
import pytest

from blocktrace.explorables.engine import BlockConfig, ConfigError
from blocktrace.explorables.engine import tasks as task_data
from blocktrace.explorables.engine.config import MAX_ABS_VALUE
from blocktrace.explorables.engine.training import DEFAULT_SETUPS, Race, Run, TrainSettings

EVALUATE_EVERY = 100


def _steps_to(run: Run, accuracy: float, limit: int) -> int | None:
    """The first multiple of EVALUATE_EVERY steps at which held-out accuracy reaches `accuracy`, or None."""
    while run.step_count < limit:
        for _ in range(EVALUATE_EVERY):
            run.step()
        if run.evaluate()[1] >= accuracy:
            return run.step_count
    return None


@pytest.mark.parametrize("task_id", task_data.TASKS)
def test_each_task_is_learned_at_its_default_set_up(task_id: str) -> None:
    """With its default model and settings each task reaches 95 % held-out accuracy within the steps its set-up
    states, and its loss falls from about chance to well below it."""
    setup = DEFAULT_SETUPS[task_id]
    task = task_data.make_task(task_id)
    run = Run(setup.config, task, setup.settings)
    first_loss = run.evaluate()[0]
    assert first_loss == pytest.approx(task.chance_loss, rel=0.25)
    reached = _steps_to(run, 0.95, setup.learned_within)
    assert reached is not None, f"{task_id}: {run.evaluate()[1]:.3f} after {run.step_count} steps"
    assert run.evaluate()[0] < 0.3 * task.chance_loss


def test_the_sum_task_needs_the_mlp() -> None:
    """The sum task's claim: at step 500 the one-floor model has it (≥ 95 %), the same model with its MLP
    switched off (mlp_scale 0) does not (≤ 90 %)."""
    setup = DEFAULT_SETUPS["sum"]
    task = task_data.make_task("sum")
    accuracies = []
    for config in (setup.config, setup.config.with_(mlp_scale=0.0)):
        run = Run(config, task, setup.settings)
        for _ in range(500):
            run.step()
        accuracies.append(run.evaluate()[1])
    assert accuracies[0] >= 0.95 and accuracies[1] <= 0.90, accuracies


def test_the_same_set_up_gives_the_same_curves_bit_for_bit() -> None:
    """Two runs of one set-up record identical steps and end with identical weights: a race's URL replays it."""
    setup = DEFAULT_SETUPS["induction"]
    runs = [Run(setup.config, task_data.make_task("induction"), setup.settings, data_seed=4) for _ in range(2)]
    for run in runs:
        for _ in range(30):
            run.step()
    assert runs[0].steps == runs[1].steps
    for name, value in runs[0].params.items():
        np.testing.assert_array_equal(runs[1].params[name], value)
    other = Run(setup.config, task_data.make_task("induction"), setup.settings, data_seed=5)
    other.step()
    assert other.steps[0].loss != runs[0].steps[0].loss  # another data seed, other batches


def test_a_race_starts_from_shared_weights_and_sees_the_same_batches() -> None:
    """Depth 2 against depth 4: the shared arrays start equal, and at each step both read the same batch."""
    task = task_data.make_task("copy")
    a = Run(DEFAULT_SETUPS["copy"].config.with_(n_layers=2), task, TrainSettings(lr=0.01))
    b = Run(DEFAULT_SETUPS["copy"].config.with_(n_layers=4), task, TrainSettings(lr=0.01))
    for name, value in a.params.items():
        np.testing.assert_array_equal(b.params[name], value)
    race = Race(a, b)
    seen: list[list[np.ndarray]] = [[], []]
    original = task_data.training_batch

    def spy(task, seed, step, n):
        batch = original(task, seed, step, n)
        seen[len(seen[0]) > len(seen[1])].append(batch.tokens)
        return batch

    task_data.training_batch = spy
    try:
        for _ in range(3):
            race.step()
    finally:
        task_data.training_batch = original
    for tokens_a, tokens_b in zip(*seen, strict=True):
        np.testing.assert_array_equal(tokens_a, tokens_b)
    assert len(seen[0]) == 3


def test_a_race_needs_one_task_and_one_data_seed() -> None:
    """Two models learning different tasks, or from different data, are not a race."""
    config = DEFAULT_SETUPS["copy"].config
    with pytest.raises(ConfigError, match="same task"):
        Race(Run(config, task_data.make_task("copy")), Run(config, task_data.make_task("sum")))
    with pytest.raises(ConfigError, match="same task"):
        Race(Run(config, task_data.make_task("copy")), Run(config, task_data.make_task("copy"), data_seed=1))


def test_a_diverging_run_stops_and_keeps_finite_weights() -> None:
    """SGD at an absurd rate without clipping blows up: the run records the step it diverged at, keeps its last
    good weights (finite, within the engine's range), and takes no further step."""
    run = Run(DEFAULT_SETUPS["copy"].config, task_data.make_task("copy"),
              TrainSettings(optimizer="sgd", lr=1e8, clip=None, momentum=0.0))
    for _ in range(50):
        if run.step() is None:
            break
    assert run.diverged_at is not None and run.diverged_at < 50
    assert all(np.abs(value).max() <= MAX_ABS_VALUE for value in run.params.values())
    assert run.step() is None and run.step_count == run.diverged_at + 1


def test_a_causal_task_is_refused_without_the_causal_mask() -> None:
    """Reverse shows each answer later in its input, so training it without the mask is refused, saying why."""
    with pytest.raises(ConfigError, match="causal mask"):
        Run(BlockConfig(d_model=8, positions=True), task_data.make_task("reverse"))


@pytest.mark.parametrize(("changes", "message"), [
    ({"optimizer": "rmsprop"}, "adam or sgd"), ({"batch": 0}, "batch"), ({"batch": 257}, "batch"),
    ({"lr": -1.0}, "base_lr"), ({"lr": float("nan")}, "base_lr"), ({"warmup": -1}, "warmup"),
    ({"clip": 0.0}, "max_norm"), ({"momentum": 1.0}, "momentum"),
])
def test_bad_training_settings_are_refused(changes: dict, message: str) -> None:
    """Each training knob refuses values outside its range with a message naming it."""
    with pytest.raises(ConfigError, match=message):
        TrainSettings(**changes)


def test_a_step_records_what_it_measured() -> None:
    """A step's record holds the batch's loss, the gradient norm before clipping, the rate after warm-up and one
    stream-gradient norm per floor plus the output."""
    setup = DEFAULT_SETUPS["induction"]
    run = Run(setup.config, task_data.make_task("induction"), TrainSettings(lr=0.01, warmup=4, clip=0.5))
    first = run.step()
    assert first.step == 0 and first.lr == pytest.approx(0.0025) and first.grad_norm > 0
    assert len(first.floor_grad_norms) == setup.config.n_layers + 1
    assert all(v > 0 for v in first.floor_grad_norms)
