"""GET /health, for load balancers and start-up checks."""

from __future__ import annotations

from tornado.web import RequestHandler


class HealthHandler(RequestHandler):
    """200 and a short body."""

    def get(self) -> None:
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.write("ok\n")
