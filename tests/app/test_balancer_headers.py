"""Through HAProxy (deploy/haproxy.cfg as shipped): a client cannot choose the address or scheme the app sees.

The app behind the balancer runs with --use-xheaders, which makes Tornado believe X-Real-Ip (else the last
X-Forwarded-For entry) and X-Scheme (else X-Forwarded-Proto) from whoever sends them. The balancer must drop
what the client sent and set its own. First a recording backend shows exactly which forwarding headers arrive;
then a real `blocktrace serve` shows the teacher-login limit holding against a new spoofed address per guess.
Both placeholders of the configuration (app1, app2) name the same backend here: one process keeps one count.
"""

from __future__ import annotations

import base64
import http.client
import re
import secrets
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from blocktrace.app.classroom.login_guard import TEACHER_COOKIE
from blocktrace.app.settings import Settings
from tests.conftest import Server, free_port, start_server, stop_server
from tests.haproxy import start_haproxy, stop_process

PASSWORD = "teacher behind the balancer"
GUESSES = 300
LOG_TIMEOUT = 10.0  # seconds for an access-log line to reach the log file
FORWARDING = ("X-Real-Ip", "X-Forwarded-For", "Forwarded", "X-Forwarded-Proto", "X-Forwarded-Host",
              "X-Forwarded-Port", "X-Scheme")
SPOOFED = [  # what a hostile student might send, in the spellings and repetitions a client can choose
    ("X-Real-IP", "10.0.0.5"),
    ("x-real-ip", "10.0.0.6"),
    ("X-Forwarded-For", "10.0.0.5"),
    ("X-Forwarded-For", "192.0.2.1, 10.0.0.5"),
    ("Forwarded", "for=10.0.0.5;proto=https"),
    ("X-Forwarded-Proto", "https"),
    ("X-Scheme", "https"),
    ("X-Forwarded-Host", "evil.example"),
    ("X-Forwarded-Port", "443"),
]


def _request(url: str, headers: dict[str, str] | None = None, password: str | None = None,
             cookie: str | None = None) -> tuple[int, str, Message]:
    """(status, body, headers) of a GET with the Basic password and cookie given."""
    request = urllib.request.Request(url, headers=headers or {})
    if password is not None:
        request.add_header("Authorization", "Basic " + base64.b64encode(f"teacher:{password}".encode()).decode())
    if cookie is not None:
        request.add_header("Cookie", cookie)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode(), response.headers
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(), err.headers


def _raw_get(port: int, path: str, headers: list[tuple[str, str]]) -> int:
    """A GET written by hand, so header names may repeat and keep their case; returns the status."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.putrequest("GET", path)
        for name, value in headers:
            connection.putheader(name, value)
        connection.endheaders()
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


class Recorder(BaseHTTPRequestHandler):
    """A backend that answers 200 and keeps every request's headers, by path."""

    seen: dict[str, list[tuple[str, str]]] = {}

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.seen[self.path] = list(self.headers.items())
        try:
            self.send_response(200)
            self.send_header("Content-Length", "3")
            self.end_headers()
            self.wfile.write(b"ok\n")
        except ConnectionError:  # HAProxy's health check hangs up without reading the answer
            pass

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, dict]]:
    """HAProxy in front of the recording backend: (the balancer's port, the headers seen by path)."""
    backend = ThreadingHTTPServer(("127.0.0.1", 0), type("Recording", (Recorder,), {"seen": {}}))
    thread = threading.Thread(target=backend.serve_forever, daemon=True)
    thread.start()
    port = free_port()
    haproxy = start_haproxy(port, {"app1": backend.server_port, "app2": backend.server_port},
                            tmp_path_factory.mktemp("recorded") / "haproxy.log")
    try:
        yield port, backend.RequestHandlerClass.seen
    finally:
        stop_process(haproxy)
        backend.shutdown()
        backend.server_close()


def test_the_balancer_replaces_every_forwarding_header_a_client_sends(recorded) -> None:
    """Whatever forwarding headers the client sends, the backend gets exactly one X-Real-Ip (the client's real
    address), X-Forwarded-Proto: http, and none of the others."""
    port, seen = recorded
    path = f"/probe-{secrets.token_hex(4)}"
    assert _raw_get(port, path, SPOOFED) == 200
    forwarding = [(name.lower(), value) for name, value in seen[path] if name.lower() in {
        f.lower() for f in FORWARDING}]
    assert sorted(forwarding) == [("x-forwarded-proto", "http"), ("x-real-ip", "127.0.0.1")]


