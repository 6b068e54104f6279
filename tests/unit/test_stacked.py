"""Both models of a race stepped together (engine/stacked.py) give, bit for bit, the curves each gives alone."""

from __future__ import annotations

import numpy as np
import pytest

from blocktrace.explorables.engine import tasks as task_data
from blocktrace.explorables.engine.config import MAX_ABS_VALUE, ConfigError
from blocktrace.explorables.engine.stacked import StackedRace, stackable
from blocktrace.explorables.engine.training import DEFAULT_SETUPS, Race, Run, TrainSettings
from blocktrace.explorables.train_the_block.runner import EVALUATE_EVERY
from blocktrace.explorables.train_the_block.state import DIFFERENCES, RaceState

STEPS = EVALUATE_EVERY + 5  # past one held-out reading

# Every choice the race offers, on two floors (cheap), and the default race and a warm-up at twelve.
VARIANTS = [
    {"difference": difference, "floors": 2, "seed": seed, **extra}
    for difference in DIFFERENCES
    for seed in (0, 7)
    for extra in ({}, {"lr": 0.03, "warmup": 100})
] + [
    {},  # the default: copy, pre vs post, 12 floors
    {"difference": "residual", "lr": 0.003, "warmup": 200},
    {"task": "induction", "difference": "lr", "floors": 6, "lr": 0.001},
]


def _reference_and_built(setup: dict) -> tuple[Race, object]:
    spec = RaceState(**setup).spec
    return spec.build_reference(), spec.build()


@pytest.mark.parametrize("setup", VARIANTS, ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items()) or "default")
def test_a_race_gives_the_curves_its_models_give_alone(setup: dict) -> None:
    """Every step record (loss, gradient norms, rate, each floor's ‖∂loss/∂stream‖) and the held-out reading are
    equal, bit for bit, to those of today's one-model-at-a-time race, for every variant the page offers."""
    reference, built = _reference_and_built(setup)
    for _ in range(STEPS):
        assert built.step() == reference.step()
    assert built.a.steps == reference.a.steps and built.b.steps == reference.b.steps
    assert built.a.evaluate() == reference.a.evaluate() and built.b.evaluate() == reference.b.evaluate()
    for mine, theirs in ((built.a.params, reference.a.params), (built.b.params, reference.b.params)):
        assert mine.keys() == theirs.keys()
        assert all(np.array_equal(mine[name], theirs[name]) for name in theirs)


def test_held_out_readings_follow_the_weights_whichever_model_reads_first() -> None:
    """Both models' held-out readings come from one forward pass kept until the next update: B read before A,
    and again after more steps, each equals, bit for bit, its model's reading alone."""
    reference, built = _reference_and_built({"floors": 2})
    for steps in (1, 3):
        for _ in range(steps):
            assert built.step() == reference.step()
        assert built.b.evaluate() == reference.b.evaluate() and built.a.evaluate() == reference.a.evaluate()
        assert built.a.evaluate() == reference.a.evaluate()  # kept, not recomputed differently


def test_the_races_that_stack_are_the_ones_the_page_offers_most() -> None:
    """Placement, residual, rate and warm-up races step together; norm and depth races run as before."""
    stacked = {d: isinstance(RaceState(difference=d).spec.build(), StackedRace) for d in DIFFERENCES}
    assert stacked == {"placement": True, "residual": True, "lr": True, "warmup": True, "norm": False,
                       "depth": False}


def test_a_model_that_diverges_stops_while_the_other_goes_on_as_alone() -> None:
    """A rate that throws B's weights out of range on its first step: B records that step and keeps its first
    weights; A goes on exactly as it would alone."""
    config, task = DEFAULT_SETUPS["copy"].config.with_(n_layers=2), task_data.make_task("copy")
    settings = [TrainSettings(lr=0.01), TrainSettings(lr=1e7, clip=1.0)]
    race = StackedRace([config, config.with_(placement="post")], task, settings, 0)
    reference = Race(Run(config, task, settings[0]), Run(config.with_(placement="post"), task, settings[1]))
    for _ in range(5):
        assert race.step() == reference.step()
    assert race.b.diverged_at == reference.b.diverged_at == 0 and race.a.running
    assert all(np.abs(v).max() <= MAX_ABS_VALUE for v in race.b.params.values())
    assert all(np.array_equal(race.b.params[k], v) for k, v in reference.b.params.items())


def test_models_that_differ_in_shape_or_optimiser_are_refused() -> None:
    """Widths, depths, norms or optimisers that differ cannot share one computation: stackable says so, and the
    race refuses them rather than guess."""
    config = DEFAULT_SETUPS["copy"].config
    adam = TrainSettings()
    assert not stackable([config, config.with_(n_layers=2)], [adam, adam])
    assert not stackable([config, config.with_(norm="layernorm")], [adam, adam])
    assert not stackable([config, config], [adam, TrainSettings(optimizer="sgd")])
    with pytest.raises(ConfigError, match="cannot step together"):
        StackedRace([config, config.with_(d_model=8, n_heads=2)], task_data.make_task("copy"), [adam, adam], 0)



def test_a_shape_whose_stacked_steps_round_otherwise_here_runs_one_model_after_the_other(monkeypatch) -> None:
    """Whether merged products round as the separate ones do is the BLAS kernel's (OpenBLAS's Prescott kernel, on
    processors without AVX, rounds some otherwise): a race's shape is stacked only once its first steps agreed on
    this machine (runner._stacking_agrees), else its models step one after the other."""
    from dataclasses import replace

    from blocktrace.explorables.train_the_block import runner

    spec = RaceState(floors=6).spec
    step = StackedRace.step

    def one_bit_off(self):
        a, b = step(self)
        return a, replace(b, grad_norm=float(np.nextafter(b.grad_norm, np.inf)))

    runner._stacking_agrees.cache_clear()
    monkeypatch.setattr(StackedRace, "step", one_bit_off)
    try:
        assert not spec.stacks() and isinstance(spec.build(), Race)
    finally:
        monkeypatch.undo()
        runner._stacking_agrees.cache_clear()
    assert spec.stacks() and isinstance(spec.build(), StackedRace)
