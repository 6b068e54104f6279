"""The process-wide classroom: one store, its outbox and store thread, and the server's secret per process.

`blocktrace serve` calls `configure` once, before it forks its workers; each worker process opens its
own store on its first `current()`, so no database connection crosses a fork.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from blocktrace.app.classroom.outbox import Outbox
from blocktrace.app.classroom.senders import Sender
from blocktrace.app.classroom.store import EventStore, StoreUnavailable
from blocktrace.app.classroom.store_thread import StoreThread
from blocktrace.app.xapi.delivery import XapiTarget

__all__ = ["Classroom", "ClassroomSettings", "configure", "current"]

log = logging.getLogger(__name__)


# How long the first page a process serves may wait for its first read of the classes (on SQLite a few ms):
# once, so a worker's first student is not turned away from a class it simply has not read yet.
FIRST_READ_WAIT_S = 1.0


@dataclass
class Classroom:
    """The process-wide store, its outbox and the cookie secret (set up once by `blocktrace serve`)."""

    store: EventStore
    secret: bytes
    outbox: Outbox = field(init=False)
    thread: StoreThread = field(init=False)
    senders: list[Sender] = field(default_factory=list)  # scores and learning records sent by this process
    lrs: str | None = None  # where learning records go (the teacher's room shows how many wait)
    _waited: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        self.outbox = Outbox(self.store)
        self.thread = StoreThread(self.outbox)

    def admits(self, code: str, kept: bool = False) -> bool:
        """Whether a student may be in class `code` (join.admits, from what the store thread last read).

        `kept`: the code comes from the class cookie, which this server set. Until the classes have been read
        once (the database is down at start) such a code is kept, and a new one is not let in.
        """
        from blocktrace.app.classroom.join import admits

        thread = self.thread
        if not thread.classes_read.is_set() and not self._waited:
            self._waited = True
            thread.classes_read.wait(FIRST_READ_WAIT_S)
        return admits(code, thread.classes, thread.open_joining, kept)


@dataclass(frozen=True)
class ClassroomSettings:
    """Where the store is and the server's secret: all a worker needs to open its own classroom; and, for a
    server that sends, its data dir (LMS platforms and keys: scores) and its learning record store."""

    db_url: str
    secret: bytes
    data_dir: Path | None = None  # with it, scores go to the LMSs' gradebooks (app/lti/grades.py)
    xapi: XapiTarget | None = None  # with it, learning records go to this LRS (app/xapi/delivery.py)


_settings: ClassroomSettings | None = None
_classroom: Classroom | None = None
_pid: int | None = None
_lock = threading.Lock()


def configure(settings: ClassroomSettings | None) -> None:
    """Remember how to reach the store; each worker process opens its own on first use (after the fork)."""
    global _settings, _classroom, _pid
    with _lock:
        _settings, _classroom, _pid = settings, None, None


def current() -> Classroom | None:
    """This process's classroom (None when the store is off), opened on the first call in each worker.

    Its schema is checked on the store thread, as every other database call is: the event loop that
    calls this never waits for the database.
    """
    global _classroom, _pid
    if _settings is None:
        return None
    with _lock:
        if _classroom is None or _pid != os.getpid():
            _classroom, _pid = Classroom(EventStore(_settings.db_url), _settings.secret), os.getpid()
            _classroom.thread.submit(_classroom.store.upgrade, _upgraded)
            _classroom.thread.submit(_classroom.thread.read_classes)  # before any page asks who may join what
            _classroom.senders = _start_senders(_classroom.store, _settings)
            _classroom.lrs = _settings.xapi.endpoint if _settings.xapi is not None else None
        return _classroom


def _start_senders(store: EventStore, configured: ClassroomSettings) -> list[Sender]:
    """This process's senders: scores to LMSs (when a data dir is set) and learning records (when an LRS is)."""
    from blocktrace.app.lti import grades
    from blocktrace.app.settings import settings
    from blocktrace.app.xapi import delivery

    senders = []
    if configured.data_dir is not None:
        data_dir = configured.data_dir

        def scores() -> None:
            if grades.queue_scores(store) or store.delivery_counts(grades.KIND)[0]:
                grades.send_scores(store, data_dir)

        senders.append(Sender("lti-scores", settings().lti_grades_every, scores))
    if configured.xapi is not None:
        target = configured.xapi

        def statements() -> None:
            delivery.queue_statements(store, target)
            delivery.send_statements(store, target)

        senders.append(Sender("xapi", settings().xapi_every, statements))
    return senders


def _upgraded(result: object) -> None:
    if isinstance(result, StoreUnavailable):  # students keep exploring; writes wait in the outbox
        log.warning("the classroom store is unavailable at start: %s", result)
