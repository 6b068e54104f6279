"""A widget value no page sends (out of bounds, wrong type) is refused in one short log line, no traceback."""

from __future__ import annotations

import asyncio
import time

from tests.app.bokeh_ws_client import Session, fetch_token
from tests.app.test_get_flood import LAB, titled, until_built, ws_url

DEADLINE_S = 30.0
OUT_OF_RANGE = "refused a widget value from a browser: Integer parameter 'LabState.B' must be at most 4, not 99."
WRONG_TYPE = "refused a websocket message from a browser: failed to validate Slider"


def log_lines_after(server, mark: int, wanted: str) -> list[str]:
    """The server's log lines after character `mark`, once one of them contains `wanted` (or the deadline)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        lines = server.log()[mark:].splitlines()
        if any(wanted in line for line in lines) or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)  # polling the log file for the line, not waiting for it to be right


async def send_invalid(server, value, wanted: str) -> tuple[list[str], bool]:
    """Open the lab, send `value` for its B slider; once the log has said so (or the deadline), send a valid
    B = 2. Returns the log lines written meanwhile and whether the valid change was answered."""
    base = server.base_url
    session = await Session.open(ws_url(base), await fetch_token(base + server.teacher_link(LAB)))
    try:
        slider = titled(await until_built(session), "B (batch items)")[0]
        mark = len(server.log())
        await session.set(slider["id"], "value", value)
        # Not at once: a second change within Panel's debounce would replace the first before it is applied.
        lines = await asyncio.get_running_loop().run_in_executor(None, log_lines_after, server, mark, wanted)
        await session.set(slider["id"], "value", 2)
        while True:
            message = await session.read()
            if message.msgtype == "PATCH-DOC" and any(
                    e.get("attr") == "search" and "B=2" in str(e.get("new")) for e in message.content["events"]):
                return lines, True
    finally:
        await session.close_and_wait()


def check(server, value, wanted: str) -> None:
    lines, answered = asyncio.run(send_invalid(server, value, wanted))
    refused = [line for line in lines if wanted in line]
    assert len(refused) == 1, lines
    assert len(refused[0]) < 400 and "\n" not in refused[0]
    assert not any(line.startswith(("Traceback", "  File ")) for line in lines), lines  # no traceback, none forged
    assert answered  # the session goes on: a valid change after the refused one is applied


def test_an_out_of_range_value_is_one_short_line(server) -> None:
    """B = 99 on a slider bounded at 4: the state keeps its value, the log gets one line saying so, and Panel's
    own "Callback failed" line for it is there too, as one line."""
    check(server, 99, OUT_OF_RANGE)
    panels = [line for line in server.log().splitlines()
              if "Callback failed for object named 'B (batch items)' changing property {'value': 99}" in line]
    assert len(panels) == 1 and panels[0].endswith("ValueError, the value stays as it was"), panels


def test_a_value_of_the_wrong_type_is_one_short_line(server) -> None:
    """A word for a slider (with a forged log line in it): Bokeh refuses the message, the log gets one line."""
    # The forged line looks like a traceback's frame (not the word itself, which other tests of this shared
    # server look for in its log).
    check(server, 'abc\n  File "forged.py", line 1', WRONG_TYPE)
