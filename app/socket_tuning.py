"""Send every websocket frame as soon as it is written (TCP_NODELAY on the server's side).

Bokeh writes one update as several websocket frames: a header, metadata, the content and any
binary buffers. With Nagle's algorithm on (Tornado's default), every frame after the first waits
until the browser acknowledges the one before, and browsers hold acknowledgements back by up to
40 ms (200 ms on some systems). That wait was the largest part of a slider change's delay.
Tornado's documentation suggests exactly this call once a websocket is open.
"""

from __future__ import annotations

from panel.io.server import WSHandler

_original_open = WSHandler.open


def _open_without_delay(self, *args, **kwargs):
    result = _original_open(self, *args, **kwargs)
    if self.ws_connection is not None:
        self.set_nodelay(True)
    return result


def apply() -> None:
    """Install once (idempotent)."""
    if WSHandler.open is not _open_without_delay:
        WSHandler.open = _open_without_delay
