"""GET /health, for load balancers and start-up checks; GET /health/memory, what the server holds for its
pages (benchmarks/classroom.py and the tests read it)."""

from __future__ import annotations

import gc
import json

from tornado.web import RequestHandler

__all__ = ["HealthHandler", "MemoryHandler"]


class HealthHandler(RequestHandler):
    """200 and a short body."""

    def get(self) -> None:
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.write("ok\n")


class MemoryHandler(RequestHandler):
    """This process's pages, the memory of closed ones (session_memory.py) and its event loop's long pauses
    (loop_pauses.py), as JSON: no student's data."""

    def get(self) -> None:
        from blocktrace.app.server import loop_pauses
        from blocktrace.app.server.session_memory import reclaimer

        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        self.write(json.dumps({
            "pages_open": reclaimer.open_sessions,
            "frozen_objects": gc.get_freeze_count(),
            "closed_taken_apart": reclaimer.taken_apart_count,
            "closed_left_for_full_reclaim": reclaimer.closed_since,
            "full_reclaims": len(reclaimer.reclaims),
            "memory_checks": reclaimer.checks,
            **loop_pauses.report(),
        }) + "\n")
