"""Bokeh 3.10's session work runs on the event loop's thread again, one piece at a time, as in Bokeh 3.9.

Bokeh 3.10 (the release pip gives on Python 3.12 and later) hands a session's work to the event loop's
default executor with `asyncio.to_thread`: each document build, each change a browser sends
(`apply_to_document`) and each locked callback. That executor has up to six threads, and the work is
CPU-bound Python, so they run in turn under the GIL beside the loop's own thread. A busy class
therefore gets no work done sooner, while the loop thread, which answers every student's socket, waits
for the GIL after each system call. The build queue (explorables/components/build_turns.py) also loses
its hold: it paces the start of each build, and the builds then run side by side in the threads.

Measured with `benchmarks/classroom.py --reopen 30 --students 100 --procs 1` on Python 3.13 (Panel
1.10.0, Bokeh 3.10.2), 2-core machine: the students who stayed saw pings of median / p99 / max
5 / 4,434 / 8,058 ms and slider changes of p95 4.5 s on the stock path. With one worker thread instead
of six, max ping 5,203 ms; with one worker and a 0.5 ms GIL switch interval, 6,794 ms. With this
patch, 4 / 119 / 242 ms (change p95 142 ms) and, in a second run, 4 / 150 / 303 ms (change p95 198 ms);
Python 3.11 with Bokeh 3.9.2 on the same machine: 2 / 119 / 179 ms.

It does not make a slider change as cheap as on Bokeh 3.9: in the same hour, 100 students on one
process had a change p95 of 34 ms on Python 3.11 and 1.5 to 3.7 s on Python 3.13, with and without
this patch alike (the server's CPU per change 8 to 10 ms against 4.8 ms).

Here the loop's default executor runs what it is given at once, on the calling thread (`LoopExecutor`),
so Bokeh 3.10 does this work where Bokeh 3.9 did. Bokeh 3.9 gives the default executor none of it, so
there the patch changes nothing that Bokeh does. It is installed on each worker process's loop when the
server loads (app/server/build_pacing.py). Our own blocking calls never use the default executor: the
teacher's store reads have a pool of their own (app/classroom/teacher.py).

Upstream: app/tuning/UPSTREAM.md, "work_on_loop" (what would retire this patch).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["LoopExecutor", "apply", "install"]


class LoopExecutor(ThreadPoolExecutor):
    """An executor that runs each call at once on the thread that submits it, and starts no thread.

    A ThreadPoolExecutor by type only: asyncio accepts nothing else as a loop's default executor."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, thread_name_prefix="blocktrace-unused")

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            result = fn(*args, **kwargs)
        except BaseException as error:  # handed to the awaiting coroutine, as a worker thread would
            future.set_exception(error)
        else:
            future.set_result(result)
        return future


def install(loop: asyncio.AbstractEventLoop) -> None:
    """Make `loop`'s default executor a LoopExecutor. Every application's load hook asks; each later call
    replaces one threadless executor with another, which changes nothing."""
    loop.set_default_executor(LoopExecutor())


def apply() -> None:
    """Nothing to change at import: `install` runs as each worker's server loads (build_pacing.py)."""
