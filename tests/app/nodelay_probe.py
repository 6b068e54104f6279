"""Serve a one-pane Panel app in this process, open its websocket, print the server socket's TCP_NODELAY.

usage: python tests/app/nodelay_probe.py [--tuned]   (prints "nodelay=0" or "nodelay=1")
Run as its own process by test_socket_tuning.py so Panel's global state stays out of the test process.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path

import panel as pn
from bokeh.util.token import generate_jwt_token, generate_session_id
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect


def server_side_nodelay(port: int, client_port: int) -> int:
    """TCP_NODELAY of the socket in this process whose local port is `port` and peer is `client_port`."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            sock = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        try:
            if sock.family == socket.AF_INET and sock.type == socket.SOCK_STREAM:
                if sock.getsockname()[1] == port and sock.getpeername()[1] == client_port:
                    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        except OSError:
            pass
        finally:
            sock.close()
    raise SystemExit("the server's end of the websocket was not found")


async def main(tuned: bool) -> None:
    if tuned:
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
        from blocktrace.app.tuning import socket_tuning

        socket_tuning.apply()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = pn.serve({"/x": lambda: pn.pane.Markdown("x")}, port=port, address="127.0.0.1", show=False,
                      start=False, websocket_origin=[f"127.0.0.1:{port}"])
    server.start()
    token = generate_jwt_token(generate_session_id())
    conn = await websocket_connect(HTTPRequest(f"ws://127.0.0.1:{port}/x/ws"), subprotocols=["bokeh", token])
    await conn.read_message()  # the ACK: the server has opened its side
    client_port = conn.protocol.stream.socket.getsockname()[1]
    print(f"nodelay={int(bool(server_side_nodelay(port, client_port)))}", flush=True)
    conn.close()
    server.stop()


if __name__ == "__main__":
    asyncio.run(main("--tuned" in sys.argv))
