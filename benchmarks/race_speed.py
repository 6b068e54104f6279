"""Steps per second of a race in one training worker, and how long a slice takes: the default race and a few
others.

usage: python benchmarks/race_speed.py [--slices 40] [--steps 20]

Each race is started in a RaceRunner with one worker (explorables/train_the_block/runner.py) and advanced
--slices times with the server's default slice (at most SLICE_STEPS steps or SLICE_CPU_S of CPU). Printed per
race: the median steps per slice, the median wall time per slice as the server sees it (the worker's work plus
the pickling and the pipe), and steps per second (one step moves both models). The first slice, which builds
the race, is left out. Timings on a busy machine are slower: compare rows of one run. The worker runs nicer
than everything else (runner.NICENESS), so on a machine loaded by other work its wall-clock figures fall.

Then, in this process and by CPU time (so other work on the machine matters less), --steps steps of each race
as the workers train it (RaceSpec.build: both models stepped together where they can be, engine/stacked.py)
and as two models stepped one after the other (RaceSpec.build_reference, the code path before issue 40), with
the worker's malloc settings: steps per CPU second of each, and their ratio (medians of 5 rounds).

Last, where a step's time goes: CPU ms per step of the default race as built, at batch 1, 8 and 32. What grows
with the batch is arithmetic on the arrays (BLAS products, elementwise passes, reductions); what is left at
batch 1 is the overhead per call.

Measured 2026-12-07 on the 2-core test machine (load average 5-8 from other work), Python 3.11: the default
race 19-22 steps a second in one worker before issue 40, 40 after (slices of 4 steps instead of 3 in the same
80 ms of CPU); by CPU in-process 30 against 47 steps a second.

Measured 2026-12-08, same machine (load average 1.8-2.1), before -> after fewer passes in engine/stacked.py,
two rounds of each interleaved: Python 3.11, one worker 39 -> 51 steps a second (slices of 5 steps instead of
4), in-process 42-48 -> 53.5-57 (1.36-1.47 -> 1.58 times one by one); Python 3.13, one worker 43-44 -> 46-51,
in-process 43-46 -> 49.5-54. CPU ms per step by batch, after: 3.3-4.1 at batch 1, 6.6-7.6 at 8, 17.7-18.9 at
32 (before: 3.9-4.6 and 20.5-22 at 32): most of a step is now arithmetic on the arrays, not per-call overhead.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import time

from blocktrace.explorables.engine.stacked import StackedRace
from blocktrace.explorables.train_the_block.runner import SLICE_CPU_S, SLICE_STEPS, RaceRunner, keep_freed_memory
from blocktrace.explorables.train_the_block.state import RaceState

RACES = {  # name -> the page's set-up
    "default (copy, pre vs post, 12 floors)": {},
    "copy, pre vs post, 24 floors": {"floors": 24},
    "copy, pre vs post, 2 floors": {"floors": 2},
    "induction, 2 vs 12 floors": {"task": "induction", "difference": "depth"},
}


async def measure(setup: dict, slices: int) -> tuple[float, float, float]:
    runner = RaceRunner(workers=1)
    try:
        race = await runner.start(RaceState(**setup).spec)
        await runner.advance(race)
        steps, walls = [], []
        for _ in range(slices):
            start = time.perf_counter()
            part = await runner.advance(race)
            walls.append(time.perf_counter() - start)
            steps.append(len(part.a))
        return statistics.median(steps), 1000 * statistics.median(walls), sum(steps) / sum(walls)
    finally:
        runner.shutdown()


def cpu_rate(race, steps: int) -> float:
    """Steps per CPU second of this process over `steps` steps."""
    start = time.process_time()
    for _ in range(steps):
        race.step()
    return steps / (time.process_time() - start)


def in_process(setup: dict, steps: int) -> tuple[float, float]:
    """Median steps per CPU second of the race as built for the workers, and as two models one after the other."""
    spec = RaceState(**setup).spec
    built, reference = spec.build(), spec.build_reference()
    for race in (built, reference):
        for _ in range(3):  # the first steps fill caches (position vectors, masks, malloc's pools)
            race.step()
    rates: tuple[list[float], list[float]] = ([], [])
    for _ in range(5):  # interleaved, so a burst of other work on the machine falls on both
        rates[0].append(cpu_rate(built, steps // 5 or 1))
        rates[1].append(cpu_rate(reference, steps // 5 or 1))
    return statistics.median(rates[0]), statistics.median(rates[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slices", type=int, default=40)
    parser.add_argument("--steps", type=int, default=20, help="steps of each race for the in-process figures")
    a = parser.parse_args()
    print(f"slices of at most {SLICE_STEPS} steps or {SLICE_CPU_S * 1000:.0f} ms of CPU, one worker, "
          f"{a.slices} slices each (medians)")
    print(f"{'race':<42} {'steps/slice':>11} {'ms/slice':>9} {'steps/s':>8}")
    for name, setup in RACES.items():
        per_slice, wall_ms, per_second = asyncio.run(measure(setup, a.slices))
        print(f"{name:<42} {per_slice:>11.0f} {wall_ms:>9.1f} {per_second:>8.1f}")
    keep_freed_memory()  # as in a worker
    print(f"\nin this process, steps per CPU second (medians of 5 rounds of {max(1, a.steps // 5)} steps)")
    print(f"{'race':<42} {'as built':>9} {'one by one':>10} {'ratio':>6}")
    for name, setup in RACES.items():
        built, reference = in_process(setup, a.steps)
        print(f"{name:<42} {built:>9.1f} {reference:>10.1f} {built / reference:>6.2f}")
    print("\nthe default race as built, CPU ms per step by batch (what grows with it is arithmetic)")
    print("  ".join(f"batch {batch}: {ms:.1f} ms" for batch, ms in batch_scaling().items()))


def batch_scaling(batches: tuple[int, ...] = (1, 8, 32), steps: int = 20) -> dict[int, float]:
    """CPU ms per step of the default race as built, at each batch size (median of 3 rounds)."""
    race = RaceState().spec.build()
    out = {}
    for batch in batches:
        settings = [dataclasses.replace(s, batch=batch) for s in race.settings]
        scaled = StackedRace(race.configs, race.task, settings, race.data_seed)
        for _ in range(3):
            scaled.step()
        out[batch] = 1000 / statistics.median(cpu_rate(scaled, steps) for _ in range(3))
    return out


if __name__ == "__main__":
    main()
