"""The server's log stays free of noise from tabs that closed, and keeps every other error."""

from __future__ import annotations

import asyncio
import gc
import io
import logging
from collections.abc import Callable

from tornado.websocket import WebSocketClosedError

from blocktrace.app.serve import _ClosedSocketFilter


def _log_unretrieved(make_error: Callable[[], Exception]) -> str:
    """What asyncio logs for a task that failed with make_error() and was dropped unretrieved.

    The error is made inside the task, so nothing here holds its traceback (on Python 3.13 that kept the
    task alive past the collection below).
    """
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("asyncio")
    logger.addHandler(handler)
    logger.addFilter(closed := _ClosedSocketFilter())
    loop = asyncio.new_event_loop()

    async def fail() -> None:
        raise make_error()

    try:
        task = loop.create_task(fail())
        loop.run_until_complete(asyncio.wait([task]))
        del task
        gc.collect()  # asyncio reports an unretrieved exception when the task is collected
    finally:
        loop.close()
        logger.removeFilter(closed)
        logger.removeHandler(handler)
    return stream.getvalue()


def test_a_write_to_a_closed_tab_is_not_logged() -> None:
    """An update sent to a tab that just closed is dropped silently."""
    assert _log_unretrieved(WebSocketClosedError) == ""


def test_other_task_errors_are_still_logged() -> None:
    """The filter hides only closed sockets: a real failure still reaches the log."""
    assert "Task exception was never retrieved" in _log_unretrieved(lambda: RuntimeError("real"))
