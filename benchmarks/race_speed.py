"""Steps per second of a race in one training worker, and how long a slice takes: the default race and a few
others.

usage: python benchmarks/race_speed.py [--slices 40]

Each race is started in a RaceRunner with one worker (explorables/train_the_block/runner.py) and advanced
--slices times with the server's default slice (at most SLICE_STEPS steps or SLICE_CPU_S of CPU). Printed per
race: the median steps per slice, the median wall time per slice as the server sees it (the worker's work plus
the pickling and the pipe), and steps per second (one step moves both models). The first slice, which builds
the race, is left out. Timings on a busy machine are slower: compare rows of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from blocktrace.explorables.train_the_block.runner import SLICE_CPU_S, SLICE_STEPS, RaceRunner
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slices", type=int, default=40)
    a = parser.parse_args()
    print(f"slices of at most {SLICE_STEPS} steps or {SLICE_CPU_S * 1000:.0f} ms of CPU, one worker, "
          f"{a.slices} slices each (medians)")
    print(f"{'race':<42} {'steps/slice':>11} {'ms/slice':>9} {'steps/s':>8}")
    for name, setup in RACES.items():
        per_slice, wall_ms, per_second = asyncio.run(measure(setup, a.slices))
        print(f"{name:<42} {per_slice:>11.0f} {wall_ms:>9.1f} {per_second:>8.1f}")


if __name__ == "__main__":
    main()
