"""What the server sends elsewhere on its own (scores to an LMS, learning records to an LRS): a daemon thread per
server process that runs its round every few seconds, off the event loop. A round reads the store's outbox
(deliveries), so what one process did not send, another (or the next start) does.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from blocktrace.app.classroom.store_engine import StoreUnavailable

__all__ = ["Sender"]

log = logging.getLogger("blocktrace.senders")


class Sender:
    """Runs `round` every `every` seconds on a daemon thread named `name` until stopped."""

    def __init__(self, name: str, every: float, round_: Callable[[], object]) -> None:
        self.name, self.every, self.round = name, every, round_
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"blocktrace-{name}")
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.round()
            except StoreUnavailable as error:
                log.warning("%s waits for the class database: %s", self.name, error)
            except Exception as error:  # noqa: BLE001 - a sender that died would keep everything: say so, go on
                log.error("%s: %s: %s; it goes on", self.name, type(error).__name__, error)

    def stop(self) -> None:
        self._stop.set()
