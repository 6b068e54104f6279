"""What the server's log keeps: warnings and errors, each in one line where that says all, and no routine.

Routine stays out by default (`quiet_routine`): Tornado's access log (a line for every answered request: the
teacher's room reloading itself, each page's scripts, every websocket opened) and Bokeh's INFO lines (a
websocket opened or closed, a session created; its settings at start). `blocktrace serve --access-log` brings
the access log and Bokeh's websocket lines back; a request answered with an error (4xx, 5xx) is always logged,
as Tornado logs those as warnings and errors.

And a tab that closes at an awkward instant is one short line (or none), never a traceback: the filters below
each match one known report narrowly and leave every other error, with its traceback, in the log.

Levels and filters are the logging module's own mechanism; nothing here patches Panel, Bokeh or Tornado, so
they are installed with and without the tuning layer.
"""

from __future__ import annotations

import logging
import re
import traceback
from types import TracebackType

__all__ = ["CALLBACK_HEADING", "ROUTINE_LOGGERS", "CallbackErrorFilter", "ClosedSocketFilter", "LateCloseFilter",
           "SignedTokenFilter", "install", "quiet_routine"]


class ClosedSocketFilter(logging.Filter):
    """Drop asyncio's report of an update written to a browser tab that had just closed.

    Panel sends batched updates (explorables/components/updates.py) as fire-and-forget writes; when a
    student closes the tab or loses Wi-Fi in that instant, Tornado's write fails with
    WebSocketClosedError and asyncio logs it with a traceback. Nothing is wrong: that session is gone.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return "WebSocketClosedError" not in record.getMessage()


class SignedTokenFilter(logging.Filter):
    """Keep an LMS launch's signed token (`?lti=…`, app/lti/who.py) out of the access log: it names a learner for
    12 hours to whoever holds it. The request is still logged, the token's value shown as "…"."""

    TOKEN = re.compile(r"([?&]lti=)[^&\s]+")

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(isinstance(a, str) and "lti=" in a for a in record.args):
            record.args = tuple(self.TOKEN.sub(r"\1…", a) if isinstance(a, str) else a for a in record.args)
        elif isinstance(record.msg, str) and "lti=" in record.msg:
            record.msg = self.TOKEN.sub(r"\1…", record.msg)
        return True


def _frames(tb: TracebackType | None) -> list[tuple[str, str]]:
    return [(frame.filename.replace("\\", "/"), frame.name) for frame in traceback.extract_tb(tb)]


class LateCloseFilter(logging.Filter):
    """Shorten Bokeh's AssertionError when a websocket closes after its session was detached.

    Seen once in a full browser run on stock Bokeh 3.9.2 (--no-tuning): Bokeh's `WSHandler.on_close`
    asks the connection for its session, the connection had already let go of it, and the `assert`
    in `ServerConnection.session` escapes to Tornado, which logs the whole traceback. The browser had
    already gone; nothing is lost. It comes more often with pages that send something many times a second
    (train-the-block sends a payload ten times a second while it plays), when the tab closes in the middle of a
    send. The record says what happened in one line, as a warning: the server did nothing wrong.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc_info = record.exc_info
        if not exc_info or not isinstance(exc_info[1], AssertionError):
            return True
        frames = _frames(exc_info[2])
        closing = any(name == "on_close" and path.endswith("bokeh/server/views/ws.py") for path, name in frames)
        asserted = bool(frames) and frames[-1][0].endswith("bokeh/server/connection.py") \
            and frames[-1][1] == "session"
        if closing and asserted:
            record.msg = "websocket closed after its session was detached (Bokeh's on_close); nothing lost"
            record.args = ()
            record.exc_info = None
            record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
        return True


class RefusedSocketFilter(logging.Filter):
    """One line for a websocket Bokeh refuses while opening it (a token the server did not sign, or expired).

    Bokeh raises ProtocolError from `WSHandler.open` after closing the socket; Tornado then logs it as an
    uncaught exception with the whole traceback, once per attempt. The refusal is the server working.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc_info = record.exc_info
        if not exc_info or type(exc_info[1]).__name__ != "ProtocolError":
            return True
        frames = _frames(exc_info[2])
        if not any(name == "open" and path.endswith("bokeh/server/views/ws.py") for path, name in frames):
            return True
        summary = record.args[0] if isinstance(record.args, tuple) and record.args else ""
        record.msg, record.args = "websocket refused: %s (%s)", (exc_info[1], summary)
        record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
        record.exc_info = record.exc_text = None
        return True


MAX_REASON = 200  # characters of a refused value's error kept in its log line


def _one_line(error: BaseException) -> str:
    """The error's text on one line and cut short: it quotes what the browser sent, so no newline of it
    may start a line of its own in the log."""
    text = " ".join(str(error).split())
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"


def _shorten(record: logging.LogRecord, what: str, error: BaseException) -> None:
    record.msg = "refused %s from a browser: %s"
    record.args = (what, _one_line(error))
    record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
    record.exc_info = None
    record.exc_text = None


