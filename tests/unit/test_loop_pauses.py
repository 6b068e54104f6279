"""The event loop's pauses, as /health/memory reports them for benchmarks/classroom.py."""

from __future__ import annotations

import asyncio
import os
import threading
import time

from blocktrace.app.server.loop_pauses import LoopPauses
from blocktrace.app.settings import overridden


def busy(ms: float) -> None:
    """Hold the event loop's thread, as a long page build would."""
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


def test_a_callback_that_holds_the_loop_is_reported_with_its_length_and_time() -> None:
    """A 150 ms callback makes the probe's timer late by about that much; the pause is kept with its wall time."""

    async def run() -> LoopPauses:
        with overridden(loop_probe_every=0.01, loop_pause_kept_ms=50.0):
            probe = LoopPauses()
        probe.start(asyncio.get_running_loop())
        began = time.time()
        await asyncio.sleep(0.05)  # the probe has fired a few times on an idle loop
        asyncio.get_running_loop().call_soon(busy, 150)
        while not probe.pauses:
            await asyncio.sleep(0.01)
        (at, ms), = probe.pauses
        assert began <= at <= time.time()
        assert 140 <= ms
        return probe

    probe = asyncio.run(run())
    report = probe.report()
    assert report["pid"] == os.getpid()
    assert report["longest_loop_pause_ms"] >= 140 and len(report["loop_pauses"]) == 1


def test_short_pauses_are_not_kept() -> None:
    """Timers a few milliseconds late (every loop's jitter) are not listed; the longest is still known."""

    async def run() -> LoopPauses:
        with overridden(loop_probe_every=0.01, loop_pause_kept_ms=1000.0):
            probe = LoopPauses()
        probe.start(asyncio.get_running_loop())
        asyncio.get_running_loop().call_soon(busy, 30)
        while probe.longest_ms < 20:
            await asyncio.sleep(0.01)
        return probe

    probe = asyncio.run(run())
    assert list(probe.pauses) == [] and probe.longest_ms >= 20


def test_started_from_a_worker_thread_it_probes_the_loop_it_was_given() -> None:
    """Bokeh 3.10 builds a page on a worker thread, where no loop runs: the probe still runs on the serving loop."""

    async def run() -> tuple[LoopPauses, set[str]]:
        with overridden(loop_probe_every=0.01):
            probe = LoopPauses()
        threads: set[str] = set()
        fired = probe._fired

        def noting() -> None:
            threads.add(threading.current_thread().name)
            fired()

        probe._fired = noting
        await asyncio.to_thread(probe.start, asyncio.get_running_loop())
        while probe.probes < 3:
            await asyncio.sleep(0.01)
        return probe, threads

    probe, threads = asyncio.run(run())
    assert threads == {threading.current_thread().name} and probe.report()["loop_probes"] >= 3
