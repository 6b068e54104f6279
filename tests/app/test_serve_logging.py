"""The server's log stays free of noise from tabs that closed, and keeps every other error."""

from __future__ import annotations

import asyncio
import gc
import io
import logging
import sys
import warnings
from collections.abc import Callable

from bokeh.server.connection import ServerConnection
from tornado.websocket import WebSocketClosedError

from blocktrace.app.server.quiet_logs import ClosedSocketFilter, LateCloseFilter


def _log_unretrieved(make_error: Callable[[], Exception]) -> str:
    """What asyncio logs for a task that failed with make_error() and was dropped unretrieved.

    The error is made inside the task, so nothing here holds its traceback (on Python 3.13 that kept the
    task alive past the collection below).
    """
    with warnings.catch_warnings():  # what earlier tests left to the collector (a socket) is not this test's
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("asyncio")
    logger.addHandler(handler)
    logger.addFilter(closed := ClosedSocketFilter())
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


class _Session:
    def subscribe(self, _connection) -> None: ...
    def unsubscribe(self, _connection) -> None: ...


def _late_close_record(error_in_on_close: bool = True) -> logging.LogRecord:
    """Tornado's record of Bokeh's on_close asking a detached connection for its session (a real one)."""
    connection = ServerConnection(None, None, None, _Session())
    connection.detach_session()

    def on_close() -> None:  # Bokeh's WSHandler.on_close, by name and file, calls connection.session
        connection.session.notify_connection_lost()

    if error_in_on_close:
        on_close.__code__ = on_close.__code__.replace(co_filename="/site-packages/bokeh/server/views/ws.py")
    try:
        on_close()
    except AssertionError:
        exc_info = sys.exc_info()
    return logging.LogRecord("tornado.application", logging.ERROR, __file__, 1, "Uncaught exception GET %s",
                             ("/ws",), exc_info)


def _formatted(record: logging.LogRecord) -> str:
    assert LateCloseFilter().filter(record)
    return logging.Formatter().format(record)


def test_bokehs_late_close_is_one_line() -> None:
    """The AssertionError of a websocket that closed after its session was detached: one line, no traceback."""
    record = _late_close_record()
    text = _formatted(record)
    assert "Traceback" not in text and "\n" not in text
    assert "closed after its session was detached" in text
    assert (record.levelno, record.levelname) == (logging.WARNING, "WARNING")  # the server did nothing wrong


def test_other_assertions_keep_their_traceback() -> None:
    """An assertion raised elsewhere than Bokeh's on_close is logged whole."""
    text = _formatted(_late_close_record(error_in_on_close=False))
    assert "Traceback" in text and "AssertionError" in text


def _callback_records(traceback_text: str) -> list[str]:
    from blocktrace.app.server.quiet_logs import CALLBACK_HEADING, CallbackErrorFilter

    kept = []
    for text in (CALLBACK_HEADING, traceback_text):
        record = logging.LogRecord("bokeh.util.asyncio", logging.ERROR, __file__, 1, text, (), None)
        if CallbackErrorFilter().filter(record):
            kept.append(record.getMessage())
    return kept


def test_bokeh_310s_callback_report_of_a_refused_widget_value_is_one_line() -> None:
    """Bokeh 3.10 logs a failed callback as a heading and a plain-text traceback: param's refusal is one line."""
    refused = ('Traceback (most recent call last):\n  File "/x/panel/reactive.py", line 545, in _change_coroutine\n'
               '    self._change_event(doc)\n  File "/x/param/parameterized.py", line 2058, in __set__\n'
               '    obj.param._call_watcher(watcher, event)\n'
               "ValueError: Integer parameter 'LabState.B' must be at most 4, not 99.\n")
    assert _callback_records(refused) == [
        "refused a widget value from a browser: Integer parameter 'LabState.B' must be at most 4, not 99."]


def test_another_callback_error_keeps_its_heading_and_traceback() -> None:
    other = ('Traceback (most recent call last):\n  File "/x/explorables/view.py", line 3, in update\n'
             '    1 / 0\nZeroDivisionError: division by zero\n')
    (kept,) = _callback_records(other)
    assert kept.startswith("Error thrown from callback:\nTraceback") and "ZeroDivisionError" in kept