class InvalidMessageFilter(logging.Filter):
    """One line, not a traceback, for a websocket change that Bokeh's or param's validation refused.

    Two reports, both of a value a page's own widgets never send (a hostile or broken client):
    - a value of the wrong type (a word for a slider): Bokeh's property validation raises while the
      message is applied, and `bokeh.server.protocol_handler` logs the whole message and the traceback.
      Bokeh still answers the client with an ERROR message and nothing is changed.
    - a value of the right type beyond the state's bounds or choices: Panel sets it on the widget, the
      widget's link to the explorable's state (param) refuses it, and Tornado logs the failed callback
      with its traceback. The state keeps its value.
    Panel also logs the second as "Callback failed for object named …": that line stays, shortened to one
    line. Matched by where the error was raised (the last frame in Bokeh's property code or in param), so
    any other error keeps its traceback.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc_info = record.exc_info
        if not exc_info or not isinstance(exc_info[1], (ValueError, TypeError)):
            return True
        frames = _frames(exc_info[2])
        if not frames:
            return True
        raised_in = frames[-1][0]
        if record.name == "bokeh.server.protocol_handler" and "/bokeh/core/property/" in raised_in:
            _shorten(record, "a websocket message", exc_info[1])
        elif record.name == "tornado.application" and "/param/" in raised_in and any(
                path.endswith("panel/reactive.py") for path, _ in frames):
            _shorten(record, "a widget value", exc_info[1])
        elif record.name == "panel.reactive" and "/param/" in raised_in \
                and record.getMessage().startswith("Callback failed for object named"):
            # Panel's own line for the same refusal (the one above says why): kept, as one line
            heading = " ".join(record.getMessage().split())
            record.msg = "%s: %s, the value stays as it was"
            record.args = (heading if len(heading) <= MAX_REASON else heading[: MAX_REASON - 1] + "…",
                           type(exc_info[1]).__name__)
            record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
            record.exc_info = None
            record.exc_text = None
        return True


_FRAME = re.compile(r'^  File "(?P<path>[^"]+)", line \d+, in (?P<name>\S+)$')
CALLBACK_HEADING = "Error thrown from callback:"


class CallbackErrorFilter(logging.Filter):
    """Bokeh 3.10's report of a failed callback, for the widget value refused by param (as above).

    Bokeh 3.10 logs a failed session callback as two records of `bokeh.util.asyncio`: the heading
    "Error thrown from callback:", then the traceback as plain text (no exc_info). The heading is held
    back and put in front of the traceback, which becomes one short line when it is param refusing a
    widget value from Panel; any other traceback is logged whole, under its heading.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if text == CALLBACK_HEADING:
            return False
        if not text.startswith("Traceback (most recent call last):"):
            return True
        lines = text.rstrip("\n").splitlines()
        frames = [m["path"].replace("\\", "/") for line in lines if (m := _FRAME.match(line))]
        last = lines[-1] if lines else ""
        kind, _, detail = last.partition(": ")
        if frames and "/param/" in frames[-1] and any(p.endswith("panel/reactive.py") for p in frames) \
                and kind in ("ValueError", "TypeError"):
            _shorten(record, "a widget value", ValueError(detail))
        else:
            record.msg, record.args = f"{CALLBACK_HEADING}\n%s", (text,)
        return True


ROUTINE_LOGGERS = {  # logger: what its INFO lines are (warnings and errors are always kept)
    "tornado.access": "a line per request answered (2xx, 3xx; 101 for a websocket)",
    "bokeh.server.views.ws": "a websocket opened, a session's connection created, a websocket closed",
}


def quiet_routine(access_log: bool = False) -> None:
    """Keep INFO lines that come with every request or session out of the log (back with `access_log`)."""
    level = logging.INFO if access_log else logging.WARNING
    for name in ROUTINE_LOGGERS:
        logging.getLogger(name).setLevel(level)
    # Bokeh's other INFO lines: its version and session settings at start, said once, and of no use to a teacher
    logging.getLogger("bokeh").setLevel(logging.WARNING)


def install(access_log: bool = False) -> None:
    """Quiet the routine (see quiet_routine) and add the filters to the loggers that would otherwise print these
    tracebacks."""
    quiet_routine(access_log)
    logging.getLogger("asyncio").addFilter(ClosedSocketFilter())
    logging.getLogger("tornado.access").addFilter(SignedTokenFilter())
    logging.getLogger("tornado.application").addFilter(LateCloseFilter())
    logging.getLogger("tornado.application").addFilter(InvalidMessageFilter())
    logging.getLogger("bokeh.server.protocol_handler").addFilter(InvalidMessageFilter())
    logging.getLogger("panel.reactive").addFilter(InvalidMessageFilter())  # Panel's "Callback failed" line
    logging.getLogger("tornado.application").addFilter(RefusedSocketFilter())
    logging.getLogger("bokeh.util.asyncio").addFilter(CallbackErrorFilter())
