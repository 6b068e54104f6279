"""How often each race comes out which way, over many seeds: the figures a lesson about training may quote.

usage: python benchmarks/race_sweep.py [--seeds 20] [--preset NAME ...] [--procs N] [--json PATH]

Each preset is a race (explorables/engine/training.py): two models on one task, the same batches and the
same starting weights where their shapes agree, differing in one choice. For every seed s in 0 … seeds-1
both models take the preset's steps with model seed s and data seed s; held-out accuracy is read every
EVALUATE_EVERY steps. Printed per preset: how often A reached the preset's accuracy first, B first, both
at the same reading, or neither; the median step at which each reached it; how often each diverged;
and the median final accuracy. A claim such as "pre-norm beats post-norm at 12 floors without warm-up"
may be quoted as the fraction printed here, never more strongly.

Runs are spread over --procs worker processes (default: one per core). Nothing is timed: this is about
outcomes, and the outcomes depend only on the seeds (the same NumPy gives the same table).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field

from blocktrace.explorables.engine import tasks
from blocktrace.explorables.engine.training import DEFAULT_SETUPS, Run, TrainSettings
from blocktrace.explorables.train_the_block.runner import EVALUATE_EVERY  # read as often as the page reads


@dataclass(frozen=True)
class Preset:
    """A race: the task, the changes both models share, the one choice each takes, steps and target."""

    task: str
    shared: dict = field(default_factory=dict)  # BlockConfig changes for both
    a: dict = field(default_factory=dict)  # BlockConfig changes for A only
    b: dict = field(default_factory=dict)  # BlockConfig changes for B only
    settings: dict = field(default_factory=dict)  # TrainSettings for both
    settings_a: dict = field(default_factory=dict)
    settings_b: dict = field(default_factory=dict)
    steps: int = 400
    target: float = 0.9  # held-out accuracy that counts as learned
    label_a: str = "A"
    label_b: str = "B"


PRESETS: dict[str, Preset] = {
    "pre-vs-post-12": Preset("copy", {"n_layers": 12}, {"placement": "pre"}, {"placement": "post"},
                             {"lr": 0.01}, label_a="pre-norm", label_b="post-norm"),
    "pre-vs-post-12-warmup": Preset("copy", {"n_layers": 12}, {"placement": "pre"}, {"placement": "post"},
                                    {"lr": 0.01, "warmup": 100}, label_a="pre-norm", label_b="post-norm"),
    "add-vs-replace-12": Preset("copy", {"n_layers": 12}, {"residual": "add"}, {"residual": "replace"},
                                {"lr": 0.01}, label_a="add", label_b="replace"),
    "pre-vs-post-12-lr0.003": Preset("copy", {"n_layers": 12}, {"placement": "pre"}, {"placement": "post"},
                                     {"lr": 0.003}, steps=1000, label_a="pre-norm", label_b="post-norm"),
    "pre-vs-post-12-lr0.003-warmup": Preset("copy", {"n_layers": 12}, {"placement": "pre"}, {"placement": "post"},
                                            {"lr": 0.003, "warmup": 200}, steps=1000, label_a="pre-norm",
                                            label_b="post-norm"),
    "depth-2-vs-12": Preset("induction", {}, {"n_layers": 2}, {"n_layers": 12}, {"lr": 0.01},
                            label_a="2 floors", label_b="12 floors"),
}


@dataclass(frozen=True)
class Outcome:
    """One model of one seed: the step it first read at least the target (None: never), whether and where it
    diverged, and its last held-out accuracy."""

    reached: int | None
    diverged_at: int | None
    final_accuracy: float


def run_one(preset: Preset, which: str, seed: int) -> Outcome:
    setup = DEFAULT_SETUPS[preset.task]
    config = setup.config.with_(**preset.shared, **(preset.a if which == "a" else preset.b), seed=seed)
    settings = TrainSettings(**{**preset.settings, **(preset.settings_a if which == "a" else preset.settings_b)})
    run = Run(config, tasks.make_task(preset.task), settings, data_seed=seed)
    reached = None
    while run.step_count < preset.steps and run.running:
        for _ in range(EVALUATE_EVERY):
            run.step()
        if reached is None and run.evaluate()[1] >= preset.target:
            reached = run.step_count
    return Outcome(reached, run.diverged_at, run.evaluate()[1])


def _job(args: tuple[str, str, int]) -> tuple[str, str, int, Outcome]:
    name, which, seed = args
    return name, which, seed, run_one(PRESETS[name], which, seed)


def summarise(preset: Preset, a: list[Outcome], b: list[Outcome]) -> dict:
    """The fractions and medians printed for one preset."""
    n = len(a)

    def first(x: Outcome, y: Outcome) -> bool:
        return x.reached is not None and (y.reached is None or x.reached < y.reached)

    def median_reached(outcomes: list[Outcome]) -> float | None:
        steps = [o.reached for o in outcomes if o.reached is not None]
        return statistics.median(steps) if steps else None

    return {
        "seeds": n,
        "a_first": sum(first(x, y) for x, y in zip(a, b, strict=True)) / n,
        "b_first": sum(first(y, x) for x, y in zip(a, b, strict=True)) / n,
        "same_reading": sum(x.reached is not None and x.reached == y.reached for x, y in zip(a, b, strict=True)) / n,
        "neither": sum(x.reached is None and y.reached is None for x, y in zip(a, b, strict=True)) / n,
        "a_reached": sum(o.reached is not None for o in a) / n, "b_reached": sum(o.reached is not None for o in b) / n,
        "a_median_steps": median_reached(a), "b_median_steps": median_reached(b),
        "a_diverged": sum(o.diverged_at is not None for o in a) / n,
        "b_diverged": sum(o.diverged_at is not None for o in b) / n,
        "a_final_accuracy": statistics.median(o.final_accuracy for o in a),
        "b_final_accuracy": statistics.median(o.final_accuracy for o in b),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--preset", action="append", choices=sorted(PRESETS), help="default: every preset")
    parser.add_argument("--procs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", help="also write the summaries and every outcome to this file")
    a = parser.parse_args(argv)
    names = a.preset or list(PRESETS)
    jobs = [(name, which, seed) for name in names for seed in range(a.seeds) for which in ("a", "b")]
    outcomes: dict[tuple[str, str], dict[int, Outcome]] = {}
    with ProcessPoolExecutor(max_workers=a.procs) as pool:
        for name, which, seed, outcome in pool.map(_job, jobs):
            outcomes.setdefault((name, which), {})[seed] = outcome
    report = {}
    for name in names:
        p = PRESETS[name]
        a_list = [outcomes[(name, "a")][s] for s in range(a.seeds)]
        b_list = [outcomes[(name, "b")][s] for s in range(a.seeds)]
        s = report[name] = summarise(p, a_list, b_list)
        print(f"\n{name}: task {p.task}, {p.steps} steps, target {p.target:.0%} held-out accuracy, "
              f"shared {p.shared} settings {p.settings}; A = {p.label_a} {p.a}{p.settings_a or ''}, "
              f"B = {p.label_b} {p.b}{p.settings_b or ''}")
        print(f"  over {s['seeds']} seeds: A first {s['a_first']:.0%}, B first {s['b_first']:.0%}, "
              f"same reading {s['same_reading']:.0%}, neither {s['neither']:.0%}")
        print(f"  reached the target: A {s['a_reached']:.0%} (median step {s['a_median_steps']}), "
              f"B {s['b_reached']:.0%} (median step {s['b_median_steps']})")
        print(f"  diverged: A {s['a_diverged']:.0%}, B {s['b_diverged']:.0%}; median final accuracy: "
              f"A {s['a_final_accuracy']:.3f}, B {s['b_final_accuracy']:.3f}")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as out:
            json.dump({"summaries": report, "outcomes": {f"{n}/{w}": {s: asdict(o) for s, o in v.items()}
                                                          for (n, w), v in outcomes.items()}}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
