"""The teacher password and the limit on wrong guesses of it (shared by the teacher's handlers of one process)."""

from __future__ import annotations

import base64
import hmac
import secrets
import threading
import time
from collections import defaultdict, deque

MAX_FAILURES = 5  # per address per window
FAILURE_WINDOW = 60.0


def generate_password() -> str:
    return secrets.token_urlsafe(9)


class Guard:
    """The teacher password and the failed-attempt counter (shared by the handlers of one process)."""

    def __init__(self, password: str):
        self.password = password.encode("utf-8")
        self._failures: dict[str, deque[float]] = defaultdict(deque)
        self._lock = threading.Lock()

    def blocked(self, address: str) -> bool:
        now = time.monotonic()
        with self._lock:
            times = self._failures[address]
            while times and now - times[0] > FAILURE_WINDOW:
                times.popleft()
            return len(times) >= MAX_FAILURES

    def check(self, header: str | None, address: str) -> bool:
        given = b""
        if header and header.startswith("Basic "):
            try:
                given = base64.b64decode(header[6:], validate=True).split(b":", 1)[-1]
            except ValueError:
                given = b""
        ok = hmac.compare_digest(given, self.password)
        if not ok and header:
            with self._lock:
                self._failures[address].append(time.monotonic())
        return ok

    def form_token(self) -> str:
        """A token the teacher's forms carry, so another site cannot make the teacher's browser post."""
        return hmac.new(self.password, b"blocktrace-teacher-form", "sha256").hexdigest()
