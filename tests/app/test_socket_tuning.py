"""The server's websocket ends send each frame at once (TCP_NODELAY), so an update is not held back.

Bokeh writes one update as several frames; with Nagle's algorithm the later frames wait for the
browser's delayed acknowledgement of the first. The probe serves a Panel app in its own process and
reads the option off the server's end of a real websocket, with and without our fix.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = Path(__file__).with_name("nodelay_probe.py")


def probe(*flags: str) -> str:
    done = subprocess.run([sys.executable, str(PROBE), *flags], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line.startswith("nodelay=")][-1]


@pytest.mark.parametrize(("flags", "expected"), [((), "nodelay=0"), (("--tuned",), "nodelay=1")])
def test_the_fix_turns_on_nodelay_for_the_server_end_of_each_websocket(flags, expected):
    assert probe(*flags) == expected


def test_the_app_installs_the_fix_with_its_routes():
    from panel.io.server import WSHandler

    from blocktrace.app.server.routes import routes
    from blocktrace.app.tuning import socket_tuning

    routes()
    assert WSHandler.open is socket_tuning._open_without_delay


def loopback_pair():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        client = socket.create_connection(listener.getsockname())
        server_end, _ = listener.accept()
    return server_end, client


def cork_state(sock) -> int:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK)


@pytest.mark.skipif(not hasattr(socket, "TCP_CORK"), reason="TCP_CORK is Linux's")
def test_the_frames_of_one_update_are_written_corked_and_sent_when_it_ends(monkeypatch):
    from types import SimpleNamespace

    from blocktrace.app.tuning import socket_tuning

    server_end, client = loopback_pair()
    seen = []

    def panels_dispatch(conn, events=None, msg=None):  # stands in for Panel's: three frames, one update
        for frame in (b"header", b"metadata", b"content"):
            seen.append(cork_state(server_end))
            server_end.sendall(frame)
        return ["futures"]

    monkeypatch.setattr(socket_tuning, "_original_dispatch", panels_dispatch)
    conn = SimpleNamespace(_socket=SimpleNamespace(ws_connection=SimpleNamespace(
        stream=SimpleNamespace(socket=server_end))))
    try:
        assert socket_tuning._dispatch_corked(conn, events=["e"]) == ["futures"]
        assert seen == [1, 1, 1] and cork_state(server_end) == 0
        client.settimeout(10)
        received = b""
        while len(received) < len(b"headermetadatacontent"):
            received += client.recv(100)
        assert received == b"headermetadatacontent"  # uncorking sent everything
        closed = SimpleNamespace(_socket=SimpleNamespace(ws_connection=None))
        assert socket_tuning._dispatch_corked(closed, events=["e"]) == ["futures"]  # a closed page: no cork
    finally:
        server_end.close()
        client.close()


def test_panels_update_path_goes_through_the_corked_dispatch():
    import panel.io.document as panel_document

    from blocktrace.app.server.routes import routes
    from blocktrace.app.tuning import socket_tuning

    routes()
    assert panel_document.dispatch_tornado is socket_tuning._dispatch_corked


@pytest.mark.skipif(not hasattr(socket, "TCP_CORK"), reason="TCP_CORK is Linux's")
def test_bokehs_own_messages_are_corked_too_across_their_awaits(monkeypatch):
    import asyncio
    from types import SimpleNamespace

    from blocktrace.app.tuning import socket_tuning

    server_end, client = loopback_pair()
    seen = []

    async def bokehs_send(handler, message):  # stands in for Bokeh's: three frames, awaiting each
        for frame in message:
            seen.append(cork_state(server_end))
            server_end.sendall(frame)
            await asyncio.sleep(0)

    monkeypatch.setattr(socket_tuning, "_original_send", bokehs_send)
    handler = SimpleNamespace(ws_connection=SimpleNamespace(stream=SimpleNamespace(socket=server_end)))
    try:
        asyncio.run(socket_tuning._send_corked(handler, [b"ok-header", b"{}", b"{}"]))
        assert seen == [1, 1, 1] and cork_state(server_end) == 0
        client.settimeout(10)
        received = b""
        while len(received) < len(b"ok-header{}{}"):
            received += client.recv(100)
        assert received == b"ok-header{}{}"
    finally:
        server_end.close()
        client.close()


def test_bokehs_send_is_corked_once_the_routes_are_installed():
    from panel.io.server import WSHandler

    from blocktrace.app.server.routes import routes
    from blocktrace.app.tuning import socket_tuning

    routes()
    assert WSHandler.send_message is socket_tuning._send_corked
