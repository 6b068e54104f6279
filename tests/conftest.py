"""Shared fixtures: one real `blocktrace serve` process for the whole test session."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest

from blocktrace.app.serve import READY_LINE

ROOT = Path(__file__).resolve().parents[1]
# Seconds for a server to answer: a cold import of Panel and Bokeh and the warm-up that builds every page take
# 5-10 s on an idle 2-core machine, and 45-140 s in a CI lane at nice 10 beside the browser tests
# (tests/app/test_kill_final.py, which starts four servers, timed out at 60 s there).
START_TIMEOUT = 300.0


@dataclass
class Server:
    """A running `blocktrace serve` subprocess and the file its output goes to."""

    process: subprocess.Popen
    port: int
    log_path: Path
    data_dir: Path | None = None  # where its classroom secret lives; None with --no-classroom

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str = "/") -> str:
        return self.base_url + path

    def log(self) -> str:
        """Everything the server has written to stdout and stderr so far."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def secret(self) -> bytes:
        """The server's secret, as `blocktrace serve` reads it: BLOCKTRACE_SECRET, else the data dir's file."""
        from blocktrace.app.classroom.identity import SECRET_FILE, load_or_create_secret
        from blocktrace.app.serve import SECRET_ENV

        if os.environ.get(SECRET_ENV):
            return os.environ[SECRET_ENV].encode("utf-8")
        if self.data_dir is None or not (self.data_dir / SECRET_FILE).exists():
            raise RuntimeError("this server has no classroom secret (--no-classroom?)")
        return load_or_create_secret(self.data_dir)

    def teacher_password(self) -> str:
        """The teacher password this server made and keeps in its data folder (no --teacher-password given)."""
        from blocktrace.app.classroom.login_guard import PASSWORD_FILE

        if self.data_dir is None:
            raise RuntimeError("this server has no data folder (--no-classroom?)")
        return (self.data_dir / PASSWORD_FILE).read_text(encoding="utf-8").strip()

    def predict_off(self, route: str) -> dict[str, str]:
        """The query arguments of the teacher's link that opens `route` without the prediction step."""
        from blocktrace.app.server.predict_links import teacher_arguments

        return teacher_arguments(route, self.secret())

    def teacher_link(self, path: str) -> str:
        """`path` (with any query) as the teacher's link without the prediction step, e.g. for a browser."""
        parts = urlsplit(path)
        query = {**dict(parse_qsl(parts.query)), **self.predict_off(parts.path)}
        return f"{parts.path}?{urlencode(query)}"


def sent_to_login(response) -> bool:
    """A teacher's page answered a browser without the teacher's login (a `requests` response, redirects not
    followed): sent to the login page, with no challenge that would open the browser's own password box."""
    return response.status_code in (302, 303) and "WWW-Authenticate" not in response.headers \
        and response.headers["Location"].startswith("/teacher/login?next=")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def let_students_start_classes(data_dir: Path, extra: tuple[str, ...]) -> None:
    """Turn on the teacher's open-joining switch in the class database a server will use (`--db`, else the data
    dir's), as the teacher's room does: students may then join with any class code."""
    from blocktrace.app.classroom.store import EventStore, default_url

    with EventStore(extra[extra.index("--db") + 1] if "--db" in extra else default_url(data_dir)) as store:
        store.set_open_joining(True)


def start_server(log_path: Path, *extra: str, open_joining: bool = True) -> Server:
    """Start the server on a free port and return once it has printed its banner and /health answers 200.

    The banner, printed by this very process once it listens, is what makes the answer its own: the port was
    free when chosen, and under load the warm-up holds it unbound for a minute or more, in which another
    process (another test's server) may take it.

    Its classroom data goes beside the log (never into the working tree) unless `extra` says otherwise.
    With `open_joining` (the default) students may join with any class code, so that tests of everything else
    use the codes they like; the tests of joining itself pass False, as a new server starts.
    """
    port = free_port()
    if "--data-dir" not in extra and "--no-classroom" not in extra:
        extra = ("--data-dir", str(log_path.parent / "data"), *extra)
    data_dir = ROOT / extra[extra.index("--data-dir") + 1] if "--data-dir" in extra else None
    if open_joining and data_dir is not None:
        let_students_start_classes(data_dir, extra)
    log = log_path.open("w", encoding="utf-8")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "blocktrace.app.cli", "serve", "--port", str(port), *extra],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env,
    )
    log.close()  # the child keeps its own handle
    server = Server(process, port, log_path, data_dir)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if READY_LINE in server.log() and _healthy(server.url("/health")):
            return server
        try:
            # Waits a moment for the process, and notices at once if it died.
            code = process.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            continue
        raise RuntimeError(f"the server exited with status {code} before answering:\n{server.log()}")
    stop_server(server)
    raise RuntimeError(f"the server did not print its banner and answer /health within {START_TIMEOUT:.0f} s:\n"
                       f"{server.log()}")


def stop_process(process: subprocess.Popen) -> None:
    """Ask a process to end; kill it if it has not within 10 s."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def stop_server(server: Server) -> None:
    stop_process(server.process)


def module_server(tmp_path_factory: pytest.TempPathFactory, name: str, *extra: str,
                  open_joining: bool = True) -> Iterator[Server]:
    """For a fixture: a server of its own (log and data in a fresh folder named `name`), stopped after,
    having logged no traceback. `yield from module_server(...)`."""
    folder = tmp_path_factory.mktemp(name)
    server = start_server(folder / "server.log", "--data-dir", str(folder / "data"), *extra,
                          open_joining=open_joining)
    yield server
    stop_server(server)
    assert "Traceback" not in server.log()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One `python -m blocktrace.app.cli serve` for every test that needs a server (app and browser tests)."""
    running = start_server(tmp_path_factory.mktemp("server") / "server.log")
    yield running
    stop_server(running)


STUDENT_LAPTOP = {"X-Forwarded-For": "192.168.1.23"}  # a request from the classroom network, as lan_server sees it


@pytest.fixture(scope="session")
def lan_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server that takes the client's address from X-Forwarded-For (--use-xheaders), so a test on this
    machine can ask as a student's laptop would (send STUDENT_LAPTOP as headers)."""
    running = start_server(tmp_path_factory.mktemp("lan-server") / "server.log", "--use-xheaders")
    yield running
    stop_server(running)
