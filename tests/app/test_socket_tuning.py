"""The server's websocket ends send each frame at once (TCP_NODELAY), so an update is not held back.

Bokeh writes one update as several frames; with Nagle's algorithm the later frames wait for the
browser's delayed acknowledgement of the first. The probe serves a Panel app in its own process and
reads the option off the server's end of a real websocket, with and without our fix.
"""

from __future__ import annotations

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

    from app import socket_tuning
    from app.server import routes

    routes()
    assert WSHandler.open is socket_tuning._open_without_delay
