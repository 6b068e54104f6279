"""How the server's websockets put updates on the wire: each update at once, and in as few packets as it can.

Bokeh writes one update as several websocket frames: a header, metadata, the content and any
binary buffers.

- TCP_NODELAY: with Nagle's algorithm on (Tornado's default), every frame after the first waits
  until the browser acknowledges the one before, and browsers hold acknowledgements back by up to
  40 ms (200 ms on some systems). That wait was the largest part of a slider change's delay.
  Tornado's documentation suggests exactly this call once a websocket is open.
- TCP_CORK around each of Panel's updates and each of Bokeh's own messages, such as the reply to
  every change the browser sends (Linux): with NODELAY alone each frame leaves as a packet of its
  own, three or more per message. Corked, the frames of one message leave together, and the uncork
  at the end sends them at once. Fewer packets cost the server less time in the kernel and a
  student on weak Wi-Fi fewer chances of a lost packet.

Upstream: app/tuning/UPSTREAM.md, "socket_tuning" (what would retire this patch).
"""

from __future__ import annotations

import socket
from contextlib import contextmanager

import panel.io.document as panel_document
from panel.io.server import WSHandler

TCP_CORK = getattr(socket, "TCP_CORK", None)  # Linux only; elsewhere updates are sent uncorked

_original_open = WSHandler.open
_original_send = WSHandler.send_message
_original_dispatch = panel_document.dispatch_tornado


def _open_without_delay(self, *args, **kwargs):
    result = _original_open(self, *args, **kwargs)
    if self.ws_connection is not None:
        self.set_nodelay(True)
    return result


@contextmanager
def corked(sock: socket.socket | None):
    """Hold back partial packets while the block writes; send what is left when it ends."""
    if sock is None or TCP_CORK is None:
        yield
        return
    try:
        sock.setsockopt(socket.IPPROTO_TCP, TCP_CORK, 1)
    except OSError:  # closed under us: nothing to hold back
        yield
        return
    try:
        yield
    finally:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, TCP_CORK, 0)
        except OSError:
            pass


def _handler_socket(handler) -> socket.socket | None:
    ws = getattr(handler, "ws_connection", None)
    stream = getattr(ws, "stream", None)
    return getattr(stream, "socket", None)


def _dispatch_corked(conn, events=None, msg=None):
    """Panel's write of one update (PATCH-DOC) to one connection, its frames corked together."""
    with corked(_handler_socket(conn._socket)):
        return _original_dispatch(conn, events, msg)


async def _send_corked(self, message):
    """Bokeh's send of one protocol message (e.g. the OK for a browser's change), its frames corked together."""
    with corked(_handler_socket(self)):
        return await _original_send(self, message)


def apply() -> None:
    """Install once (idempotent)."""
    if WSHandler.open is not _open_without_delay:
        WSHandler.open = _open_without_delay
    if panel_document.dispatch_tornado is not _dispatch_corked:
        panel_document.dispatch_tornado = _dispatch_corked
    if WSHandler.send_message is not _send_corked:
        WSHandler.send_message = _send_corked
