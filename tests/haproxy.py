"""HAProxy on loopback with the shipped deploy/haproxy.cfg, for the tests that go through the balancer.

    process = start_haproxy(port, {"app1": 5006, "app2": 5007}, log_path)   # returns once /health answers
    stop_process(process)

The file is used as it is: its "${...}" placeholders (BT_BIND, BT_APP1, BT_APP2) come from HAProxy's
environment. Debian's haproxy package is required: without it the calling test fails, it does not skip.
"""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import ROOT

HAPROXY_CFG = ROOT / "deploy" / "haproxy.cfg"
START_TIMEOUT = 30.0  # seconds for HAProxy to answer /health through a backend it found up


def _health(port: int, tls: bool = False) -> int:
    """The status of GET /health through the balancer; 0 if nothing answers yet."""
    scheme, context = ("https", ssl._create_unverified_context()) if tls else ("http", None)  # our own test cert
    try:
        with urllib.request.urlopen(f"{scheme}://127.0.0.1:{port}/health", timeout=10, context=context) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0


def start_haproxy(port: int, backends: dict[str, int], log_path: Path,
                  tls_pem: Path | None = None) -> subprocess.Popen:
    """HAProxy in the foreground (-db) on deploy/haproxy.cfg, its placeholders filled from the environment. With
    `tls_pem` (a certificate and its key), it serves https on `port` instead, as a school's deployment would: the
    shipped file with only its bind line given the certificate."""
    haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not Path(haproxy).exists():
        pytest.fail("haproxy not found: install Debian's package with `apt-get install -y haproxy`", pytrace=False)
    env = {**os.environ, "BT_BIND": f"127.0.0.1:{port}",
           **{f"BT_{name.upper()}": f"127.0.0.1:{p}" for name, p in backends.items()}}
    cfg = HAPROXY_CFG
    if tls_pem is not None:
        cfg = log_path.with_name("haproxy-tls.cfg")
        shipped = HAPROXY_CFG.read_text()
        assert shipped.count('bind "${BT_BIND}"') == 1
        cfg.write_text(shipped.replace('bind "${BT_BIND}"', f'bind "${{BT_BIND}}" ssl crt "{tls_pem}"'))
    check = subprocess.run([haproxy, "-c", "-f", cfg], env=env, capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, f"{cfg.name} is not valid:\n{check.stdout}\n{check.stderr}"
    with log_path.open("w") as log:
        process = subprocess.Popen([haproxy, "-f", cfg, "-db"], env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + START_TIMEOUT
    while _health(port, tls_pem is not None) != 200:
        try:
            code = process.wait(timeout=0.2)  # waits a moment, and notices at once if HAProxy died
        except subprocess.TimeoutExpired:
            if time.monotonic() > deadline:
                stop_process(process)
                pytest.fail(f"HAProxy did not answer /health in {START_TIMEOUT:.0f} s:\n{log_path.read_text()}",
                            pytrace=False)
            continue
        pytest.fail(f"HAProxy exited with status {code}:\n{log_path.read_text()}", pytrace=False)
    return process


def stop_process(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
