"""`blocktrace warm`: compute the lesson's races ahead of class and keep them in the data folder, so that each is
instant for the first student who plays it (explorables/train_the_block/kept.py).

Each race is computed as a page would play it (the same runner, so the same numbers, bit for bit) up to the page's
1,000 steps, all of them at once over the machine's cores, without the server's niceness and with longer slices.
A race already kept is read back, not computed: a second run is quick.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["add_warm_arguments", "run_warm"]

log = logging.getLogger(__name__)

SLICE_STEPS = 500  # steps a slice of warm's runner takes at most (no page waits for it)
SLICE_CPU_S = 2.0


def add_warm_arguments(parser: argparse.ArgumentParser, data_dir_name: str) -> None:
    """The command's arguments. The races' names and the step budget are checked in run_warm: building the parser
    imports nothing of the explorables (`blocktrace check` shares it on laptops without param or Panel)."""
    parser.add_argument("--data-dir", default=None, metavar="DIR",
                        help=f"the server's data folder (default: ./{data_dir_name}, as `blocktrace serve`'s)")
    parser.add_argument("--race", action="append", metavar="NAME",
                        help="a race of the lesson to compute, by name (again for more; default: all of them)")
    parser.add_argument("--steps", type=int, default=None, metavar="N",
                        help="steps of each race (default: as far as the page plays)")
    parser.add_argument("--workers", type=int, default=0, metavar="N",
                        help="worker processes (default: one per core, at most one per race)")


def run_warm(args: argparse.Namespace, data_dir_name: str, out: Callable[[str], None] = print) -> int:
    """Compute (or find kept) each race asked for; one line per race with its steps and time. 2 on bad input, 1
    when a race could not be kept (the store's log line says why) or stopped short of the steps asked for while it
    could still go on."""
    from blocktrace.app.server.hardening import private_data_dir
    from blocktrace.app.settings import settings
    from blocktrace.explorables.train_the_block.kept import RaceStore, races_dir
    from blocktrace.explorables.train_the_block.state import BUDGET, LESSON_RACES, RaceState

    unknown = [name for name in args.race or () if name not in LESSON_RACES]
    if unknown:
        sys.stderr.write(f"error: no race of the lesson is named {', '.join(unknown)}; "
                         f"the races are {', '.join(LESSON_RACES)}\n")
        return 2
    steps = BUDGET if args.steps is None else args.steps
    if not 1 <= steps <= BUDGET:
        sys.stderr.write(f"error: --steps must be between 1 and {BUDGET}, got {steps}\n")
        return 2
    try:
        limit = settings().race_store_mb
    except ValueError as error:
        sys.stderr.write(f"error: {error}\n")
        return 2
    if limit <= 0:
        sys.stderr.write("error: BLOCKTRACE_RACE_STORE_MB is 0: no race would be kept\n")
        return 2
    names = list(dict.fromkeys(args.race or LESSON_RACES))
    try:
        folder = races_dir(private_data_dir(Path(args.data_dir or data_dir_name).resolve()))
    except OSError as error:
        sys.stderr.write(f"error: the data folder cannot be made: {error}\n")
        return 2
    store = RaceStore(folder, limit)
    specs = {name: RaceState(**LESSON_RACES[name]).spec for name in names}
    workers = args.workers or min(len(names), os.cpu_count() or 1)
    out(f"Computing {len(names)} race(s) of {steps:,} steps into {folder} ({workers} worker(s)) ...")
    started = time.perf_counter()
    lines = asyncio.run(_warm(specs, steps, store, workers))
    for name, (computed, got, _, seconds) in lines.items():
        how = f"computed {computed:,} steps" if computed else "already kept"
        out(f"  {name:<34} {got:>5,} steps  {seconds:7.2f} s  {how}")
    missing = [name for name in names if store.load(specs[name]) is None]
    short = [name for name, (_, got, running, _) in lines.items() if running and got < steps]
    out(f"Done in {time.perf_counter() - started:.1f} s; {store.size() / 1e6:.1f} MB of races kept in {folder}.")
    if missing:
        sys.stderr.write(f"error: not kept (see the log line above): {', '.join(missing)}\n")
    if short:
        sys.stderr.write(f"error: stopped short of {steps:,} steps: {', '.join(short)}\n")
    if missing or short:
        return 1
    return 0


async def _warm(specs: dict, steps: int, store, workers: int) -> dict[str, tuple[int, int, bool, float]]:
    """Each race played to `steps` steps, all at once: {name: (steps computed afresh, steps it has, whether it can
    go on, seconds)}. A kept race with fewer steps is recomputed from step 0 (slices that bring no new step while
    its worker catches up) and then computed on."""
    from blocktrace.explorables.train_the_block.runner import RaceRunner

    runner = RaceRunner(workers=workers, slice_steps=SLICE_STEPS, slice_cpu_s=SLICE_CPU_S, max_races=len(specs),
                        session_work=10**12, niceness=0, store=store, keep_least=1)

    async def play(spec) -> tuple[int, int, bool, float]:
        started = time.perf_counter()
        hold = await runner.start(spec)
        kept = runner.race_steps(hold)
        got, running = 0, True
        while got < steps:
            before = runner.worker_steps(hold)
            part = await runner.advance(hold, steps - got)
            got += max(len(part.a), len(part.b))
            running = part.running_a or part.running_b
            if not running or not (part.a or part.b or runner.worker_steps(hold) > before):
                break  # the race ended, or nothing moved
        computed = runner.race_steps(hold) - kept
        await runner.drop(hold)  # its last hold: the race is kept
        return computed, got, running, time.perf_counter() - started

    try:
        results = await asyncio.gather(*(play(spec) for spec in specs.values()))
    finally:
        runner.shutdown()  # waits for the store's writes
    return dict(zip(specs, results, strict=True))