@pytest.fixture(scope="module")
def balanced_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Server]]:
    """One `blocktrace serve --use-xheaders` with a teacher password, behind HAProxy: (balancer port, app)."""
    folder = tmp_path_factory.mktemp("balanced-app")
    app = start_server(folder / "server.log", "--teacher-password", PASSWORD, "--use-xheaders", "--access-log")
    port = free_port()
    try:
        haproxy = start_haproxy(port, {"app1": app.port, "app2": app.port}, folder / "haproxy.log")
    except BaseException:
        stop_server(app)
        raise
    try:
        yield port, app
    finally:
        stop_process(haproxy)
        stop_server(app)
    log = app.log()
    assert "Traceback" not in log, log[max(0, log.find("Traceback") - 500):][:4000]


def _address_logged(app: Server, path: str) -> str:
    """The client address in the app's access-log line for `path` (Tornado logs it in parentheses)."""
    deadline = time.monotonic() + LOG_TIMEOUT  # Tornado writes the line just after sending the answer
    while not (match := re.search(rf" GET {re.escape(path)} \(([^)]*)\)", app.log())) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert match, f"no access-log line for {path}:\n{app.log()[-2000:]}"
    return match.group(1)


def test_a_spoofed_address_reaches_the_app_only_when_the_balancer_is_bypassed(balanced_app) -> None:
    """The app believes X-Real-Ip (so it must only be reachable through the balancer), and through the balancer
    it sees the balancer's view of the client, not the header."""
    port, app = balanced_app
    spoof = [("X-Real-Ip", "10.0.0.5")]
    direct, through, mixed = (f"/health?probe={secrets.token_hex(4)}" for _ in range(3))
    assert _raw_get(app.port, direct, spoof) == 200
    assert _raw_get(port, through, spoof) == 200
    assert _raw_get(port, mixed, SPOOFED) == 200
    assert _address_logged(app, direct) == "10.0.0.5"  # the control: --use-xheaders trusts the header
    assert _address_logged(app, through) == "127.0.0.1"
    assert _address_logged(app, mixed) == "127.0.0.1"


def test_a_spoofed_scheme_does_not_reach_the_app(balanced_app) -> None:
    """X-Scheme/X-Forwarded-Proto: https from a client on plain HTTP: the teacher cookie is not marked Secure
    through the balancer (it is, as a control, when the app is asked directly with those headers)."""
    port, app = balanced_app
    https = {"X-Scheme": "https", "X-Forwarded-Proto": "https"}
    status, _body, headers = _request(f"http://127.0.0.1:{app.port}/teacher", https, PASSWORD)
    assert status == 200 and "secure" in headers.get("Set-Cookie", "").lower()
    status, _body, headers = _request(f"http://127.0.0.1:{port}/teacher", https, PASSWORD)
    cookie = headers.get("Set-Cookie", "")
    assert status == 200 and f"{TEACHER_COOKIE}=" in cookie and "secure" not in cookie.lower()


def test_a_new_spoofed_address_per_guess_is_still_limited(balanced_app) -> None:
    """300 wrong passwords through the balancer, each naming a new X-Real-Ip and X-Forwarded-For: only the
    first `login_failures` are checked (403), the rest get 429; the teacher's browser, logged in before, still
    gets in, while a browser that never logged in is refused until the guessing stops."""
    port, app = balanced_app
    teacher = f"http://127.0.0.1:{port}/teacher"
    status, _body, headers = _request(teacher, password=PASSWORD)
    assert status == 200
    device = re.search(rf"{TEACHER_COOKIE}=([^;]+)", headers.get("Set-Cookie", ""))
    assert device, headers.get("Set-Cookie")
    assert "httponly" in headers["Set-Cookie"].lower() and "samesite=lax" in headers["Set-Cookie"].lower()
    statuses = []
    for n in range(GUESSES):
        spoof = f"10.{n // 250}.{n % 250}.7"
        statuses.append(_request(teacher, {"X-Real-Ip": spoof, "X-Forwarded-For": spoof}, f"guess {n}")[0])
    failures = Settings().login_failures  # the default: the servers here set no BLOCKTRACE_LOGIN_FAILURES
    assert statuses == [403] * failures + [429] * (GUESSES - failures)
    status, _body, headers = _request(teacher, password=PASSWORD)
    assert status == 429 and int(headers["Retry-After"]) > 0
    status, body, _headers = _request(teacher, password=PASSWORD, cookie=f"{TEACHER_COOKIE}={device.group(1)}")
    assert status == 200 and "joined the class" in body
    refused = re.findall(r"teacher login: (\S+) refused", app.log())
    assert refused == ["127.0.0.1"], refused  # the limiter counted the balancer's view of the client, once
