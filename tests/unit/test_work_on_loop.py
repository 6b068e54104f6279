"""Bokeh 3.10's offloaded session work runs on the loop's thread (app/tuning/work_on_loop.py)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from blocktrace.app.classroom.teacher import off_the_loop
from blocktrace.app.tuning.work_on_loop import LoopExecutor, install
from tests.unit.test_tuning import run_python


def run(main):
    """Run `main()` on a fresh loop; returns (its result, the loop's thread)."""

    async def wrapped():
        return await main(asyncio.get_running_loop()), threading.get_ident()

    return asyncio.run(wrapped())


def test_without_it_to_thread_leaves_the_loops_thread() -> None:
    """What Bokeh 3.10 does by default: the check below could fail."""

    async def main(loop):
        return await asyncio.to_thread(threading.get_ident)

    worker, loop_thread = run(main)
    assert worker != loop_thread


def test_installed_to_thread_runs_on_the_loops_thread_and_its_errors_reach_the_caller() -> None:
    async def main(loop):
        install(loop)
        install(loop)  # every application's load hook asks: still one executor
        where = await asyncio.to_thread(threading.get_ident)
        with pytest.raises(ZeroDivisionError):
            await asyncio.to_thread(lambda: 1 / 0)
        return where, await loop.run_in_executor(None, sum, [1, 2, 3])

    (where, total), loop_thread = run(main)
    assert where == loop_thread and total == 6


def test_the_executor_starts_no_thread() -> None:
    before = threading.active_count()
    executor = LoopExecutor()
    assert [executor.submit(pow, 2, n).result() for n in range(5)] == [1, 2, 4, 8, 16]
    assert threading.active_count() == before


def test_the_teachers_store_reads_still_leave_the_loop_with_it_installed() -> None:
    """A slow database must not hold the students' pages: those calls have threads of their own."""

    async def main(loop):
        install(loop)
        return await off_the_loop(threading.get_ident)

    worker, loop_thread = run(main)
    assert worker != loop_thread


@pytest.mark.parametrize("tuned", [True, False], ids=["tuned", "no-tuning"])
def test_the_server_load_hook_installs_it_only_when_tuned(tuned: bool) -> None:
    """Each worker's server load hook (build_pacing.TakeTurns) puts it on that worker's loop; --no-tuning leaves
    Bokeh's threads (a fresh interpreter: the tuning decision is once per process)."""
    result = run_python(f"""
import asyncio, json, threading
from blocktrace.app.server.routes import routes
routes(tuned={tuned})
from blocktrace.app.server.build_pacing import TakeTurns
async def main():
    TakeTurns().on_server_loaded(None)
    return await asyncio.to_thread(threading.get_ident) == threading.get_ident()
print(json.dumps({{"on_loop": asyncio.run(main())}}))
""")
    assert result == {"on_loop": tuned}
