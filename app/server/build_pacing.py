"""Each session's document is built in its turn of the process's build queue (explorables/components/build_turns.py).

Bokeh lets an application handler's `on_session_created` hook delay a session's creation; this one waits
for the queue, so the document is built as one step of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bokeh.application.handlers.handler import Handler

from blocktrace.explorables.components.build_turns import PACER


class TakeTurns(Handler):
    """A Bokeh application handler whose session hook waits for the pacer: the document is built in its turn."""

    def modify_document(self, doc) -> None:
        pass

    async def on_session_created(self, session_context) -> None:
        await PACER.turn()


def paced_applications(pages: dict[str, Callable], titles: dict[str, str]) -> dict[str, Any]:
    """Panel's applications for `pages` (as `pn.serve` would make them), each building its sessions in turn."""
    from panel.io.application import build_applications

    apps = build_applications(pages, title=titles)
    for app in apps.values():
        app.add(TakeTurns())
    return apps
