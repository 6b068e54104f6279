"""Writes waiting for the store: kept in memory while the database is unavailable, delivered in order later.

One ``Outbox`` per app process, shared by its sessions::

    outbox = Outbox(store)
    stored = outbox.record(event_id, class_code, learner_id, "param", {...}, lesson, explorable)
    if stored is None:            # queued: show "your progress is not being saved right now"
        ...
    # and, every few seconds (e.g. a periodic callback):
    outbox.flush()                # 0 once everything queued has been delivered

Arguments are checked before anything is queued, so a bad call fails at once, not at flush.
Exactly-once holds through the event ids: a write whose first try did land (the connection
failed after the commit) comes back from the store as "already stored", and a prediction
refused because one already exists is an answer, not an error. The queue lives in memory:
writes still queued when the process ends are lost, and the page has said so all along.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from blocktrace.app.classroom.store import EventStore
from blocktrace.app.classroom.store_engine import StoreUnavailable
from blocktrace.app.classroom.store_validation import check_prediction, check_record
from blocktrace.app.settings import settings

__all__ = ["Outbox", "PendingWrite"]

log = logging.getLogger(__name__)



@dataclass
class PendingWrite:
    """One queued call of an ``EventStore`` write method, and its answer once delivered."""

    method: str  # "record" or "commit_prediction"
    kwargs: dict[str, Any]
    size: int  # characters of its payload and note, what it holds in memory while queued
    result: bool | None = None  # the store's answer once delivered


class Outbox:
    """An in-memory, thread-safe, ordered queue of writes in front of an ``EventStore``.

    While nothing is queued a write goes straight to the store. Once one has failed, later
    writes queue behind it (keeping their order) without touching the database, until
    ``flush`` delivers the queue.
    """

    def __init__(self, store: EventStore, max_pending: int | None = None,
                 max_chars: int | None = None):
        self.store = store
        self.max_pending = settings().outbox_events if max_pending is None else max_pending
        self.max_chars = settings().outbox_chars if max_chars is None else max_chars
        self._queued_chars = 0
        self.failed: list[tuple[PendingWrite, Exception]] = []  # writes the store rejected for a bug, not an outage
        self.last_error: str | None = None  # why the store refused the oldest queued write, while any waits
        self._queue: deque[PendingWrite] = deque()
        self._lock = threading.Lock()  # guards _queue
        self._flushing = threading.Lock()  # one flush at a time, so the queue is delivered in order

    @property
    def pending(self) -> int:
        """How many writes wait for the store."""
        with self._lock:
            return len(self._queue)

    def record(self, event_id: str, class_code: str, learner_id: str, kind: str, payload: Mapping[str, Any],
               lesson: str | None = None, explorable: str | None = None) -> bool | None:
        """``EventStore.record`` now if the store answers (True/False), else queue it and return None."""
        kwargs = check_record(event_id, class_code, learner_id, kind, payload, lesson, explorable)
        size = len(kwargs["payload"])
        kwargs["payload"] = json.loads(kwargs["payload"])  # a copy: the caller may change its dict later
        write = PendingWrite("record", kwargs, size)
        return self._submit([write], lambda: [self.store.record(**write.kwargs)])[0]

    def commit_prediction(self, event_id: str, class_code: str, learner_id: str, question: str, choice: str,
                          note: str | None, lesson: str | None, explorable: str | None) -> bool | None:
        """``EventStore.commit_prediction`` now if the store answers (True/False), else queue it and return None.

        While queued the prediction is not final on the server yet: the page keeps it locked
        locally, and a flush may still answer False if another commit for the question landed first.
        """
        return self.commit_predictions([dict(event_id=event_id, class_code=class_code, learner_id=learner_id,
                                             question=question, choice=choice, note=note, lesson=lesson,
                                             explorable=explorable)])[0]

    def commit_predictions(self, items: Sequence[Mapping[str, Any]]) -> list[bool | None]:
        """``commit_prediction`` for each item (its keyword arguments): all in one transaction
        (``EventStore.commit_predictions``) if the store answers, else each queued (None)."""
        writes = []
        for item in items:
            kwargs = check_prediction(**item)
            writes.append(PendingWrite("commit_prediction", kwargs, len(kwargs["note"] or "") + len(kwargs["choice"])))
        return self._submit(writes, lambda: self.store.commit_predictions([write.kwargs for write in writes]))

    def _submit(self, writes: list[PendingWrite], deliver: Callable[[], Sequence[bool]]) -> list[bool | None]:
        """`deliver()` (the store's answer for each write) if nothing is queued and the store answers; else
        the writes go to the back of the queue, in order, and each answer is None."""
        with self._lock:
            if self._queue:
                for write in writes:
                    self._enqueue(write)
                return [None] * len(writes)
        try:
            results = list(deliver())
        except StoreUnavailable as error:
            with self._lock:
                for write in writes:
                    self._enqueue(write)
                self.last_error = str(error)
            return [None] * len(writes)
        for write, result in zip(writes, results, strict=True):
            write.result = result
        return results

    def _enqueue(self, write: PendingWrite) -> None:
        if len(self._queue) >= self.max_pending or self._queued_chars + write.size > self.max_chars:
            raise StoreUnavailable(f"the store has been unavailable for {len(self._queue)} writes "
                                   f"({self._queued_chars} characters); this one is lost")
        self._queue.append(write)
        self._queued_chars += write.size

    def flush(self) -> int:
        """Deliver queued writes in order until the store fails again; return how many are still pending."""
        with self._flushing:
            while True:
                with self._lock:
                    if not self._queue:
                        self.last_error = None
                        return 0
                    head = self._queue[0]
                try:
                    head.result = getattr(self.store, head.method)(**head.kwargs)
                except StoreUnavailable as error:
                    self.last_error = str(error)
                    return self.pending
                except Exception as error:  # a bug must not block every write behind it
                    log.exception("dropping a queued %s that the store rejected", head.method)
                    self.failed.append((head, error))
                with self._lock:
                    self._queued_chars -= self._queue.popleft().size
