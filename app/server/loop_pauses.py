"""How long this process's event loop kept its students waiting: a timer that notices when it fires late.

Every `loop_probe_every` seconds a callback asks to run again after that interval; how much later than asked
it runs is how long the loop was busy with something else (a page build, a burst of changes, a collection).
Pauses of `loop_pause_kept_ms` or more are kept (the newest `loop_pauses_kept`, with their wall-clock time)
and reported by GET /health/memory with the process id, so `benchmarks/classroom.py` can name the longest
pause of each worker process during a run. It uses only asyncio's public `call_later`, started on the loop
that serves the first page (with `call_soon_threadsafe`: Bokeh 3.10 builds pages on worker threads, where no
loop runs).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import deque

from blocktrace.app.settings import settings

__all__ = ["LoopPauses", "report", "start"]


class LoopPauses:
    """The long pauses of one process's event loop, newest last: (epoch seconds, milliseconds late)."""

    def __init__(self) -> None:
        numbers = settings()
        self.every = numbers.loop_probe_every
        self.kept_ms = numbers.loop_pause_kept_ms
        self.pauses: deque[tuple[float, float]] = deque(maxlen=numbers.loop_pauses_kept)
        self.longest_ms = 0.0
        self.probes = 0  # how many times the probe has run: it is watching
        self._asked = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Begin probing `loop` (from any thread)."""
        self._loop = loop
        loop.call_soon_threadsafe(self._ask)

    def _ask(self) -> None:
        self._asked = time.perf_counter()
        self._loop.call_later(self.every, self._fired)

    def _fired(self) -> None:
        late_ms = 1000 * (time.perf_counter() - self._asked - self.every)
        if late_ms >= self.kept_ms:
            self.pauses.append((time.time(), round(late_ms, 1)))
        self.longest_ms = max(self.longest_ms, late_ms)
        self.probes += 1
        self._ask()

    def report(self) -> dict:
        return {"pid": os.getpid(), "longest_loop_pause_ms": round(self.longest_ms, 1), "loop_probes": self.probes,
                "loop_pauses": [list(p) for p in self.pauses]}


_probe: LoopPauses | None = None
_starting = threading.Lock()  # pages may be built on several worker threads at once (Bokeh 3.10)


def start(loop: asyncio.AbstractEventLoop | None) -> None:
    """In the serving process, with its first page: start probing `loop`, the one serving it (once)."""
    global _probe
    if loop is None:
        return
    with _starting:
        if _probe is not None:
            return
        _probe = LoopPauses()
    _probe.start(loop)


def report() -> dict:
    """This process's id and its loop's long pauses so far (none before `start()`)."""
    return _probe.report() if _probe is not None else {"pid": os.getpid(), "longest_loop_pause_ms": None,
                                                         "loop_probes": 0, "loop_pauses": []}
