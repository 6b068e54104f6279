"""Each session's document is built in its turn of the process's build queue (explorables/components/build_turns.py).

Bokeh lets an application handler's `on_session_created` hook delay a session's creation; this one waits
for the queue, so the document is built as one step of it. The queue's numbers are the server's settings
(`pace_from_settings`; the explorables package keeps only their defaults, as it never imports the app).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bokeh.application.handlers.handler import Handler
from tornado.ioloop import IOLoop

from blocktrace.app import tuning
from blocktrace.app.settings import settings
from blocktrace.explorables.components import build_turns
from blocktrace.explorables.components.build_turns import PACER

__all__ = ["pace_from_settings", "paced_applications", "races_from_settings"]


class TakeTurns(Handler):
    """A Bokeh application handler whose session hook waits for the pacer: the document is built in its turn."""

    def modify_document(self, doc) -> None:
        pass

    async def on_session_created(self, session_context) -> None:
        await PACER.turn()

    def on_server_loaded(self, server_context) -> None:
        """In each worker process, as its server starts: Bokeh 3.10's session work stays on the loop's thread
        (app/tuning/work_on_loop.py), unless that patch stands down or tuning is off; and the worker's classroom
        opens, so its store thread has read the class list before the first `?class=` link asks to join (a page
        request waits for that first read at most classroom.FIRST_READ_WAIT_S)."""
        from blocktrace.app.classroom.classroom import current  # the classroom imports the store: only here

        if tuning.is_applied("work_on_loop"):
            tuning.work_on_loop.install(IOLoop.current().asyncio_loop)
        current()


def pace_from_settings() -> None:
    """The process's build queue (build_turns.PACER) takes its numbers from the server's settings."""
    numbers = settings()
    build_turns.PACER.configure(gap_s=numbers.build_gap, share=numbers.build_gap_share, behind_s=numbers.build_behind,
                                busy_share=numbers.build_busy_share, max_rest_s=numbers.build_max_rest,
                                stuck_s=numbers.build_stuck)


def races_from_settings(data_dir: Path | None = None) -> None:
    """The process's race runner (train-the-block) takes its numbers from the server's settings, and keeps its
    computed races in `data_dir`'s races/ (none kept without one)."""
    from blocktrace.explorables.train_the_block.kept import RaceStore, races_dir
    from blocktrace.explorables.train_the_block.view import runner

    numbers = settings()
    store = None if data_dir is None or numbers.race_store_mb <= 0 else RaceStore(races_dir(data_dir),
                                                                                   numbers.race_store_mb)
    runner.configure(workers=numbers.race_workers or None, slice_steps=numbers.race_slice_steps,
                     slice_cpu_s=numbers.race_slice_cpu, max_races=numbers.max_races,
                     session_work=numbers.race_session_work, niceness=numbers.race_niceness, store=store)


def paced_applications(pages: dict[str, Callable], titles: dict[str, str],
                       data_dir: Path | None = None) -> dict[str, Any]:
    """Panel's applications for `pages` (as `pn.serve` would make them), each building its sessions in turn, in
    a queue set to the server's settings; races are kept in `data_dir` (races_from_settings)."""
    from panel.io.application import build_applications

    pace_from_settings()
    races_from_settings(data_dir)

    apps = build_applications(pages, title=titles)
    for app in apps.values():
        app.add(TakeTurns())
    return apps
