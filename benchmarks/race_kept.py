"""A preset race cold against kept: how long one page takes to be given a race's steps when a worker computes them,
and when the race is kept (explorables/train_the_block/kept.py) and a restarted runner reads it back.

usage: python benchmarks/race_kept.py [--race placement] [--steps 1000] [--look]

Plays the race as a page does, slice after slice with the server's default slice settings (one worker), to
--steps steps: first with an empty store (cold: computed, then kept), then with a second runner on the same
folder (a restart: kept). With --look, every slice also asks for a look inside the models, as a page does: a
kept race's looks then come from its recomputation, and the figure includes it. Printed for each: wall time, the
steps its worker computed, the server's CPU (this process: the event loop's side, reading files included) and
its peak memory. This prints figures; it never asserts them.

Measured 2026-12-08 on this project's 2-core machine (load average near 4 from other work), the default race
(`placement`): 1,000 steps cold 22.06 s (1,000 steps computed, server CPU 0.17 s), kept 0.01 s (0 computed,
0.01 s); 300 steps with a look every slice, cold 7.21 s, kept 0.62 s (the looks' recomputation had reached step
29 when the curves reached 300: a look trails, and says so, until the page stands still and asks again).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import tempfile
import time
from pathlib import Path

from blocktrace.explorables.train_the_block.kept import RaceStore
from blocktrace.explorables.train_the_block.runner import LookAt, RaceRunner
from blocktrace.explorables.train_the_block.state import LESSON_RACES, RaceState


async def _play(runner: RaceRunner, spec, steps: int, look: bool) -> int:
    hold = await runner.start(spec)
    got = 0
    while got < steps:
        part = await runner.advance(hold, steps - got, LookAt(0, 0) if look else None)
        got += max(len(part.a), len(part.b))
    await runner.drop(hold)
    return got


def _timed(folder: Path, spec, steps: int, look: bool) -> tuple[float, int, float]:
    runner = RaceRunner(workers=1, store=RaceStore(folder, 64))
    runner.warm()
    try:
        asyncio.run(_warm_up(runner))
        cpu, wall = time.process_time(), time.perf_counter()
        asyncio.run(_play(runner, spec, steps, look))
        return time.perf_counter() - wall, runner.steps_computed, time.process_time() - cpu
    finally:
        runner.shutdown()


async def _warm_up(runner: RaceRunner) -> None:
    await runner.held_in_workers()  # the worker has started and imported the engine


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--race", default="placement", choices=list(LESSON_RACES))
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--look", action="store_true", help="ask for a look with every slice, as a page does")
    args = parser.parse_args()
    spec = RaceState(**LESSON_RACES[args.race]).spec
    with tempfile.TemporaryDirectory() as folder:
        for label in ("cold", "kept"):
            wall, computed, cpu = _timed(Path(folder), spec, args.steps, args.look)
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"{label}: {args.race}, {args.steps} steps{' with looks' if args.look else ''}: {wall:.2f} s, "
                  f"{computed} steps computed by the worker, server CPU {cpu:.2f} s, peak memory {peak:.0f} MB",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
